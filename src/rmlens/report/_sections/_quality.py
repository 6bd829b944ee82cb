"""The reward models: their accuracy, training regime, estimator and reliability."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rmlens.memorization import (
    CHANCE,
    NEAR_CHANCE,
    WEAK_ACCURACY,
    WEAK_MARGIN,
    WEAK_NOT_LEARNED,
    AuditSentences,
    accuracy_interval,
    audit_sentences,
    plan_validation,
)
from rmlens.rewards.objectives import REGISTRY, Objective

from .._html import esc, fmt, note, table
from ._base import Section

_SPLIT_NAMES = {
    "in_train": "trained on (in)",
    "validation": "validation (neither in nor out)",
    "held_out": "held out (out)",
}


def quality_line(summary: dict[str, Any] | None) -> str:
    """One sentence on the RMs' accuracy, for beside the map ('' without rm_quality); with
    the length-only rule's accuracy when the audit's weak-RM warning gives it."""
    quality = (summary or {}).get("rm_quality")
    if not isinstance(quality, dict):
        return ""
    try:
        fit = quality["in_train"]["accuracy"]["mean"]
        held = quality["held_out"]["accuracy"]["mean"]
    except (KeyError, TypeError):
        return ""
    length = _finite((_audit_warning(summary, "weak_rm") or {}).get("length_rule_accuracy"))
    rule = "" if length is None else (
        f"; a rule that picks the longer response: {fmt(length)}")  # fmt: skip
    if _finite(held) is None:  # a one-checkpoint audit: every pair trained on
        return f" The reward model reaches accuracy {fmt(fit)} on the pairs it trained on."
    return (
        f" The reward models reach accuracy {fmt(fit)} on the pairs they trained on and "
        f"{fmt(held)} on the pairs they held out (chance 0.5{rule})."
    )


def quality_section(
    summary: dict[str, Any] | None, plan: pd.DataFrame | None = None
) -> Section | None:
    """The RMs' quality (summary.json ``rm_quality``), training regime and warnings; the
    validation groups are counted from ``plan`` (plan.parquet) when it has them."""
    if not isinstance(summary, dict):
        return None
    quality = summary.get("rm_quality")
    warnings = summary.get("warnings") or []
    if not isinstance(quality, dict) and not warnings:
        return None
    said = audit_sentences(summary, plan_validation(plan))
    body = "".join(note(message, "warning") for _, message in said.warnings)
    if said.standing:  # a one-checkpoint audit: what its CM is worth on this data
        body += note(said.standing, "note" if "check" in summary else "warning")
    if said.shortcut:  # what held-out accuracy rests on, beside what it is
        body += note(said.shortcut, "warning")
    body += f'<p class="note">{_fit_words(summary, quality)}{esc(_chance_sentence(summary))}</p>'
    if isinstance(quality, dict):
        body += _quality_table(quality)
    body += "".join(note(s) for s in (said.estimator, said.mode, said.checkpoint, said.exactness,
                                       said.damping) if s)  # fmt: skip
    body += _objective_block(summary.get("objective"))
    body += _reliability_block(summary.get("reliability"), said)
    body += "".join(note(s) for s in (said.regime, said.membership) if s)
    body += _intervals_block(summary.get("intervals"))
    return Section("quality", "Reward models", body)


def _fit_words(summary: dict[str, Any], quality: Any) -> str:
    """What the table measures, and how TM and TG come from it: runs that trained on a pair
    and runs that did not, or a one-checkpoint audit's one RM and each group's removal."""
    if isinstance(summary.get("checkpoint"), dict):
        return (
            "How well the audited reward model fits the pairs it trained on: accuracy (a tie "
            f"counts 1/2) and log-loss, {_over_runs(quality)}. TM is its probability of "
            "preferring a pair's chosen response; TG the same with the pair's group removed "
            "from its training by a Gauss-Newton step."
        )
    return (
        "How well the audited reward models fit the pairs they trained on and how well they "
        "do on pairs they never saw: accuracy (a tie counts 1/2) and log-loss, "
        f"{_over_runs(quality)}. TM averages the first kind of run, TG the second."
    )


def _over_runs(quality: Any) -> str:
    """How the table's figures come from the runs: "mean ± std over runs", or one run's."""
    runs = quality.get("runs") if isinstance(quality, dict) else None
    return "of the one run" if runs is not None and len(runs) == 1 else "mean ± std over runs"


def _quality_table(quality: dict[str, Any]) -> str:
    """Accuracy and log-loss per split of the pairs, mean ± std over runs (one run: its
    value)."""
    one_run = len(quality.get("runs") or []) == 1
    rows = []
    for split, name in _SPLIT_NAMES.items():
        part = quality.get(split)
        if not isinstance(part, dict):
            continue
        if _finite((part.get("accuracy") or {}).get("mean")) is None:
            continue  # no such pairs (a one-checkpoint audit holds none out)
        cells = {}
        for metric, label in (("accuracy", "accuracy"), ("log_loss", "log-loss")):
            value = part.get(metric) or {}
            spread = "" if one_run else f" ± {fmt(value.get('std'))}"
            cells[label] = f"{fmt(value.get('mean'))}{spread}"
        interval = accuracy_interval(quality, split)
        if interval is not None:
            cells["accuracy"] += f" [{fmt(interval[0])}, {fmt(interval[1])}]"
            name = f"{name}, {quality['runs'][0][split]['n']} pairs"
        rows.append({"pairs": name, **cells})
    if not rows:
        return ""
    caption = "chance: accuracy 0.5, log-loss 0.693"
    if one_run:
        caption += "; accuracy [95% Wilson interval over the pairs]"
    return table(pd.DataFrame(rows), caption=caption)


def _audit_warning(summary: dict[str, Any] | None, code: str) -> dict[str, Any] | None:
    """summary.json's warning with this ``code`` (``weak_rm``, ``barely_generalize``), if any."""
    for warning in (summary or {}).get("warnings") or []:
        if isinstance(warning, dict) and warning.get("code") == code:
            return warning
    return None


