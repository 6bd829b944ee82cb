"""What the audit says while it runs: status lines, warnings, and the words of its notes."""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._errors import RmlensWarning
from rmlens.memorization._run_folders import RunFailure
from rmlens.progress import status

PAIRED_SIGNIFICANCE = (
    "paired CM: an RM's step with a pair's group (the convex head's, or an influence step's) "
    "almost always scores that pair higher than without it (a training pair's influence on "
    "itself is positive), and the "
    "paired differences share each run's noise, so nearly every pair's interval lies above "
    "0. Significance here says the estimate is precise, not that the pair stands out; CM's "
    "size (the memorized category) does"
)


# Frozen audits against a fine-tuned one of the same pairs and plan (benchmarks/transfer.py;
# docs: Method > Memorization, "Frozen and fine-tuned"): CM's Spearman across pairs with a
# LoRA-tuned SmolLM2-135M audit's, raw and corrected for both sides' reliability.
TRANSFER_PAIRS = "the 120 shortest HH-RLHF harmless pairs"
TRANSFER = {"smollm2-135m": (0.73, 0.96), "minilm": (0.35, 0.48)}


# Each audit's CM against brute-force retraining of a fine-tuned RM on real pairs, and how far
# to trust it (benchmarks/findings.py memorization-trust; the documentation's Findings page).
TRUST = (
    "on real pairs (the documentation's Findings page: 1,000 HH-RLHF harmless pairs), CM per "
    "pair agreed with 25 brute-force retrainings of a LoRA MiniLM RM at Spearman 0.48 for a "
    "5-run paired audit (0.88 of what both audits' own noise allows), 0.47 for the "
    "one-checkpoint audit and 0.27 for a frozen audit of the same pairs: trust a fine-tuned "
    "audit's CM to order many pairs roughly as retraining would, a frozen audit's only loosely "
    "for a fine-tuned RM, and none of them as one pair's verdict"
)


def mode_note(config) -> str | None:
    """What a frozen audit measures, and how far it was found to speak for a fine-tuned RM
    of the same pairs (``TRANSFER``); None for a fine-tuned audit."""
    if config.mode != "frozen":
        return None
    figures = " and ".join(f"{raw:.2f} ({corrected:.2f} corrected) for frozen {model}"
                           for model, (raw, corrected) in TRANSFER.items())  # fmt: skip
    return (
        f"frozen audit: a head per run on fixed {config.model} features, so its pairs are what "
        "a probe of these features memorizes. Against a LoRA-tuned SmolLM2-135M audit of "
        f"{TRANSFER_PAIRS}, CM per pair agreed at Spearman {figures}, corrected for "
        "reliability; that LoRA RM moved little from its base. Table: the documentation, "
        f"Method > Memorization, 'Frozen and fine-tuned'. How far to trust it: {TRUST}"
    )


def say_start(pairs: pd.DataFrame, groups: pd.Series, group_note: str, estimator_note: str,
              warning: dict | None, quiet: bool, precision: str = "") -> None:  # fmt: skip
    """The data, its groups, the estimator and the precision as status lines; an explicit
    paired estimator with large groups as a warning (at ``audit``'s caller)."""
    if not quiet:
        status(f"{len(pairs)} pairs, {groups.nunique()} groups: {group_note}")
        status(f"estimator: {estimator_note}")
        if precision:
            status(precision)
    if warning:
        warnings.warn(warning["message"], RmlensWarning, stacklevel=3)


def say_growing(target: dict, n_runs: int, k: int) -> None:
    """The status line of an audit that adds a repeat towards its target reliability."""
    predicted = target["runs_predicted"]
    status(
        f"{target['message']}"
        + (f" (about {predicted} runs predicted)" if predicted else "")
        + f": adding repeat {n_runs // k + 1} (runs {n_runs} to {n_runs + k - 1})"
    )


def run_failed(failure: RunFailure) -> str:
    return (
        f"run {failure.run} failed {failure.attempts} times ({failure.error}); the audit goes "
        "on without it"
    )


def systematic_failure(failure: RunFailure, in_a_row: int, everything: bool) -> str:
    why = "every run" if everything else f"{in_a_row} runs in a row"
    return (
        f"{why} failed, so the failure looks systematic: stopping with run {failure.run}'s "
        "error"
    )


