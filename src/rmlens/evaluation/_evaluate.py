"""``evaluate``: score a pair set with an RM (or an ensemble), compute every metric, run the
shortcut probes, and write metrics.json, probes.parquet, scores.parquet and plots."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit

import rmlens
from rmlens._base import resolve_config
from rmlens._errors import InputError
from rmlens.backbones import warn_truncation
from rmlens.data import validate_pairs
from rmlens.evaluation._calibration import (
    brier_score,
    expected_calibration_error,
    temperature_scaling,
)
from rmlens.evaluation._config import EvaluateConfig
from rmlens.evaluation._metrics import ensemble_disagreement, pair_metrics
from rmlens.evaluation._plots import plot_length, plot_probes, plot_reliability, plot_rewards
from rmlens.evaluation._posthoc import (
    UNIT,
    LengthCalibratedRM,
    LengthCalibrator,
    length_correlation,
    response_lengths,
)
from rmlens.evaluation._probes import Probe, resolve_probes, run_probes
from rmlens.experiment import ExperimentDir
from rmlens.hub import EnsembleRM, load_rm, member_pair_scores, use_format
from rmlens.rewards import pairwise_accuracy

CROSS_FIT_NOTE = (
    "cross-fitted: the RM is an audit's runs and the pairs are the audit's own, so each pair "
    "is scored only by the runs that held it out (neither trained on it nor used it for "
    "validation), probes included; in_train gives the in-sample figures of the runs that "
    "trained on each pair, and pairs no run held out are left out"
)


def cross_fit_mask(rm: Any, ids: Sequence[str]) -> np.ndarray | None:
    """(n_members, n_pairs) bool: the members that held each pair out, when ``rm`` is an
    ensemble whose members trained on some of these pairs (an audit scoring its own pairs);
    None otherwise (every member scores every pair)."""
    if not isinstance(rm, EnsembleRM):
        return None
    member = rm.membership(ids)
    if member is None or not member.any():
        return None
    return ~member & ~rm.validation(ids)


def _split_metrics(margins: np.ndarray, n_bins: int) -> dict:
    """Accuracy, ECE, Brier of mean margins (n,), NaN entries left out."""
    d = margins[~np.isnan(margins)]
    p = expit(d)
    return {
        "n_pairs": int(d.size),
        "accuracy": pairwise_accuracy(d, np.zeros_like(d)),
        "ece": expected_calibration_error(p, n_bins=n_bins) if d.size else float("nan"),
        "brier": brier_score(p),
    }


def membership_metrics(
    rm: EnsembleRM, ids: Sequence[str], member_margins: np.ndarray, n_bins: int
) -> dict | None:
    """In-training and held-out metrics of an ensemble whose members know their training ids.

    For each pair, ``in_train`` averages the margins of the members trained on it and
    ``held_out`` those of the members that neither trained on it nor used it for validation
    (an audit run's early stopping looked at its validation pairs); pairs with no such member
    are left out. None when no member was trained on any of these pairs.
    """
    member = rm.membership(ids)  # (n_members, n_pairs)
    if member is None or not member.any():
        return None
    held = ~member & ~rm.validation(ids)
    out = {}
    for name, mask in (("in_train", member), ("held_out", held)):
        counts = mask.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(mask, member_margins, 0.0).sum(axis=0) / counts
        out[name] = _split_metrics(np.where(counts > 0, mean, np.nan), n_bins)
        out[name]["members_per_pair"] = float(counts[counts > 0].mean()) if counts.any() else 0.0
    return out


def _calibrate(r_chosen, r_rejected, pairs: pd.DataFrame, frac: float):
    """Length-calibrated rewards of a pair set (``_posthoc``), f fitted on all its responses.

    Returns calibrated chosen and rejected rewards (n_pairs,), the fitted calibrator, the
    lengths (2, n_pairs) and the ``posthoc_calibration`` block of metrics.json.
    """
    if not len(pairs):
        raise InputError("`calibrate` length: no pairs left to fit the length bias on")
    lengths = np.stack([response_lengths(pairs.chosen), response_lengths(pairs.rejected)])
    raw = np.stack([r_chosen, r_rejected])  # (2, n_pairs)
    calibrator = LengthCalibrator(frac=frac).fit(raw.ravel(), lengths.ravel())
    cal = calibrator.transform(raw.ravel(), lengths.ravel()).reshape(raw.shape)
    before, after = length_correlation(raw.ravel(), lengths.ravel(), calibrated=cal.ravel())
    flipped = np.sign(raw[0] - raw[1]) != np.sign(cal[0] - cal[1])
    block = {
        "method": "length",
        "unit": UNIT,
        "frac": frac,
        "it": calibrator.it,
        "n_responses": int(lengths.size),
        "corr_before": before,
        "corr_after": after,
        "accuracy_before": pairwise_accuracy(raw[0], raw[1]),
        "accuracy_after": pairwise_accuracy(cal[0], cal[1]),
        "flipped": float(flipped.mean()) if flipped.size else float("nan"),
    }
    return cal[0], cal[1], calibrator, lengths, block


def probe_rows(n_pairs: int, probe_pairs: int | str, seed: int) -> np.ndarray:
    """Sorted rows of the pairs the probes edit: a seeded sample of ``probe_pairs`` of the
    ``n_pairs``, or all of them (``"all"``, 0, or no more pairs than that)."""
    if probe_pairs in ("all", 0) or n_pairs <= probe_pairs:
        return np.arange(n_pairs)
    return np.sort(np.random.default_rng(seed).choice(n_pairs, probe_pairs, replace=False))


def _describe(rm: Any, source: Any) -> dict:
    info = {"class": type(rm).__name__, "source": str(source) if source is not None else None,
            "format": getattr(rm, "format", None)}  # fmt: skip
    if isinstance(rm, EnsembleRM):
        info["members"] = len(rm.members)
    return info


def evaluate(
    pairs: pd.DataFrame,
    config: EvaluateConfig | None = None,
    *,
    out: str | Path | None = None,
    rm: Any,
    probes: str | Sequence[str | Probe] | None = None,
    quiet: bool = False,
    **overrides,
) -> dict:
    """Evaluate a reward model on a pair set: accuracy, calibration, distribution, probes.

    Parameters
    ----------
    pairs : DataFrame
        The canonical pair table (``rmlens.data.load_pairs``).
    config : EvaluateConfig, optional
        The settings (default ``EvaluateConfig()``). ``calibrate="length"`` evaluates the
        length-calibrated RM r - f(len) instead (``calibrate_length``): every metric, the
        ensemble's member margins and the probes' edited texts (f stays as fitted) use it;
        scores.parquet keeps the raw rewards beside ``r_chosen_calibrated``,
        ``r_rejected_calibrated``, ``len_chosen``, ``len_rejected``.
    out : str or Path, optional
        The folder for ``metrics.json``, ``probes.parquet``, ``scores.parquet``,
        ``reliability.png``, ``rewards.png`` and ``probes.png`` (and ``length.png`` with
        ``config.calibrate``); default: nothing is written.
    rm : RewardModel, EnsembleRM, str or Path
        An object with ``score(prompts, responses)`` (``score_pairs`` is used when present),
        or anything ``rmlens.hub.load_rm`` loads: a saved RM folder (an ensemble folder
        of ``rmlens train --ensemble N`` too), an RM preset, a sequence-classification model,
        or an experiment directory of ``rmlens memorize`` (an ensemble of its runs).
    probes : "all", "none", "a,b", or list of names / Probe, optional
        Default ``config.probes``.
    quiet : bool, default=False
        No progress bars or status lines.
    **overrides
        Fields of ``EvaluateConfig``, applied to ``config`` (``evaluate(pairs, rm=rm,
        n_bins=5)``).

    Returns
    -------
    dict
        The content of metrics.json: ``n_pairs``, ``accuracy`` (ties 1/2), ``ece``, ``brier``,
        ``log_loss``, ``calibration``, ``reward_distribution``, ``warnings``, optional
        ``by``, ``rewardbench``, ``margin_spearman``, ``temperature``, ``ensemble``,
        ``in_train``/``held_out``, ``cross_fitted`` (an audit scoring its own pairs: every
        figure then comes from the runs that held each pair out; ``in_train`` stays beside
        it as the in-sample figure), ``posthoc_calibration`` (method, unit, frac, it,
        n_responses, corr_before/after: Spearman of reward with length over all responses,
        accuracy_before/after, flipped: share of pairs whose preference the calibration
        turned), ``truncation`` (what the RM's ``max_length`` cut: ``max_length``,
        ``sequences_cut``, ``pairs_cut``, ``tokens_cut_median``, ``tokens_cut_max``; for an
        RM that tokenizes, warned about when any pair was cut), ``dropped_truncation``,
        ``rm`` (with its ``format``), ``config`` (``format`` as resolved: chat, raw or pair)
        and ``probes`` (the rows of probes.parquet).

    Examples
    --------
    >>> class LengthRM:
    ...     def score(self, prompts, responses):
    ...         return np.array([len(r) for r in responses], dtype=float)
    >>> pairs = pd.DataFrame({"prompt": ["q", "q"], "chosen": ["a long one", "no"],
    ...                       "rejected": ["short", "longer"]})
    >>> evaluate(pairs, rm=LengthRM(), probes="none", quiet=True)["accuracy"]
    0.5
    """
    config = resolve_config("evaluate", EvaluateConfig, config, overrides).check()
    try:
        chosen_probes = resolve_probes(config.probes if probes is None else probes)
    except ValueError as err:
        raise InputError(str(err)) from err
    source = rm if isinstance(rm, (str, Path)) else None
    if source is not None:
        rm = load_rm(
            source,
            device=config.device,
            score_index=config.score_index,
            trust_remote_code=config.trust_remote_code,
            precision=config.precision,
        )
    missing = [c for c in ("prompt", "chosen", "rejected") if c not in pairs]
    if missing:
        raise InputError(f"pairs: missing required column(s) {', '.join(map(repr, missing))}")
    if "id" not in pairs:
        pairs = validate_pairs(pairs, source="pairs")
    rm = use_format(rm, config.format, config.max_length)
    truncation = rm.truncation(pairs) if hasattr(rm, "truncation") else None
    warn_truncation(truncation, len(pairs))
    rc, rr, kept = member_pair_scores(rm, pairs, quiet=quiet)  # (n_members, n_pairs)
    dropped = pairs.id[~kept].tolist()
    data = pairs[kept].reset_index(drop=True)
    rc, rr = rc[:, kept], rr[:, kept]
    in_sample = None
    held = cross_fit_mask(rm, data.id)  # (n_members, n_pairs): who may score each pair
    if held is not None:
        in_sample = membership_metrics(rm, data.id, rc - rr, config.n_bins)
        seen = held.any(axis=0)
        unscored = data.id[~seen].tolist()
        data, rc, rr, held = data[seen].reset_index(drop=True), rc[:, seen], rr[:, seen], \
            held[:, seen]  # fmt: skip
        if not len(data):
            raise InputError("every pair was trained on by every run of the audit: no run "
                             "held one out, so there is no held-out score to report")
    weights = None if held is None else held / held.sum(axis=0)  # each pair's scoring runs
    r_c, r_r = ((rc.mean(axis=0), rr.mean(axis=0)) if weights is None  # ensemble: mean reward
                else ((weights * rc).sum(axis=0), (weights * rr).sum(axis=0)))  # fmt: skip
    raw, calibrator, posthoc = (r_c, r_r), None, None
    if config.calibrate == "length":
        r_c, r_r, calibrator, lengths, posthoc = _calibrate(r_c, r_r, data, config.lowess_frac)

    by = list(dict.fromkeys((["subset"] if "subset" in data else []) + list(config.by)))
    absent = [c for c in by if c not in data]
    if absent:
        raise InputError(
            f"`by`: no column {absent[0]!r} in the data (columns: {', '.join(data.columns)})"
        )
    margins = rc - rr  # (n_members, n_pairs)
    if calibrator is not None:  # every member's margin moves by -(f(len+) - f(len-))
        margins = margins - (calibrator.bias(lengths[0]) - calibrator.bias(lengths[1]))
    metrics = pair_metrics(
        r_c,
        r_r,
        margin=data["margin"].to_numpy(float) if "margin" in data else None,
        groups={c: data[c] for c in by},
        member_margins=margins if margins.shape[0] > 1 and held is None else None,
        n_bins=config.n_bins,
    )
    if held is not None:
        metrics["cross_fitted"] = {
            "n_pairs": int(len(data)),
            "runs_per_pair": float(held.sum(axis=0).mean()),
            "left_out": {"count": len(unscored), "ids": unscored[:100]},
            "note": CROSS_FIT_NOTE,
        }
        metrics.update(in_sample or {})
    if posthoc is not None:
        metrics["posthoc_calibration"] = posthoc
    metrics["dropped_truncation"] = {"count": len(dropped), "ids": dropped[:100]}
    if truncation is not None:
        metrics["truncation"] = truncation
    if dropped:
        metrics["warnings"].append(
            f"{len(dropped)} pairs dropped: chosen == rejected after truncation"
        )
    if config.calibrate_frac > 0:
        try:
            metrics["temperature"], _ = temperature_scaling(
                r_c - r_r, frac=config.calibrate_frac, n_bins=config.n_bins, seed=config.seed
            )
        except ValueError as err:
            raise InputError(f"`calibrate_frac`: {err}") from err
    if isinstance(rm, EnsembleRM) and held is None:
        split = membership_metrics(rm, data.id, margins, config.n_bins)
        if split:
            metrics.update(split)

    rows = probe_rows(len(data), config.probe_pairs, config.seed)
    sample = data.iloc[rows].reset_index(drop=True) if rows.size < len(data) else data
    scorer = rm if calibrator is None else LengthCalibratedRM(rm, calibrator)  # probes too
    table = run_probes(
        scorer, sample, chosen_probes, r_chosen=r_c[rows], r_rejected=r_r[rows], quiet=quiet,
        member_weights=None if weights is None else weights[:, rows],
    )
    metrics["probes"] = table.to_dict("records")
    metrics["rm"] = _describe(rm, source)
    metrics["config"] = {**config.to_dict(), "format": getattr(rm, "format", None)}  # resolved
    metrics["version"] = rmlens.__version__
    if out is not None:
        scores = pd.DataFrame({"id": data.id, "r_chosen": raw[0], "r_rejected": raw[1]})
        if calibrator is not None:
            scores["r_chosen_calibrated"], scores["r_rejected_calibrated"] = r_c, r_r
            scores["len_chosen"], scores["len_rejected"] = lengths
        if margins.shape[0] > 1 and held is None:  # cross-fitted: no mix of in-sample runs
            scores["disagreement"] = ensemble_disagreement(margins)[1]
        metrics["files"] = ["metrics.json", "probes.parquet", "scores.parquet",
                            "reliability.png", "rewards.png"]  # fmt: skip
        metrics["files"] += ["probes.png"] * bool(len(table))
        metrics["files"] += ["length.png"] * (calibrator is not None)
        _write(Path(out), metrics, table, scores, r_c, r_r)
        if calibrator is not None:
            plot_length(lengths.ravel(), np.concatenate(raw), np.r_[r_c, r_r], calibrator,
                        Path(out) / "length.png")  # fmt: skip
    return metrics


def _write(out: Path, metrics, table, scores, r_c, r_r) -> None:
    """The evaluation's tables beside whatever else the directory holds (an audit's, say)."""
    exp = ExperimentDir(out).create()
    exp.write_json(metrics, "metrics.json")
    exp.write_table(table, "probes.parquet")
    exp.write_table(scores, "scores.parquet")
    temp = metrics.get("temperature") or {}
    plot_reliability(
        metrics["calibration"]["bins"], out / "reliability.png", ece=metrics["ece"],
        after=temp.get("bins_after"), after_ece=temp.get("ece_after"),
    )  # fmt: skip
    plot_rewards(r_c, r_r, out / "rewards.png")
    if len(table):
        plot_probes(table, out / "probes.png")
