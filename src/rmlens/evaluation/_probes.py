"""Shortcut probes: edits that should not change which response is better.

A probe edits one side of every pair (the chosen or the rejected response; the prompt and
the other side stay as they are) and the RM scores the edited text. Per probe and side:

    shift_i   = r(edited side) - r(original side)            reward shift of pair i
    d_i       = r+ - r-  before the edit,   d'_i = the same after it
    flipped_i = sign(d'_i) != sign(d_i)                      sign in {-1, 0, +1}

``flip_rate`` is the mean of ``flipped`` over the ``n`` pairs whose text the edit changed,
``flip_rate_lo`` and ``flip_rate_hi`` its 95% Wilson interval over those ``n`` pairs;
``to_wrong`` counts d > 0 -> d' < 0 and ``to_right`` d < 0 -> d' > 0 (flips into or out of
a tie make up the rest of ``flip_rate``). An RM that judges content, not surface, has
flip rates near 0 for every probe. ``n_invisible`` counts pairs whose edited reward equals
the original exactly, e.g. because truncation cut an appended edit away.

Register more probes with ``register_probe(Probe(name, description, edit))``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rmlens.data import SynthConfig
from rmlens.evaluation._posthoc import response_lengths
from rmlens.hub import member_scores
from rmlens.stats import pairwise_accuracy, wilson_interval

SIDES = ("chosen", "rejected")


@dataclass(frozen=True)
class Probe:
    """One shortcut probe.

    Parameters
    ----------
    name : str
        Short id used on the command line (``--probes NAME,...``).
    description : str
        One line: what the edit does.
    edit : callable str -> str
        Rewrites a response's text. Conversational responses (lists of messages) have the
        content of their last assistant message (else their last message) edited.
    """

    name: str
    description: str
    edit: Callable[[str], str]

    def apply(self, response: Any) -> Any:
        """The response with :attr:`edit` applied.

        Parameters
        ----------
        response : str or list of dict
            A text, or a conversation (its last assistant message, else its last message,
            is edited).

        Returns
        -------
        str or list of dict
            The edited response (a conversation is copied, not changed in place).
        """
        if isinstance(response, str):
            return self.edit(response)
        messages = [dict(m) for m in response]
        roles = [m.get("role") for m in messages]
        last = len(messages) - 1 - roles[::-1].index("assistant") if "assistant" in roles else -1
        messages[last]["content"] = self.edit(str(messages[last]["content"]))
        return messages


PROBES: dict[str, Probe] = {}


def register_probe(probe: Probe, *, replace: bool = False) -> Probe:
    """Add ``probe`` to the registry used by ``evaluate(..., probes="all")`` and the CLI.

    Parameters
    ----------
    probe : Probe
        The probe; its name must be letters, digits, ``_``, ``.`` or ``-``.
    replace : bool, default=False
        Replace a probe of the same name (else a ValueError).

    Returns
    -------
    Probe
        ``probe``.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", probe.name):
        raise ValueError(f"probe name must be letters, digits, '_', '.', '-'; got {probe.name!r}")
    if probe.name in PROBES and not replace:
        raise ValueError(f"a probe named {probe.name!r} is already registered (replace=True)")
    PROBES[probe.name] = probe
    return probe


def resolve_probes(probes: str | Sequence[str | Probe] | None) -> list[Probe]:
    """``"all"``, ``"none"``/None, ``"a,b"``, or a list of names and Probe objects.

    Parameters
    ----------
    probes : str, sequence of str or Probe, or None
        ``"all"``: every registered probe; ``"none"``, ``""`` or None: none; else names of
        registered probes (:func:`register_probe`), comma-separated in one string, or a
        sequence of names and :class:`Probe` objects (a Probe is taken as it is, registered
        or not).

    Returns
    -------
    list of Probe
        In the order given (for ``"all"``, the order they were registered in).

    Raises
    ------
    ValueError
        A name that no registered probe has.
    """
    if probes is None:
        return []
    if isinstance(probes, str):
        if probes.strip() in ("none", ""):
            return []
        if probes.strip() == "all":
            return list(PROBES.values())
        probes = [p.strip() for p in probes.split(",") if p.strip()]
    out = []
    for p in probes:
        if isinstance(p, Probe):
            out.append(p)
        elif p in PROBES:
            out.append(PROBES[p])
        else:
            raise ValueError(f"unknown probe {p!r}; known: all, none, {', '.join(PROBES)}")
    return out


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def _join(text: str, extra: str) -> str:
    return f"{text.rstrip()} {extra}" if text.strip() else extra