def _finite(value: Any) -> float | None:
    """``value`` as a finite float, else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _chance_sentence(summary: dict[str, Any]) -> str:
    """What the held-out accuracy says about TG and CM, by the rules of the audit's warnings
    (``rmlens.memorization._quality``), so the page never calls weak RMs good: within
    ``NEAR_CHANCE`` of chance, below it, weak (the ``weak_rm`` warning: under
    ``WEAK_ACCURACY``, near the length-only rule, or many pairs not learned), or above it
    ('' without the figure)."""
    try:
        held = _finite(summary["rm_quality"]["held_out"]["accuracy"]["mean"])
    except (KeyError, TypeError):
        return ""
    if held is None:
        return ""
    if abs(held - CHANCE) <= NEAR_CHANCE or _audit_warning(summary, "barely_generalize"):
        return (f" Held-out accuracy {held:.3f} is within {NEAR_CHANCE:g} of chance "
                f"({CHANCE:g}): the RMs barely generalize, TG sits near {CHANCE:g}, and CM "
                "mostly measures fitting.")  # fmt: skip
    if held < CHANCE:
        return (f" Held-out accuracy {held:.3f} is below chance ({CHANCE:g}): on pairs they "
                "never saw the RMs prefer the rejected response more often than not, which "
                "pulls TG down and CM up.")  # fmt: skip
    weak = _audit_warning(summary, "weak_rm")
    if weak is not None or held < WEAK_ACCURACY:
        return _weak_sentence(held, weak or {})
    return (f" Held-out accuracy {held:.3f} is {held - CHANCE:.3f} above chance "
            f"({CHANCE:g}): the RMs generalize, so TG measures what carries over to unseen "
            "pairs and CM what the RMs fit beyond it.")  # fmt: skip


def _weak_sentence(held: float, weak: dict[str, Any]) -> str:
    """The held-out accuracy of weak RMs against chance and against what made them weak
    (the ``weak_rm`` warning's figures, by its thresholds)."""
    reasons = []
    if held < WEAK_ACCURACY:
        reasons.append(f"under {WEAK_ACCURACY:g}")
    length = _finite(weak.get("length_rule_accuracy"))
    near_length = length is not None and held < length + WEAK_MARGIN
    if near_length:
        gap = f"only {held - length:.3f} above" if held >= length else f"{length - held:.3f} below"
        reasons.append(f"{gap} a rule that picks the longer response ({length:.3f} on the "
                       "same pairs)")  # fmt: skip
    share = _finite(weak.get("not_learned_share"))
    if share is not None and share >= WEAK_NOT_LEARNED:
        reasons.append(f"with {share:.0%} of pairs not learned even when trained on (TM < 0.5)")
    listed = " and ".join(reasons) if len(reasons) < 3 else (
        f"{', '.join(reasons[:-1])}, and {reasons[-1]}")  # fmt: skip
    why = f" but {listed}" if reasons else ""
    mostly = " (it may be mostly length)" if near_length else ""
    return (f" Held-out accuracy {held:.3f} is {held - CHANCE:.3f} above chance "
            f"({CHANCE:g}){why}: the RMs are weak, so TG measures what a weak RM carries over "
            f"to unseen pairs{mostly} and CM what it fits beyond that.")  # fmt: skip


def _intervals_block(intervals: Any) -> str:
    """Which intervals summary.json gives, and why some of them are NaN."""
    if not (isinstance(intervals, dict) and isinstance(intervals.get("nan"), dict)):
        return ""
    nan = intervals["nan"]
    method = esc(str(intervals.get("method", "bootstrap")))
    if not any(nan.get(k) for k in ("cm", "tm", "tg")):
        return f'<p class="note">Intervals: {method}; none is NaN.</p>'
    return (
        f'<p class="note">Intervals: {method}; '
        f"NaN for {esc(fmt(nan.get('cm')))} pairs' CM ({esc(fmt(nan.get('tm')))} TM, "
        f"{esc(fmt(nan.get('tg')))} TG): {esc(str(intervals.get('why_nan', '')))}.</p>"
    )


def _objective_block(record: Any) -> str:
    """What the runs' objective did (summary.json ``objective``), for any but plain bt."""
    name = record.get("objective") if isinstance(record, dict) else None
    if name is None or (isinstance(name, str) and REGISTRY.get(name, Objective).plain):
        return ""  # plain Bradley-Terry (a list: the runs' objectives differ)
    parts = [f"Training objective: <code>{esc(str(record['objective']))}</code>"]
    if "mean_weight_cv" in record:
        parts.append(
            "its per-pair loss weights, mean over runs: coefficient of variation "
            f"{esc(fmt(record['mean_weight_cv'], 3))}, from "
            f"{esc(fmt(record.get('mean_weight_min'), 3))} to "
            f"{esc(fmt(record.get('mean_weight_max'), 3))}, "
            f"{esc(fmt(record.get('mean_n_zero_weight'), 1))} pairs at weight 0"
        )  # fmt: skip
    if "guide_tm_mean" in record:
        parts.append(
            "the nested paired audit inside each run's training groups gave mean in-run TM "
            f"{esc(fmt(record['guide_tm_mean'], 3))}, TG {esc(fmt(record['guide_tg_mean'], 3))}, "
            f"CM {esc(fmt(record['guide_cm_mean'], 3))}, and "
            f"{esc(fmt(record.get('guide_n_not_learned'), 1))} pairs not learned (in-run TM "
            "&lt; 0.5)"
        )  # fmt: skip
    if record.get("guide_margin_from"):
        source = "the data's margin" if record["guide_margin_from"] == "data" else (
            "the reward margin of a Bradley-Terry head (the data has none)")  # fmt: skip
        parts.append(f"margins from {source}")
    if "mean_dro_q_max" in record:
        parts.append(f"largest group weight {esc(fmt(record['mean_dro_q_max'], 3))}")
    idle = record.get("runs_inactive") or []
    parts.append(f"its mechanism stayed inactive in {len(idle)} of {record.get('n_runs')} runs"
                 if idle else "its mechanism acted in every run")  # fmt: skip
    return f'<p class="note">{"; ".join(parts)}.</p>'


def _reliability_block(reliability: Any, said: AuditSentences) -> str:
    """Split-half reliability of TM, TG, CM (summary.json ``reliability``) as a table, with
    what its figures say (``said.reliability``) as its caption, then its notes."""
    if not isinstance(reliability, dict):
        return ""
    if (reliability.get("n_runs") or 0) < 2:  # no halves to split: why, and what stands in
        return "".join(note(s) for s in said.reliability_notes)
    units = ("the runs (each paired run scores every pair on both sides)"
             if reliability.get("split") == "runs" else "the whole repeats of the plan")
    html = (
        f'<p class="note">Reliability of the ranking of pairs: {units} '
        "split into two halves, each score estimated from each half, Spearman correlation "
        "across pairs (mean ± std over splits), Spearman-Brown corrected to the "
        f"{esc(fmt(reliability.get('n_runs')))} runs used; the runs that 0.8 would need "
        "come from the Spearman-Brown prophecy formula.</p>"
    )
    rows = []
    for score in ("tm", "tg", "cm"):
        part = reliability.get(score)
        if not isinstance(part, dict):
            continue
        rows.append(
            {
                "score": score.upper(),
                "split-half": (
                    f"{fmt(part.get('split_half'), 2)} ± {fmt(part.get('split_half_std'), 2)}"
                ),
                "Spearman-Brown": (
                    f"{fmt(part.get('spearman_brown'), 2)} ± "
                    f"{fmt(part.get('spearman_brown_std'), 2)}"
                ),
                "runs for 0.8": fmt(part.get("runs_for_0_8")),
            }
        )
    if rows:
        html += table(pd.DataFrame(rows), caption=str(said.reliability))
    return html + "".join(note(s) for s in said.reliability_notes)
