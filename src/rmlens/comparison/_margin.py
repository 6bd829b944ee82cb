"""Memorization by preference margin: which pairs the RMs memorize, strong or weak ones.

The paper finds high-margin pairs memorized; a complementary objective should move CM toward
low-margin pairs. Pairs are split into terciles of ``margin`` by rank (tied margins stay in
one tercile, so terciles may differ in size):

    tercile_i = floor(3 (rank_i - 1) / n)      rank: average rank of margin_i among n pairs

and per audit: mean CM per tercile, the low tercile's minus the high one's (did memory move
to the hard pairs?), the Spearman correlation of CM with margin over all pairs, and mean TG
on the lowest tercile (how well the RMs generalize to weak preferences).
TM, TG, CM come from ``rmlens.memorization.memorization_scores`` (validation pairs count
neither in nor out, as in the audit), once on all runs and once per bootstrap draw of runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from rmlens.memorization import memorization_scores, run_sides, side_means
from rmlens.stats import spearman

TERCILES = ("low", "mid", "high")
METRICS = ("cm_margin_low", "cm_margin_mid", "cm_margin_high", "cm_margin_low_minus_high",
           "cm_margin_spearman", "tg_low_margin")  # fmt: skip


def table_margin(table: pd.DataFrame) -> np.ndarray | None:
    """The data's ``margin`` column as floats, (n_pairs,); None without one or without a
    finite value (then no figure by margin exists)."""
    if "margin" not in table:
        return None
    m = pd.to_numeric(table["margin"], errors="coerce").to_numpy(float)
    return m if np.isfinite(m).any() else None


def margin_terciles(margin: np.ndarray) -> np.ndarray:
    """Tercile of each pair's margin (0 low, 1 mid, 2 high), -1 where margin is NaN, (n,)."""
    margin = np.asarray(margin, dtype=float)
    out = np.full(margin.shape, -1)
    ok = np.isfinite(margin)
    n = int(ok.sum())
    if n:
        ranks = rankdata(margin[ok])  # average ranks, 1..n
        out[ok] = np.minimum(np.floor(3 * (ranks - 1) / n), 2).astype(int)
    return out


def pair_scores(p: np.ndarray, member: np.ndarray, val: np.ndarray,
                p_cf: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """TM, TG, CM per pair from all runs, (n_pairs, 3): ``memorization_scores`` (paired
    where ``p_cf`` is given)."""
    p = np.where(val, np.nan, p)  # validation pairs: neither in nor out for that run
    p_cf = None if p_cf is None else np.where(val, np.nan, p_cf)
    table = memorization_scores(p, member, p_cf=p_cf, n_boot=0)
    return table[["tm", "tg", "cm"]].to_numpy(float)


def pair_score_draws(p: np.ndarray, member: np.ndarray, val: np.ndarray, weights: np.ndarray,
                     p_cf: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """TM, TG, CM per pair under each bootstrap draw of runs, (n_draws, n_pairs, 3).

    ``weights`` (n_draws, n_runs): how often each run is drawn. The audit's own estimator
    (``memorization._reliability.side_means``, the core of ``memorization_scores``) with run
    weights: TM_i = sum_r w_r p_in_ir / sum_r w_r [r gives an in-side], TG likewise.
    """
    tm, tg = side_means(*run_sides(p, member, val, p_cf), weights.T)  # (n_pairs, n_draws)
    return np.stack([tm.T, tg.T, (tm - tg).T], axis=2)


def margin_figures(scores: np.ndarray, margin: np.ndarray, tercile: np.ndarray, *,
                   correlation: bool = True) -> np.ndarray:  # fmt: skip
    """The values of ``METRICS`` from (n_pairs, 3) TM, TG, CM, (6,); the Spearman is NaN
    unless ``correlation``.

    The low-minus-high difference is taken from the same scores as the tercile means, so a
    bootstrap draw gives one difference and its interval is that of the difference (not of
    two intervals subtracted)."""
    tg, cm = scores[:, 1], scores[:, 2]
    out = []
    for k in range(3):
        values = cm[(tercile == k) & np.isfinite(cm)]
        out.append(values.mean() if values.size else np.nan)
    out.append(out[0] - out[2])  # mean CM low - mean CM high
    out.append(spearman(cm, margin) if correlation else np.nan)
    low = tg[(tercile == 0) & np.isfinite(tg)]
    out.append(low.mean() if low.size else np.nan)
    return np.asarray(out, dtype=float)


def margin_counts(scores: np.ndarray, margin: np.ndarray, tercile: np.ndarray) -> list[int]:
    """Pairs behind each of ``METRICS`` (finite CM, TG and margin where needed)."""
    tg, cm = np.isfinite(scores[:, 1]), np.isfinite(scores[:, 2])
    counts = [int(((tercile == k) & cm).sum()) for k in range(3)]
    counts.append(counts[0] + counts[2])
    counts.append(int((cm & np.isfinite(margin)).sum()))
    counts.append(int(((tercile == 0) & tg).sum()))
    return counts


def tercile_bounds(margin: np.ndarray, tercile: np.ndarray) -> list[tuple[float, float]]:
    """(min, max) margin of each tercile, for the notes; NaN for an empty tercile."""
    bounds = []
    for k in range(3):
        m = np.asarray(margin, dtype=float)[tercile == k]
        bounds.append((float(m.min()), float(m.max())) if m.size else (np.nan, np.nan))
    return bounds