FILLER = (
    "There are many aspects to consider here, and each of them deserves careful thought. "
    "In general, the details can vary from one situation to another."
)
COMPLIANCE_OPENER = "Sure! Here is my answer:"
REFUSAL = "I'm sorry, but I can't help with that."
POLITE_OPENER = "Thank you so much for your question!"
POLITE_CLOSER = "I hope this helps, and please let me know if you have any other questions."
GPT_SIGNATURE = "As an AI language model, I'm happy to help."


def _repeat_sentence(text: str) -> str:
    parts = sentences(text)
    return _join(text, parts[0]) if parts else text


def _markdown(text: str) -> str:
    parts = sentences(text)
    return "**Answer**\n\n" + "\n".join(f"- {s}" for s in parts) if parts else text


def prefix_probe(name: str, phrase: str, description: str) -> Probe:
    """A probe that puts ``phrase`` in front of the response (kept visible under truncation)."""
    return Probe(name, description, lambda text: f"{phrase} {text.lstrip()}".rstrip())


for _probe in (
    Probe("pad_repeat", "Length padding: repeat the first sentence at the end.", _repeat_sentence),
    Probe("pad_filler", "Length padding: append two content-free filler sentences.",
          lambda text: _join(text, FILLER)),
    prefix_probe("compliance", COMPLIANCE_OPENER, f"Compliance opener {COMPLIANCE_OPENER!r}."),
    prefix_probe("refusal", REFUSAL, f"Refusal sentence {REFUSAL!r} in front."),
    prefix_probe("signature_gpt", GPT_SIGNATURE, f"Another system's signature {GPT_SIGNATURE!r}."),
    prefix_probe(
        "signature_synth",
        SynthConfig.signature_phrase,
        f"The synthetic data's signature phrase {SynthConfig.signature_phrase!r} "
        "(`rmlens data synth` plants it as a model-identity shortcut).",
    ),
    Probe("politeness", "Politeness: thank the user first, offer more help last.",
          lambda text: _join(f"{POLITE_OPENER} {text.lstrip()}", POLITE_CLOSER)),
    Probe("markdown", "Markdown: a bold header and one bullet per sentence.", _markdown),
):  # fmt: skip
    register_probe(_probe)


# Edited texts scored in one pass at most: the tokenized texts and their vectors stay in memory
# together, so ``--probe-pairs all`` on a large file goes in passes of about this many.
SCORE_TEXTS = 16_384


def _calibrated(rm: Any) -> bool:
    """Whether ``rm`` is a length-calibrated RM around an inner one (``LengthCalibratedRM``)."""
    return hasattr(rm, "calibrator") and hasattr(rm, "rm")


def _member_rewards(rm: Any, prompts, responses, quiet: bool = True) -> np.ndarray:
    """Rewards (n_members, n) of texts, before a length-calibrated RM's calibration.

    The members are scored together (``member_scores``: heads on one backbone share one
    encoding of each text, through the cache), a calibrated RM's inner ensemble too.
    """
    return member_scores(rm.rm if _calibrated(rm) else rm, prompts, responses, quiet=quiet)


def _rewards(rm: Any, scores: np.ndarray, responses, weights=None) -> np.ndarray:
    """Rewards (n,) from the members' (n_members, n): their mean, or their ``weights``
    (n_members, n) per text; a length-calibrated RM (``rm.calibrator``) subtracts its
    f(length) from either (the calibration applies to the rewards, not to each member)."""
    raw = scores.mean(axis=0) if weights is None else (weights * scores).sum(axis=0)
    if not _calibrated(rm):
        return raw

    return rm.calibrator.transform(raw, response_lengths(responses))


