"""Figures over runs under the percentile bootstrap over runs (``rmlens.stats``).

Every figure that is a mean over runs gets its interval this way (DESIGN.md section 3: the
runs are the unit of randomness; pairs and groups are fixed by the data). One draw is a
multiset of runs, kept as run indices ``(n_boot, n_runs)`` (``stats.bootstrap_runs``); a
figure pooled over runs reads it as run weights (``stats.run_weights``).
"""

from __future__ import annotations

import numpy as np


def run_mean(per_run: np.ndarray, draws: np.ndarray) -> tuple[float, np.ndarray]:
    """A mean over runs of a per-run figure (NaN: the run has none), and its draws (n_boot,).

        value = mean over runs r with a figure of v_r
    """
    v = np.asarray(per_run, dtype=float)  # (n_runs,)
    ok = np.isfinite(v)
    value = float(v[ok].mean()) if ok.any() else float("nan")
    if not len(draws):
        return value, np.zeros(0)
    picked = v[draws]  # (n_boot, n_runs)
    with np.errstate(invalid="ignore"):
        counts = np.isfinite(picked).sum(1)
        sums = np.where(np.isfinite(picked), picked, 0.0).sum(1)
        return value, np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def pooled_ratio(
    num: np.ndarray, den: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per column, sum over runs of ``num`` / sum over runs of ``den``, and its draws.

    ``num``, ``den`` : (n_runs, n_cols); ``weights`` : (n_boot, n_runs). Returns the value
    (n_cols,) and the draws (n_boot, n_cols); NaN where the denominator is 0.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        value = num.sum(0) / den.sum(0)
        draws = (weights @ num) / (weights @ den)
    value = np.where(den.sum(0) > 0, value, np.nan)
    return value, np.where(np.isfinite(draws), draws, np.nan)
