"""Figures of the audit's RMs on the pairs they never saw: accuracy, worst-group accuracy,
counter-bias slices and reward-length correlation.

Run r's held-out pairs are those its RM neither trained on nor read for early stopping
(``Audit.held_out``). With d_ir = r+_ir - r-_ir,

    correct_ir = 1 if d_ir > 0, 1/2 if d_ir = 0 (a tie counts half), else 0
    accuracy   = mean over runs r of (mean of correct_ir over run r's held-out pairs i)

A slice's accuracy is the same restricted to the slice's pairs (runs without a held-out pair
in the slice are left out); the low-margin slice is the lowest tercile of the data's
``margin`` (``_margin.margin_terciles``), the weakest preferences. The worst-group accuracy
pools each group's held-out predictions over runs (sum of correct / number of held-out
predictions, all runs together) and takes the lowest group among those with at least
``min_pairs`` held-out pairs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rmlens.attribution import pair_features
from rmlens.comparison._margin import margin_terciles
from rmlens.data import word_counts
from rmlens.stats import pairwise_correct, pooled_ratio, run_mean, spearman


def correct(d: np.ndarray) -> np.ndarray:
    """1 where d > 0, 1/2 where d == 0 (ties), 0 below; NaN stays NaN. Same shape as d."""
    d = np.asarray(d, dtype=float)
    return np.where(np.isnan(d), np.nan, pairwise_correct(d))


def per_run_accuracy(d: np.ndarray, held: np.ndarray, rows: np.ndarray | None = None):
    """Accuracy of each run on its held-out pairs (among ``rows``, a bool mask (n_pairs,)),
    (n_runs,); NaN for a run without such a pair."""
    cells = held if rows is None else held & rows[:, None]
    hits = np.where(cells, correct(d), 0.0).sum(0)
    count = cells.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, hits / np.maximum(count, 1), np.nan)


def heldout_accuracy(d, held, draws, rows=None) -> tuple[float, np.ndarray, int]:
    """Mean over runs of the held-out accuracy (module docstring): value, draws (n_boot,),
    and the number of distinct pairs held out at least once (among ``rows``)."""
    value, boot = run_mean(per_run_accuracy(d, held, rows), draws)
    seen = held.any(1) if rows is None else held.any(1) & rows
    return value, boot, int(seen.sum())


def low_margin_accuracy(d, held, margin, draws) -> tuple[float, np.ndarray, int]:
    """``heldout_accuracy`` on the lowest-margin tercile of pairs; ``margin`` (n_pairs,), NaN
    where unknown (such a pair is in no tercile)."""
    return heldout_accuracy(d, held, draws, rows=margin_terciles(margin) == 0)


def worst_group(d, held, groups: pd.Series, weights, min_pairs: int) -> dict:
    """Worst-group held-out accuracy over the groups with >= ``min_pairs`` held-out pairs.

    Parameters
    ----------
    d, held : (n_pairs, n_runs)
    groups : Series of n_pairs labels (NaN: the pair belongs to no group)
    weights : (n_boot, n_runs) run weights of the bootstrap draws

    Returns
    -------
    dict with ``value``, ``draws`` (n_boot,), ``group`` (the worst one), ``n`` (its held-out
    pairs), ``qualified`` and ``groups`` (groups with a held-out pair), ``by_group``
    (label -> pooled accuracy of every qualified group).
    """
    codes, labels = pd.factorize(groups, sort=True)  # -1: no group
    n_groups = len(labels)
    c = correct(d)
    num = np.zeros((d.shape[1], n_groups))
    den = np.zeros((d.shape[1], n_groups))
    for r in range(d.shape[1]):
        cells = held[:, r] & (codes >= 0)
        num[r] = np.bincount(codes[cells], weights=c[cells, r], minlength=n_groups)
        den[r] = np.bincount(codes[cells], minlength=n_groups)
    seen = held.any(1) & (codes >= 0)
    pairs = np.bincount(codes[seen], minlength=n_groups)  # distinct held-out pairs per group
    ok = pairs >= min_pairs
    value, boot = pooled_ratio(num, den, weights)
    out = {"qualified": int(ok.sum()), "groups": int((pairs > 0).sum()),
           "by_group": {str(labels[g]): float(value[g]) for g in np.flatnonzero(ok)}}  # fmt: skip
    if not ok.any():
        return {**out, "value": float("nan"), "draws": np.full(len(weights), np.nan),
                "group": None, "n": 0}  # fmt: skip
    worst = np.flatnonzero(ok)[np.argmin(value[ok])]
    with np.errstate(invalid="ignore"):
        draws = np.nanmin(np.where(np.isnan(boot[:, ok]), np.inf, boot[:, ok]), axis=1)
    draws = np.where(np.isinf(draws), np.nan, draws)
    return {**out, "value": float(value[worst]), "draws": draws, "group": str(labels[worst]),
            "n": int(pairs[worst])}  # fmt: skip


def minority_model(table: pd.DataFrame, min_pairs: int) -> tuple[str, str] | None:
    """The system chosen least often (lowest share of its pairs won), and a description.

    Win share = pairs where it wrote the chosen response / pairs where it wrote either
    (``chosen_model`` and ``rejected_model``); only systems in at least ``min_pairs`` pairs
    count when any is. Without ``rejected_model``: the fewest pairs as ``chosen_model``.
    None without ``chosen_model``.
    """
    if "chosen_model" not in table or table["chosen_model"].isna().all():
        return None
    won = table["chosen_model"].dropna().astype(str).value_counts()
    if "rejected_model" not in table:
        model = won.sort_values(kind="stable").index[0]
        return model, f"'{model}', chosen in {won[model]} pairs, the fewest of any system"
    lost = table["rejected_model"].dropna().astype(str).value_counts()
    both = won.add(lost, fill_value=0)
    share = won.reindex(both.index, fill_value=0) / both
    big = share[both >= min_pairs]
    share = big if len(big) else share
    model = share.sort_values(kind="stable").index[0]
    return model, (f"'{model}', which wins {share[model]:.0%} of its {int(both[model])} pairs, "
                   "the lowest share of any system")  # fmt: skip


def counter_bias_slices(table: pd.DataFrame, min_pairs: int) -> dict[str, tuple]:
    """Pairs where a shortcut points the wrong way: name -> (mask (n_pairs,), description).

    ``chosen_shorter``: the chosen response has fewer words than the rejected one;
    ``minority_model``: the chosen response comes from the least-preferred system (when
    ``chosen_model`` exists); ``chosen_refusal``: the chosen response is a refusal
    (``rmlens.attribution.pair_features``' refusal lexicon). On data of ``rmlens data synth``
    (a ``mechanism`` column, the planted ground truth): ``quality``, the pairs that quality
    decided, and ``quality_chosen_shorter``, those whose better response is the shorter one.
    """
    shorter = word_counts(table["chosen"]) < word_counts(table["rejected"])
    slices = {"chosen_shorter": (shorter, "the chosen response has fewer words")}
    found = minority_model(table, min_pairs)
    if found is not None:
        model, text = found
        mask = (table["chosen_model"].astype(str) == model).to_numpy() & table[
            "chosen_model"].notna().to_numpy()  # fmt: skip
        slices["minority_model"] = (mask, f"the chosen response is by {text}")
    refusal = pair_features(table[["prompt", "chosen", "rejected"]], features=["refusal"],
                            metadata=False)  # fmt: skip
    slices["chosen_refusal"] = (
        refusal["refusal_chosen"].to_numpy(float) == 1,
        "the chosen response is a refusal",
    )
    if "mechanism" in table:
        quality = (table["mechanism"].astype(str) == "quality").to_numpy()
        slices["quality"] = (quality, "the planted mechanism 'quality' decided the pair")
        slices["quality_chosen_shorter"] = (
            quality & shorter, "quality decided the pair and the better response is shorter"
        )
    return slices


def reward_length(r_chosen, r_rejected, held, words_c, words_r) -> np.ndarray:
    """Per run, Spearman of reward with response length in words over its held-out
    responses (chosen and rejected pooled), (n_runs,); NaN under 3 responses."""
    out = np.full(held.shape[1], np.nan)
    for r in range(held.shape[1]):
        rows = held[:, r]
        rewards = np.concatenate([r_chosen[rows, r], r_rejected[rows, r]])
        lengths = np.concatenate([words_c[rows], words_r[rows]])
        out[r] = spearman(rewards, lengths)
    return out