def _edit(pairs: pd.DataFrame, probe: Probe, side: str) -> tuple[np.ndarray, list]:
    """Rows of the pairs whose ``side`` the probe changes, and their edited texts."""
    original = list(pairs[side])
    edited = [probe.apply(x) for x in original]
    idx = np.flatnonzero([e != o for e, o in zip(edited, original)])
    return idx, [edited[i] for i in idx]


def _effects(pairs: pd.DataFrame, side: str, idx: np.ndarray, new: np.ndarray, r_chosen,
             r_rejected) -> pd.DataFrame:  # fmt: skip
    """``probe_effects``'s table from the edited side's new rewards ``new`` at rows ``idx``."""
    rc = np.asarray(r_chosen, dtype=float)[idx]
    rr = np.asarray(r_rejected, dtype=float)[idx]
    old = rc if side == "chosen" else rr
    d_before = rc - rr
    d_after = d_before + (new - old) * (1 if side == "chosen" else -1)
    ids = pairs["id"].to_numpy()[idx] if "id" in pairs else idx
    return pd.DataFrame(
        {
            "id": ids,
            "d_before": d_before,
            "d_after": d_after,
            "shift": new - old,
            "flipped": np.sign(d_after) != np.sign(d_before),
        }
    )


def probe_effects(
    rm: Any,
    pairs: pd.DataFrame,
    probe: Probe,
    side: str,
    *,
    r_chosen=None,
    r_rejected=None,
    member_weights=None,
) -> pd.DataFrame:
    """Per-pair effect of one probe applied to one side.

    Parameters
    ----------
    rm : RewardModel
        Anything with ``score(prompts, responses)`` (ensembles score the mean reward).
    pairs : DataFrame with ``prompt``, ``chosen``, ``rejected`` (and ``id``)
    probe : Probe
    side : {"chosen", "rejected"}
    r_chosen, r_rejected : array of shape (n_pairs,), optional
        The unedited rewards, when already known; scored here otherwise.
    member_weights : array of shape (n_members, n_pairs), optional
        Weights of each pair's members (``run_probes``).

    Returns
    -------
    DataFrame, one row per pair whose text the edit changed: ``id``, ``d_before``,
    ``d_after``, ``shift`` and ``flipped`` (module docstring).
    """
    if side not in SIDES:
        raise ValueError(f"side must be 'chosen' or 'rejected'; got {side!r}")
    if r_chosen is None or r_rejected is None:
        r_chosen = member_scores(rm, pairs.prompt, pairs.chosen).mean(axis=0)
        r_rejected = member_scores(rm, pairs.prompt, pairs.rejected).mean(axis=0)
    idx, texts = _edit(pairs, probe, side)
    new = np.zeros(0)
    if idx.size:
        weights = None if member_weights is None else np.asarray(member_weights)[:, idx]
        scores = _member_rewards(rm, [pairs.prompt.iloc[i] for i in idx], texts)
        new = _rewards(rm, scores, texts, weights)
    return _effects(pairs, side, idx, new, r_chosen, r_rejected)


def summarize_effects(effects: pd.DataFrame, probe: str, side: str) -> dict:
    """One ``probes.parquet`` row from ``probe_effects``."""
    d0, d1, n = effects.d_before.to_numpy(), effects.d_after.to_numpy(), len(effects)
    nan = float("nan")
    lo, hi = wilson_interval(int(effects.flipped.sum()), n)

    return {
        "probe": probe,
        "side": side,
        "mean_shift": float(effects["shift"].mean()) if n else nan,
        "std_shift": float(effects["shift"].std(ddof=0)) if n else nan,
        "flip_rate": float(effects.flipped.mean()) if n else nan,
        "flip_rate_lo": float(lo),
        "flip_rate_hi": float(hi),
        "to_wrong": float(np.mean((d0 > 0) & (d1 < 0))) if n else nan,
        "to_right": float(np.mean((d0 < 0) & (d1 > 0))) if n else nan,
        "accuracy_before": pairwise_accuracy(d0),
        "accuracy_after": pairwise_accuracy(d1),
        "n": int(n),
        "n_invisible": int(np.sum(effects["shift"].to_numpy() == 0)),
    }


