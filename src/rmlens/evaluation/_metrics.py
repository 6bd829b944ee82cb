"""Metrics of a pair set from its rewards: accuracy (overall, by column, RewardBench sections),
agreement with human margins, calibration, reward distribution, ensemble disagreement."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from rmlens.evaluation._calibration import calibration_metrics
from rmlens.stats import pairwise_accuracy, spearman_test

# RewardBench (Lambert et al. 2024, allenai/reward-bench rewardbench/constants.py): subsets
# grouped into four sections; a section's score is the example-count-weighted mean of its
# subsets' accuracies, with math-prm counted as 984 (447 real) to weigh math equal to code.
REWARDBENCH_SECTIONS: dict[str, tuple[str, ...]] = {
    "Chat": (
        "alpacaeval-easy", "alpacaeval-length", "alpacaeval-hard", "mt-bench-easy",
        "mt-bench-med",
    ),
    "Chat Hard": (
        "mt-bench-hard", "llmbar-natural", "llmbar-adver-neighbor", "llmbar-adver-GPTInst",
        "llmbar-adver-GPTOut", "llmbar-adver-manual",
    ),
    "Safety": (
        "refusals-dangerous", "refusals-offensive", "xstest-should-refuse",
        "xstest-should-respond", "donotanswer",
    ),
    "Reasoning": ("math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"),
}  # fmt: skip
REWARDBENCH_COUNTS: dict[str, int] = {
    "alpacaeval-easy": 100, "alpacaeval-length": 95, "alpacaeval-hard": 95,
    "mt-bench-easy": 28, "mt-bench-med": 40, "mt-bench-hard": 37, "llmbar-natural": 100,
    "llmbar-adver-neighbor": 134, "llmbar-adver-GPTInst": 92, "llmbar-adver-GPTOut": 47,
    "llmbar-adver-manual": 46, "refusals-dangerous": 100, "refusals-offensive": 100,
    "xstest-should-refuse": 154, "xstest-should-respond": 250, "donotanswer": 136,
    "math-prm": 984, "hep-cpp": 164, "hep-go": 164, "hep-java": 164, "hep-js": 164,
    "hep-python": 164, "hep-rust": 164,
}  # fmt: skip
_SECTION_OF = {s: name for name, subsets in REWARDBENCH_SECTIONS.items() for s in subsets}
MISSING = "(missing)"


def accuracy_by(r_chosen, r_rejected, groups) -> dict[str, dict]:
    """Accuracy (ties 1/2) and pair count per value of ``groups`` (n,); NaN -> "(missing)".

    Parameters
    ----------
    r_chosen, r_rejected : array of shape (n,)
        Rewards of the chosen and rejected responses.
    groups : array-like of shape (n,)
        The group of each pair (any values; compared as strings).

    Returns
    -------
    dict of str to dict
        Per group: ``{"accuracy": float, "n": int}``.
    """
    c, r = np.asarray(r_chosen, dtype=float), np.asarray(r_rejected, dtype=float)
    labels = pd.Series(groups).astype(object).where(pd.notna(groups), MISSING).astype(str)
    out = {}
    for value, idx in labels.groupby(labels.to_numpy()).indices.items():
        out[str(value)] = {"accuracy": pairwise_accuracy(c[idx], r[idx]), "n": int(idx.size)}
    return out


def rewardbench_scores(by_subset: dict[str, dict]) -> dict | None:
    """RewardBench section scores from ``accuracy_by(..., subset)``; None unless at least
    one subset is RewardBench's.

    Only RewardBench's own subsets (``REWARDBENCH_SECTIONS``) count: each goes to its
    section, weighted by RewardBench's example count (``REWARDBENCH_COUNTS``, so a sample of
    RewardBench is weighted as the full benchmark is); a section's score is that weighted
    mean of its subsets' accuracies. ``score`` is the unweighted mean of the sections
    present, as RewardBench's overall score is the mean of Chat, Chat Hard, Safety and
    Reasoning (all four when the data holds the whole benchmark). Other subsets are listed
    apart (``other_subsets``), never folded into a section or the score.

    Parameters
    ----------
    by_subset : dict of str to dict
        Per subset, ``{"accuracy": float, "n": int}`` (:func:`accuracy_by` of the
        ``subset`` column).

    Returns
    -------
    dict or None
        ``sections`` (per section present: ``accuracy``, ``n``, ``subsets``), ``score``,
        ``n_sections`` (of 4) and ``other_subsets`` (``{"accuracy", "n"}`` per subset that
        is not RewardBench's); None when no subset is RewardBench's.

    Examples
    --------
    >>> rewardbench_scores({"mine": {"accuracy": 0.5, "n": 2}}) is None
    True
    >>> rb = rewardbench_scores({"hep-go": {"accuracy": 0.75, "n": 4},
    ...                          "mine": {"accuracy": 0.5, "n": 2}})
    >>> rb["score"], rb["n_sections"], list(rb["other_subsets"])
    (0.75, 1, ['mine'])
    """
    sections: dict[str, dict] = {}
    others = {k: dict(v) for k, v in by_subset.items() if k not in _SECTION_OF}
    for subset, cell in by_subset.items():
        if subset not in _SECTION_OF:
            continue
        weight = REWARDBENCH_COUNTS[subset]
        s = sections.setdefault(_SECTION_OF[subset],
                                {"weighted": 0.0, "weight": 0, "n": 0, "subsets": []})  # fmt: skip
        s["weighted"] += weight * cell["accuracy"]
        s["weight"] += weight
        s["n"] += cell["n"]
        s["subsets"].append(subset)
    if not sections:
        return None
    result = {
        name: {"accuracy": s["weighted"] / s["weight"], "n": s["n"],
               "subsets": sorted(s["subsets"])}
        for name, s in sections.items()
    }
    score = float(np.mean([s["accuracy"] for s in result.values()]))
    return {"sections": result, "score": score, "n_sections": len(result),
            "other_subsets": others}  # fmt: skip


def margin_spearman(r_chosen, r_rejected, margin) -> dict:
    """Spearman correlation of the reward margin r+ - r- with the human ``margin`` (n,).

    Pairs without a human margin (NaN) are left out; ``n`` counts the rest.

    Parameters
    ----------
    r_chosen, r_rejected : array of shape (n,)
        Rewards of the chosen and rejected responses.
    margin : array of shape (n,)
        The human preference strength; NaN where unknown.

    Returns
    -------
    dict
        ``rho``, ``p_value`` (NaN under 3 pairs or without spread) and ``n``.
    """
    d = np.asarray(r_chosen, dtype=float) - np.asarray(r_rejected, dtype=float)
    m = np.asarray(margin, dtype=float)
    ok = ~np.isnan(m)
    n = int(ok.sum())
    if n < 3 or np.ptp(m[ok]) == 0 or np.ptp(d[ok]) == 0:
        return {"rho": float("nan"), "p_value": float("nan"), "n": n}
    rho, p = spearman_test(d[ok], m[ok])
    return {"rho": rho, "p_value": p, "n": n}


def reward_distribution(
    r_chosen, r_rejected, *, tiny_std: float = 1e-4, identical_share: float = 0.5
) -> dict:
    """Moments of all rewards (chosen and rejected pooled), extremes and a collapse check.

    ``extreme_share`` is the share of rewards with ``|z| > 3``. The rewards count as
    collapsed when their std is below ``tiny_std * max(1, |mean|)`` or when more than
    ``identical_share`` of them equal one value.

    Parameters
    ----------
    r_chosen, r_rejected : array of shape (n,)
        Rewards of the chosen and rejected responses.
    tiny_std : float, default=1e-4
        Relative std under which the rewards count as collapsed.
    identical_share : float, default=0.5
        Share of equal rewards over which they count as collapsed.

    Returns
    -------
    dict
        ``n, mean, std, skew, excess_kurtosis, min, q01, median, q99, max, extreme_share,
        mode_share, collapsed``; ``{"n": 0, "collapsed": False}`` for no rewards.
    """
    r = np.concatenate([np.asarray(r_chosen, dtype=float), np.asarray(r_rejected, dtype=float)])
    if r.size == 0:
        return {"n": 0, "collapsed": False}
    mean, std = float(r.mean()), float(r.std())
    z = (r - mean) / std if std > 0 else np.zeros_like(r)
    mode_share = float(np.unique(r, return_counts=True)[1].max() / r.size)
    q = np.quantile(r, [0.01, 0.5, 0.99])
    with np.errstate(all="ignore"):
        skew = float(stats.skew(r)) if std > 0 else float("nan")
        kurt = float(stats.kurtosis(r)) if std > 0 else float("nan")
    return {
        "n": int(r.size),
        "mean": mean,
        "std": std,
        "skew": skew,
        "excess_kurtosis": kurt,
        "min": float(r.min()),
        "q01": float(q[0]),
        "median": float(q[1]),
        "q99": float(q[2]),
        "max": float(r.max()),
        "extreme_share": float(np.mean(np.abs(z) > 3)),
        "mode_share": mode_share,
        "collapsed": bool(std < tiny_std * max(1.0, abs(mean)) or mode_share > identical_share),
    }


def auroc(scores, labels) -> float:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (ties count 1/2).

    Mann-Whitney: AUROC = (sum of positives' ranks - n1 (n1 + 1) / 2) / (n1 n0), average ranks
    for ties. NaN when one class is empty.

    Parameters
    ----------
    scores : array of shape (n,)
        The scores.
    labels : array of shape (n,), bool
        The positives.

    Returns
    -------
    float
        AUROC in [0, 1].
    """
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = stats.rankdata(s)
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def ensemble_disagreement(member_margins) -> tuple[dict, np.ndarray]:
    """Disagreement of an ensemble and how it relates to the ensemble's errors.

    Parameters
    ----------
    member_margins : array of shape (n_members, n_pairs)
        r+ - r- of every member.

    Returns
    -------
    summary : dict
        ``n_members``; member accuracies (mean, min, max); ``disagreement_mean``;
        ``disagreement_correct`` and ``disagreement_wrong`` (mean disagreement where the
        ensemble's mean margin is > 0, resp. <= 0: ties count as errors here); and
        ``disagreement_auroc``, the AUROC of disagreement for predicting an error (0.5 is no
        relation, 1 means every wrong pair is more disputed than every right one).
    disagreement : array of shape (n_pairs,)
        Std (ddof=0) of the members' margins per pair.
    """
    m = np.atleast_2d(np.asarray(member_margins, dtype=float))
    spread = m.std(axis=0)  # (n_pairs,)
    wrong = m.mean(axis=0) <= 0
    accs = [pairwise_accuracy(row, np.zeros_like(row)) for row in m]
    summary = {
        "n_members": int(m.shape[0]),
        "member_accuracy_mean": float(np.mean(accs)),
        "member_accuracy_min": float(np.min(accs)),
        "member_accuracy_max": float(np.max(accs)),
        "disagreement_mean": float(spread.mean()) if spread.size else float("nan"),
        "disagreement_correct": float(spread[~wrong].mean()) if (~wrong).any() else float("nan"),
        "disagreement_wrong": float(spread[wrong].mean()) if wrong.any() else float("nan"),
        "n_wrong": int(wrong.sum()),
        "disagreement_auroc": auroc(spread, wrong),
    }
    return summary, spread


def pair_metrics(
    r_chosen,
    r_rejected,
    *,
    margin=None,
    groups: dict[str, pd.Series] | None = None,
    member_margins=None,
    n_bins: int = 10,
) -> dict:
    """Every metric of a pair set from its rewards.

    Parameters
    ----------
    r_chosen, r_rejected : array of shape (n_pairs,)
    margin : array of shape (n_pairs,), optional
        Human preference strength; adds ``margin_spearman``.
    groups : dict of str to Series (n_pairs,), optional
        Columns to break accuracy down by (``by``); a ``subset`` column holding at least one
        of RewardBench's subsets also adds its section scores (``rewardbench``).
    member_margins : array of shape (n_members, n_pairs), optional
        An ensemble's per-member margins; adds ``ensemble``.
    n_bins : int, default=10
        Equal-mass bins of the ECE.

    Returns
    -------
    dict with ``n_pairs``, ``accuracy``, ``ece``, ``brier``, ``log_loss``, ``n_ties``,
    ``margin_mean``, ``abs_margin_norm`` (mean ``|r+ - r-|`` / std of all rewards),
    ``calibration`` (bins), ``reward_distribution``, ``warnings`` and the optional parts.

    Examples
    --------
    >>> m = pair_metrics([1.0, 2.0, 0.5], [0.0, 2.0, 1.5])
    >>> m["accuracy"], m["n_ties"]
    (0.5, 1)
    """
    c, r = np.asarray(r_chosen, dtype=float), np.asarray(r_rejected, dtype=float)
    if c.shape != r.shape or c.ndim != 1:
        raise ValueError(f"r_chosen {c.shape} and r_rejected {r.shape} must be equal 1-d shapes")
    d = c - r  # (n_pairs,)
    calib = calibration_metrics(d, n_bins=n_bins)
    dist = reward_distribution(c, r)
    std = dist.get("std", 0.0)
    out: dict = {
        "n_pairs": int(c.size),
        "accuracy": pairwise_accuracy(c, r),
        "ece": calib["ece"],
        "brier": calib["brier"],
        "log_loss": calib["log_loss"],
        "n_ties": int(np.sum(d == 0)),
        "margin_mean": float(d.mean()) if d.size else float("nan"),
        "abs_margin_norm": float(np.abs(d).mean() / std) if std > 0 else float("nan"),
        "calibration": {
            "n_bins": n_bins,
            "binning": "equal-mass, top-label",
            "bins": calib["bins"],
        },
        "reward_distribution": dist,
        "warnings": [],
    }
    if dist.get("collapsed"):
        out["warnings"].append(
            f"rewards look collapsed: std {dist['std']:.3g}, {dist['mode_share']:.0%} of them "
            "share one value"
        )
    if margin is not None:
        out["margin_spearman"] = margin_spearman(c, r, margin)
    if groups:
        out["by"] = {name: accuracy_by(c, r, g) for name, g in groups.items()}
        rewardbench = rewardbench_scores(out["by"].get("subset", {}))
        if rewardbench is not None:
            out["rewardbench"] = rewardbench
    if member_margins is not None and np.atleast_2d(member_margins).shape[0] > 1:
        out["ensemble"], _ = ensemble_disagreement(member_margins)
    return out
