"""Pair categories on the memorization map, and the end-of-audit summary."""

from __future__ import annotations

import numpy as np
import pandas as pd

CATEGORIES = ("memorized", "generalized", "not_learned", "other", "undefined")


def categorize(
    table: pd.DataFrame, *, cm_threshold: float = 0.1, learned: float = 0.5
) -> pd.Series:
    """memorized: CM >= cm_threshold; generalized: TM, TG >= learned and CM below the threshold;
    not_learned: TM, TG < learned; other: the rest (e.g. TG well above TM); undefined: NaN."""
    tm, tg, cm = table.tm.to_numpy(), table.tg.to_numpy(), table.cm.to_numpy()
    conditions = [
        np.isnan(cm),
        cm >= cm_threshold,
        (tm >= learned) & (tg >= learned),
        (tm < learned) & (tg < learned),
    ]
    names = ["undefined", "memorized", "generalized", "not_learned"]
    return pd.Series(np.select(conditions, names, default="other"), index=table.index)


def summarize_audit(
    table: pd.DataFrame, *, cm_threshold: float, learned: float = 0.5, top: int = 10
) -> dict:
    counts = table.category.value_counts()
    ranked = table.dropna(subset=["cm"]).sort_values("cm", ascending=False).head(top)
    cols = [c for c in ("id", "tm", "tg", "cm", "group", "mechanism") if c in ranked]
    return {
        "n_pairs": int(len(table)),
        "thresholds": {"cm_memorized": cm_threshold, "learned": learned},
        "counts": {c: int(counts.get(c, 0)) for c in CATEGORIES},
        "mean": {k: float(table[k].mean()) for k in ("tm", "tg", "cm")},
        "most_memorized": ranked[cols].to_dict(orient="records"),
    }