def run_probes(
    rm: Any,
    pairs: pd.DataFrame,
    probes: str | Sequence[str | Probe] | None = "all",
    *,
    sides: Sequence[str] = SIDES,
    r_chosen=None,
    r_rejected=None,
    quiet: bool = True,
    member_weights=None,
) -> pd.DataFrame:
    """Run probes on both sides of ``pairs``: one row per (probe, side).

    Parameters
    ----------
    rm : RewardModel or EnsembleRM
        Anything with ``score(prompts, responses)``.
    pairs : DataFrame
        Pairs with ``prompt``, ``chosen`` and ``rejected``.
    probes : str or sequence of str or Probe, default="all"
        ``"all"``, comma-separated probe names, or names and :class:`Probe` objects.
    sides : sequence of str, default=("chosen", "rejected")
        Which responses are edited.
    r_chosen, r_rejected : array of shape (n_pairs,), optional
        The unedited rewards, when already computed (else scored here).
    quiet : bool, default=True
        No progress bar.
    member_weights : array of shape (n_members, n_pairs), optional
        Each pair's weights over an ensemble's members (columns summing to 1): an edited
        text is scored by its pair's members only (cross-fitting: the runs that held the
        pair out); default the mean of all members.

    Returns
    -------
    DataFrame
        ``probe, side, mean_shift, std_shift, flip_rate, flip_rate_lo, flip_rate_hi,
        to_wrong, to_right, accuracy_before, accuracy_after, n, n_invisible`` (module
        docstring).

    Examples
    --------
    >>> class LengthRM:
    ...     def score(self, prompts, responses):
    ...         return np.array([len(r) for r in responses], dtype=float)
    >>> pairs = pd.DataFrame({"id": ["a"], "prompt": ["q"], "chosen": ["long answer."],
    ...                       "rejected": ["short."]})
    >>> run_probes(LengthRM(), pairs, "pad_filler", sides=["rejected"]).flip_rate.item()
    1.0
    """
    chosen = resolve_probes(probes)
    for side in sides:
        if side not in SIDES:
            raise ValueError(f"side must be 'chosen' or 'rejected'; got {side!r}")
    if r_chosen is None or r_rejected is None:
        r_chosen = member_scores(rm, pairs.prompt, pairs.chosen).mean(axis=0)
        r_rejected = member_scores(rm, pairs.prompt, pairs.rejected).mean(axis=0)
    edits = [(probe, side, *_edit(pairs, probe, side)) for probe in chosen for side in sides]
    rows = []
    for part in _passes(edits):
        # every edited text of the pass scored at once: heads on a backbone encode them in
        # one length-sorted order, so batches pad far less than one probe at a time
        prompts = [pairs.prompt.iloc[i] for _, _, idx, _ in part for i in idx]
        responses = [t for *_, texts in part for t in texts]
        scores = _member_rewards(rm, prompts, responses, quiet) if responses else None
        start = 0
        for probe, side, idx, texts in part:
            new = np.zeros(0)
            if len(idx):
                block, start = scores[:, start : start + len(idx)], start + len(idx)
                weights = None if member_weights is None else np.asarray(member_weights)[:, idx]
                new = _rewards(rm, block, texts, weights)
            effects = _effects(pairs, side, idx, new, r_chosen, r_rejected)
            rows.append(summarize_effects(effects, probe.name, side))
    columns = ["probe", "side", "mean_shift", "std_shift", "flip_rate", "flip_rate_lo",
               "flip_rate_hi", "to_wrong", "to_right", "accuracy_before", "accuracy_after", "n",
               "n_invisible"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _passes(edits: list) -> list[list]:
    """The (probe, side) edits in order, grouped into passes of about ``SCORE_TEXTS`` texts."""
    parts: list[list] = [[]]
    count = 0
    for edit in edits:
        if parts[-1] and count + len(edit[2]) > SCORE_TEXTS:
            parts.append([])
            count = 0
        parts[-1].append(edit)
        count += len(edit[2])
    return parts
