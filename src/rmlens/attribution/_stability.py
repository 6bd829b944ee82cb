"""Stability of the explanations: do two halves of the runs rank the features alike?

Why. TM, TG and CM of a pair are means over a few dozen runs, so they carry run-to-run
noise, CM most of all (a small difference of two large means; on HH at 25 runs its
split-half Spearman-Brown is about 0.54 against 1.00 for TM). A regressor fit to a noisy
target also fits some of its noise, and SHAP then ranks features by patterns that one
draw of seeds and folds happened to produce. The held-out R^2 does not reveal this: it
measures how well the features predict this draw, not whether another draw would name
the same features.

How. The audit's finished whole repeats of the plan are split into two halves, alternating
(repeats 0, 2, 4, ... against 1, 3, ...), as the split-half reliability of the audit does
(``rmlens.memorization._reliability``); each half estimates TM, TG, CM per pair with the
audit's estimator (``_reliability.side_means``: mean of sigmoids over in- and out-runs, or of
the paired in- and out-side probabilities; validation pairs neither). The same regressor
and SHAP are then fit to each half's targets, on the same pairs and the same explained rows,
and the two importance tables (mean |SHAP| per feature) are compared:

    rank_spearman = Spearman correlation of the two importances across all features
    top10_overlap = |top10(half 1) & top10(half 2)| / 10

Chance level. Two fits to independent pure-noise targets do not give 0 and 10 / p (two
random lists): a regressor fitting noise leans on the features it can split finely, so its
importances follow the features' resolution (many distinct values, many categories) more
than the target. With the pair features of rmlens, LightGBM fits to pure noise agree at a
rank Spearman of about 0.85 and a top-10 overlap of about 0.5; the rank correlation across
all features is mostly set by this, and by the tail of features that carry no signal. So
each regressor is also fit to ``NOISE_FITS`` pure-noise targets (standard normal, on all
pairs, same explained rows), once per regressor, and the mean figures over their pairs are
reported as ``rank_spearman_noise`` and ``top10_overlap_noise``: the level a ranking of
noise reaches. One rule judges both figures of every regressor (``stability_warnings``): a
figure is flagged when it is below ``WARN_BELOW`` or less than ``ABOVE_CHANCE`` of the way
from its noise level to 1. A fit that explains nothing (held-out R^2 below ``R2_FLOOR``,
``_informative``) is not judged: the stability of a ranking of noise means nothing.

Each half has about half of the runs, so the full-run ranking is somewhat more stable than
these figures say (as split-half correlation understates full-length reliability); they
measure run noise only, not the sampling of pairs (the halves share every pair). Where every
repeat draws the same partition of groups (``same_partition``, e.g. leave one group out),
the halves differ only in the runs' seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.attribution._informative import informative
from rmlens.experiment import AuditDir
from rmlens.stats import spearman

TOP_K = 10  # the top features whose overlap is reported
WARN_BELOW = 0.5  # rank_spearman or top10_overlap below this: a warning
ABOVE_CHANCE = 0.25  # either less than this of the way from its noise level to 1: a warning
NOISE_FITS = 3  # pure-noise targets per regressor for the chance level
STABILITY_COLUMNS = [  # added to the fit table, in this order
    "rank_spearman", "top10_overlap", "top10_half1", "top10_half2", "rank_spearman_noise",
    "top10_overlap_noise", "stability_note",
]


def top_features(importance: pd.Series, k: int = TOP_K) -> list[str]:
    """The ``k`` features of largest importance (ties by name, so the list is reproducible)."""
    frame = pd.DataFrame({"feature": importance.index.astype(str),
                          "importance": importance.to_numpy(dtype=float)})
    frame = frame.sort_values(["importance", "feature"], ascending=[False, True])
    return frame.feature.head(k).tolist()


def compare_importance(first: pd.Series, second: pd.Series, k: int = TOP_K) -> dict:
    """Rank correlation and top-``k`` overlap of two importance tables.

    Parameters
    ----------
    first, second : Series, feature -> importance (mean |SHAP|)
        A feature missing from one table counts as importance 0 there.
    k : int, default=10

    Returns
    -------
    dict with ``rank_spearman`` (Spearman across the union of features, ties by average
    rank; NaN under 3 features or when one table is constant), ``top10_overlap`` (shared
    features among the two top-k lists / k, with k capped at the number of features) and
    ``top10_half1``, ``top10_half2`` (the lists).
    """
    features = first.index.union(second.index)
    a = first.reindex(features, fill_value=0.0).astype(float)
    b = second.reindex(features, fill_value=0.0).astype(float)
    k = min(k, len(features))
    top_a, top_b = top_features(a, k), top_features(b, k)
    return {
        "rank_spearman": spearman(a.to_numpy(), b.to_numpy()),
        "top10_overlap": len(set(top_a) & set(top_b)) / k if k else float("nan"),
        "top10_half1": top_a,
        "top10_half2": top_b,
    }


@dataclass
class Halves:
    """TM, TG and CM per pair estimated from each half of an audit's runs.

    Attributes
    ----------
    first, second : DataFrame
        ``id, tm, tg, cm``, one row per pair (NaN where the half has no in- or out-run).
    repeats : tuple of two lists of int
        The plan's repeats in each half.
    n_runs : tuple of two ints
    same_partition : bool
        Every repeat holds out the same groups: the halves differ only in seeds.
    """

    first: pd.DataFrame
    second: pd.DataFrame
    repeats: tuple[list[int], list[int]] = ([], [])
    n_runs: tuple[int, int] = (0, 0)
    same_partition: bool = False

    @property
    def note(self) -> str:
        """One line on what the halves are, shown beside the figures."""
        def listed(reps):
            return ", ".join(map(str, reps)) or "?"

        text = (f"halves of the runs: repeats {listed(self.repeats[0])} ({self.n_runs[0]} runs) "
                f"vs {listed(self.repeats[1])} ({self.n_runs[1]} runs)")
        if self.same_partition:
            text += ("; every repeat draws the same partition of groups, so the halves differ "
                     "only in seeds")
        return text

    def to_dict(self) -> dict:
        return {"repeats": [list(map(int, r)) for r in self.repeats],
                "n_runs": list(map(int, self.n_runs)), "same_partition": self.same_partition,
                "note": self.note}


def run_halves(out_dir: str | Path, record: dict | None = None) -> Halves:
    """Split an audit's finished whole repeats in two (alternating) and estimate each half.

    Parameters
    ----------
    out_dir : path
        Experiment directory of ``rmlens memorize`` (``config.json``, ``plan.parquet``,
        ``runs/``); the runs read are the plan's (a target reliability grows the plan past
        ``--runs``).
    record : dict, optional
        Its ``config.json`` (read when not given): the plan's kind and the folds used.

    Raises
    ------
    InputError
        No runs or no plan, or fewer than 2 finished whole repeats; the message says which.
    """
    # lazy: scipy loads only when this runs
    from rmlens.memorization import (
        complete_repeats,
        load_matrices,
        runs_per_repeat,
        same_partition,
        side_means,
    )

    out = Path(out_dir)
    exp = AuditDir(out)
    if record is None:
        record = exp.read_record() or {}
    audit = record.get("audit") or {}
    if not exp.has_runs:
        raise InputError(f"{out}: no runs/ of an audit")
    folds = int(record.get("folds_used", audit.get("folds", 5)))
    k = runs_per_repeat(audit.get("plan", "kfold"), folds)
    runs = load_matrices(out)  # the plan's runs (plan.parquet)
    ids, repeat = runs.ids, np.asarray(runs.runs) // k
    whole = complete_repeats(repeat, k)
    if len(whole) < 2:
        raise InputError(f"{len(whole)} finished whole repeat(s) of the plan; two halves need 2")
    first, second = whole[0::2], whole[1::2]  # alternating, as the split-half reliability
    weights = np.column_stack([np.isin(repeat, first), np.isin(repeat, second)]).astype(float)
    # validation pairs count neither in nor out for their run (as in the audit's estimate)
    tm, tg = side_means(*runs.sides(), weights)  # (n_pairs, 2) each
    tables = [pd.DataFrame({"id": ids.to_numpy(), "tm": tm[:, h], "tg": tg[:, h],
                            "cm": tm[:, h] - tg[:, h]}) for h in (0, 1)]
    same = same_partition(exp.read_plan(), k)
    return Halves(tables[0], tables[1], (first.tolist(), second.tolist()),
                  (int(weights[:, 0].sum()), int(weights[:, 1].sum())), same)


def stability_bar(noise: float) -> float:
    """The least value a stability figure needs: ``WARN_BELOW``, or ``ABOVE_CHANCE`` of the
    way from its noise level to 1, whichever is higher (``WARN_BELOW`` when noise is NaN)."""
    chance = noise + ABOVE_CHANCE * (1 - noise) if np.isfinite(noise) else -np.inf
    return max(WARN_BELOW, chance)


def stability_warnings(fit: pd.DataFrame) -> list[str]:
    """One plain warning per target whose feature ranking is not stable between the halves.

    The fit table holds ``target, regressor``, the stability columns and ``r2``. The
    same rule for both figures and every regressor: ``rank_spearman`` against
    ``rank_spearman_noise``, and ``top10_overlap`` against ``top10_overlap_noise``, are each
    flagged when

        value < WARN_BELOW  or  value < noise + ABOVE_CHANCE * (1 - noise)

    (below 0.5, or less than a quarter of the way from what fits to pure noise reach to 1).
    A NaN figure is not flagged. Fits whose held-out ``r2`` is below ``R2_FLOOR`` are left
    out: their stability means nothing, and :func:`fit_warnings` says so.

    Parameters
    ----------
    fit : DataFrame
        The fit table.

    Returns
    -------
    list of str
    """
    if not {"rank_spearman", "top10_overlap"} <= set(fit.columns):
        return []
    warnings = []
    for target in dict.fromkeys(fit.target):
        flagged = []
        for _, row in fit[fit.target == target].iterrows():
            if not informative(row.get("r2", 1.0)):
                continue
            for key, label in (("rank_spearman", "rank correlation"),
                               ("top10_overlap", "top-10 overlap")):
                value, noise = float(row[key]), float(row.get(f"{key}_noise", np.nan))
                if value < stability_bar(noise):  # False for NaN
                    against = f" (noise {noise:.2f})" if np.isfinite(noise) else ""
                    flagged.append(f"{row['regressor']}: {label} {value:.2f}, needs "
                                   f"{stability_bar(noise):.3g}{against}")
        if flagged:
            warnings.append(f"the {str(target).upper()} feature ranking is not stable between "
                            f"halves of the runs ({'; '.join(flagged)}): treat its top "
                            "features as tentative")
    return warnings