def say_summary(summary: dict) -> None:
    """summary.json's warnings (and an incomplete audit) as warnings at ``audit``'s caller;
    a reached target as a status line (one out of reach is among the warnings)."""
    for warning in summary.get("warnings", []):
        warnings.warn(warning["message"], RmlensWarning, stacklevel=3)
    message = incomplete_message(summary)
    if message:
        warnings.warn(message, RmlensWarning, stacklevel=3)
    target = summary.get("target_reliability") or {}
    if target.get("reached"):
        status(target["message"])


def incomplete_message(summary: dict) -> str | None:
    """One line saying what an incomplete audit lacks, or None when it is complete."""
    if summary.get("complete", True):
        return None
    failed = summary["failed_runs"]
    runs = ", ".join(str(f["run"]) for f in failed)
    lacking = summary["pairs_lacking_runs"]["count"]
    return (
        f"incomplete audit: {len(failed)} of {summary['n_runs_planned']} runs failed "
        f"(runs {runs}; errors in runs/<run>/error.json); {lacking} of {summary['n_pairs']} "
        "pairs lack in- or out-runs and have NaN TM/TG/CM; the others use the finished runs. "
        "Start the same command again to retry the failed runs."
    )


# The damping (x tr(G)/min(q, n)) of a checkpoint without an evaluation split to calibrate
# on: the geometric mean of what calibration to brute force chose for LoRA RMs on the
# benchmark (benchmarks/finetune_paired.py: 3.58 on MiniLM, 300 HH pairs; 1.37 on
# SmolLM2-135M, 120 HH pairs); and what one-checkpoint CM reached there.
CHECKPOINT_DAMPING = 2.2
STANDING = (
    "on the benchmark (LoRA RMs trained by rmlens), one-checkpoint CM ranked pairs as a 5-run "
    "paired audit did at Spearman 0.95 on 300 synthetic pairs with planted mechanisms, and "
    "at 0.66 (MiniLM, 300 pairs), 0.85 (MiniLM, 1,000 pairs) and 0.65 (SmolLM2-135M, 120 "
    "pairs) on the shortest HH-RLHF pairs, which the RMs barely generalize; with brute-force "
    "references it agreed at 0.77 (synthetic, 40 runs), 0.54 (MiniLM on 300 HH pairs, 40 "
    "runs, as the paired audit) and 0.28 (SmolLM2 on HH, 24 runs, against the paired audit's "
    "0.47); its damping sets CM's size, so its mean CM rests on how well the RM's evaluation "
    "split measures its held-out p (without one, on the benchmark's damping); "
    + TRUST
    + "; measured with check runs on the data at hand it ranged from 0.82 (600 HH pairs) to "
    "0.50 (SQuALITY, where one RM's CM agreed with another seed's at 0.55): one training "
    "draw's noise, which `check_runs` measures on yours"
)

# The cheaper reading (``blocks``) against every weight (benchmarks/checkpoint_blocks.py)
BLOCKS_STANDING = (
    "read through the linear layers of its last blocks only, which on the benchmark (SmolLM2-"
    "135M, 30 blocks, every weight fine-tuned on 96 HH-RLHF pairs) ranked pairs by CM as "
    "every weight did at Spearman 0.74 (1 block, 0.08 of the time), 0.77 (8 blocks, 0.18), "
    "0.96 (16 blocks, 0.33) and 1.00 (all 30, 0.54)"
)


def checkpoint_sentence(checkpoint: dict) -> str:
    """summary.json's ``checkpoint`` in one sentence: the damping, and how it was chosen.

    Parameters
    ----------
    checkpoint : dict
        ``damping`` and ``damping_how``.

    Returns
    -------
    str
        No final period.
    """
    return (f"One-checkpoint damping {checkpoint['damping']:.3g} x tr(G)/min(q, n), "
            f"{checkpoint.get('damping_how', 'given')}")


def checkpoint_rows(summary: dict) -> dict[str, tuple[str, str]]:
    """A one-checkpoint audit's RM and its training pairs; its standing where the reliability
    note does not already give it (its damping is the ``checkpoint`` sentence)."""
    checkpoint = summary.get("checkpoint")
    if not isinstance(checkpoint, dict):
        return {}
    rows = {}
    if checkpoint.get("rm"):
        rows["checkpoint"] = ("RM audited (one checkpoint)", str(checkpoint["rm"]))
    if checkpoint.get("training_pairs"):
        rows["checkpoint_pairs"] = ("its training pairs", str(checkpoint["training_pairs"]))
    standing = str(checkpoint.get("standing") or "")
    if standing and standing not in str((summary.get("reliability") or {}).get("reason")):
        rows["checkpoint_standing"] = ("the benchmark's standing of one-checkpoint CM",
                                       standing[0].upper() + standing[1:])  # fmt: skip
    return rows


