"""Pair categories on the memorization map, and the end-of-audit summary."""

from __future__ import annotations

import numpy as np
import pandas as pd

# In the order they are applied: a pair gets the first that holds.
CATEGORIES = ("undefined", "not_learned", "memorized", "generalized", "other")
RULES = {
    "undefined": "n_in = 0 or n_out = 0 (no TM, TG or CM)",
    "not_learned": "TM < {learned}: not learned even when trained on",
    "memorized": "CM >= {cm}",
    "generalized": "TG >= {learned}",
    "other": "the rest (TG < {learned}, CM < {cm})",
}


def categorize(
    table: pd.DataFrame, *, cm_threshold: float = 0.1, learned: float = 0.5
) -> pd.Series:
    """Each pair's category, the first rule that holds, in this order (DESIGN.md section 3):

    1. ``undefined``: n_in = 0 or n_out = 0 (TM, TG and CM are NaN);
    2. ``not_learned``: TM < ``learned``: the RMs that trained on it do not prefer its
       chosen response, so it is not memorized whatever its CM;
    3. ``memorized``: CM >= ``cm_threshold``;
    4. ``generalized``: TG >= ``learned``;
    5. ``other``: the rest (learned, CM below the threshold, TG below ``learned``).

    Parameters
    ----------
    table : DataFrame
        The memorization table: ``tm``, ``tg``, ``cm`` and, if present, ``n_in`` and
        ``n_out``.
    cm_threshold : float, default=0.1
        CM at and above which a learned pair is ``memorized``.
    learned : float, default=0.5
        TM below which a pair is ``not_learned``, and TG at and above which it is
        ``generalized``.

    Returns
    -------
    Series of str
        The category of each pair, indexed like ``table``.
    """
    tm, tg, cm = (table[k].to_numpy(float) for k in ("tm", "tg", "cm"))
    undefined = np.isnan(tm) | np.isnan(tg) | np.isnan(cm)
    if {"n_in", "n_out"} <= set(table.columns):
        undefined |= (table.n_in.to_numpy() == 0) | (table.n_out.to_numpy() == 0)
    with np.errstate(invalid="ignore"):
        conditions = [undefined, tm < learned, cm >= cm_threshold, tg >= learned]
    return pd.Series(
        np.select(conditions, list(CATEGORIES[:4]), default="other"), index=table.index
    )


def cm_significant(table: pd.DataFrame) -> pd.Series:
    """Whether CM's interval lies above 0 (its lower bound > 0); False where it is NaN."""
    return pd.Series(table.cm_lo.to_numpy(float) > 0, index=table.index)


def summarize_audit(
    table: pd.DataFrame, *, cm_threshold: float, learned: float = 0.5, top: int = 10
) -> dict:
    """The end-of-audit summary of a categorized memorization table (``summary.json``).

    Parameters
    ----------
    table : DataFrame
        The memorization table with its ``category`` column (:func:`categorize`) and,
        optionally, ``cm_significant`` (else computed from ``cm_lo``).
    cm_threshold : float
        The CM threshold the categories used.
    learned : float, default=0.5
        The TM and TG threshold the categories used.
    top : int, default=10
        Pairs listed in ``most_memorized``, highest CM first.

    Returns
    -------
    dict
        ``n_pairs``, ``thresholds``, ``category_order``, ``category_rules``, ``counts`` per
        category, ``cm_significant`` (how many pairs' CM interval lies above 0, and how many
        of them are memorized), the ``mean`` TM, TG and CM, and ``most_memorized`` (the
        ``top`` pairs' id, TM, TG, CM and group or mechanism where present).
    """
    counts = table.category.value_counts()
    ranked = table.dropna(subset=["cm"]).sort_values("cm", ascending=False).head(top)
    cols = [c for c in ("id", "tm", "tg", "cm", "group", "mechanism") if c in ranked]
    significant = table.cm_significant if "cm_significant" in table else cm_significant(table)
    return {
        "n_pairs": int(len(table)),
        "thresholds": {"cm_memorized": cm_threshold, "learned": learned},
        "category_order": list(CATEGORIES),
        "category_rules": {
            c: RULES[c].format(learned=learned, cm=cm_threshold) for c in CATEGORIES
        },
        "counts": {c: int(counts.get(c, 0)) for c in CATEGORIES},
        "cm_significant": {
            "count": int(significant.sum()),
            "memorized": int((significant & (table.category == "memorized")).sum()),
            "rule": "the lower bound of CM's 95% bootstrap interval is above 0",
        },
        "mean": {k: float(table[k].mean()) for k in ("tm", "tg", "cm")},
        "most_memorized": ranked[cols].to_dict(orient="records"),
    }
