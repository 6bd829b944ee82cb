"""Agreement across audits (issue 13, item 4): do two audits rank the pairs alike?

For audits a and b over the pairs both scored, per score s in (TM, TG, CM):

    agreement_s(a, b) = Spearman over common pairs of s_a and s_b
    ceiling_s(a, b)   = sqrt(rel_s(a) * rel_s(b))

rel_s is each audit's split-half reliability of s, Spearman-Brown corrected to its full run
count (``summary.json`` ``reliability.<s>.spearman_brown``). Classical test theory bounds
the correlation of two noisy measurements by the geometric mean of their reliabilities
(Spearman 1904, correction for attenuation): two audits cannot agree more than their own
run-to-run noise allows, so an agreement far below the ceiling is a real difference between
the audits (objective, backbone, head, mode or plan), one near it is all the noise permits.
An agreement above the ceiling usually means shared noise: audits with the same plan and
seed hold out the same groups in the same runs, so part of their pair-level noise is common.
"""

from __future__ import annotations

import math

import numpy as np

from rmlens.stats import spearman

SCORES = ("tm", "tg", "cm")


def reliability(summary: dict, score: str) -> float:
    """An audit's split-half reliability of ``score`` (Spearman-Brown); NaN when absent."""
    part = ((summary or {}).get("reliability") or {}).get(score) or {}
    value = part.get("spearman_brown")
    return float(value) if isinstance(value, (int, float)) and value is not None else math.nan


def ceiling(rel_a: float, rel_b: float) -> float:
    """sqrt(rel_a * rel_b): the most two audits can agree; NaN unless both are > 0."""
    if not (np.isfinite(rel_a) and np.isfinite(rel_b)) or rel_a <= 0 or rel_b <= 0:
        return math.nan
    return math.sqrt(min(rel_a, 1.0) * min(rel_b, 1.0))


def common_rows(ids_a, ids_b) -> tuple[np.ndarray, np.ndarray]:
    """Row positions in a and in b of the pair ids both hold, in a's order."""
    import pandas as pd

    ids_a, ids_b = pd.Index(ids_a), pd.Index(ids_b)
    in_b = ids_b.get_indexer(ids_a)
    rows_a = np.flatnonzero(in_b >= 0)
    return rows_a, in_b[rows_a]


def agreement(scores_a: np.ndarray, scores_b: np.ndarray) -> np.ndarray:
    """Spearman of each score between two audits, (3,), from aligned (n_common, 3) arrays
    whose columns are TM, TG, CM."""
    return np.array([spearman(scores_a[:, k], scores_b[:, k]) for k in range(len(SCORES))])