def check_sentence(check: dict) -> str:
    """summary.json's ``check`` in words: the one-checkpoint audit's standing on this data.

    Parameters
    ----------
    check : dict
        :func:`runs_agreement`'s result, with ``regime_from`` (whose settings the runs used).

    Returns
    -------
    str
        No final period.
    """
    cm, regime = check["cm"], check.get("regime_from") or "the RM"
    text = (f"Measured on this data: one-checkpoint CM ranks the {check['n_pairs']:,} pairs "
            f"as {check['runs']} check runs in the regime of {regime} do, at Spearman "
            f"{_r(cm)}")  # fmt: skip
    if check.get("share") is not None:
        text += (f", {check['share']:.2f} [{check['share_lo']:.2f}, {check['share_hi']:.2f}] "
                 f"of what their own reliability ({check['reliability']:.2f}) allows")
    else:
        text += " (the check runs' CM reliability is not above 0, so no share of it)"
    text += f"; TM {_r(check['tm'])}, TG {_r(check['tg'])}"
    names = {"margin": "margin", "group_size": "group size"}
    for name, link in (check.get("links") or {}).items():
        sides = [f"{_r(link[who])} {words}" for who, words in
                 (("checkpoint", "here"), ("check", "in the check runs")) if who in link]
        text += f"; CM's link with the {names.get(name, name)}: {', '.join(sides)}"
    memorized = check.get("memorized") or {}
    if memorized:
        text += (f"; categorized memorized: {memorized['checkpoint']:.0%} here, "
                 f"{memorized['check']:.0%} in the check runs")
    text += " (95% intervals over groups)"
    if "not_learned" in (check.get("warnings") or []):
        return text + (". The check runs did not learn either (check/summary.json): both "
                       "audits read noise, and their agreement says how alike the gradients "
                       "are, not what was memorized")  # fmt: skip
    if check.get("share") is not None and check["share_hi"] < 0.85:  # STANDING's figure
        text += (f". The check runs' own audit ({check.get('folder', 'check')}/, CM reliability "
                 f"{check['reliability']:.2f}) is the firmer reading of these pairs (on "
                 "SQuALITY, the documentation's Findings page, one checkpoint fell short by "
                 "one training draw's noise)")  # fmt: skip
    return text


def _r(part: dict) -> str:
    lo, hi = part.get("lo"), part.get("hi")
    span = (f" [{lo:.2f}, {hi:.2f}]" if isinstance(lo, (int, float)) and math.isfinite(lo)
            and isinstance(hi, (int, float)) and math.isfinite(hi) else "")  # fmt: skip
    return f"{part['spearman']:.2f}{span}"


# the cheaper reading the console times: on the benchmark it ranked pairs by CM as every
# weight did at Spearman 0.77, in 0.18 of the time (BLOCKS_STANDING)
CHEAPER_BLOCKS = 8


def reading_times(net, examples: list, runtime, n: int, folder: Path,
                  blocks: int = CHEAPER_BLOCKS) -> str:
    """What reading a merged or full RM costs, measured, not guessed: the gradient of one of
    ``examples`` (the fastest of them) through every weight and through the last ``blocks``
    blocks, times ``n`` pairs; and the cheaper readings, in words."""
    # lazy: torch, transformers load only when this runs
    from rmlens.influence import pair_gradients, reading_last

    def seconds() -> float:
        times = []
        for i in range(len(examples)):
            start = time.perf_counter()
            pair_gradients(net, examples, runtime, batches=[np.array([i])])
            times.append(time.perf_counter() - start)
        return min(times)

    every = seconds()
    try:
        with reading_last(net, blocks):
            part = seconds()
    except ValueError:  # no blocks to read through
        part = None
    said = (f"{folder}: every weight takes a backward pass per pair: about {_duration(every * n)}"
            f" for {n} pairs ({every:.2g} s per pair, measured)")  # fmt: skip
    if part is not None:
        said += (f"; --checkpoint-blocks {blocks} reads the last {blocks} blocks in about "
                 f"{_duration(part * n)} (on the benchmark its CM ranked pairs as every "
                 "weight's did at Spearman 0.77)")
    return said + ("; cheaper still: save the LoRA adapter unmerged (TRL's save_model with a "
                   "peft_config) and audit that folder, read through its adapters")


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
