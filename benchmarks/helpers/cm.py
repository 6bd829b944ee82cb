"""CM per pair from an audit's run matrices, and its split-half reliability at a number of
runs: what the paired-CM benchmarks and the findings read from brute-force and paired audits.
"""

from __future__ import annotations

import numpy as np

from rmlens.memorization._reliability import run_sides, side_means, split_half


def cm_from(m, runs: np.ndarray) -> np.ndarray:
    """CM per pair from the runs ``runs`` (column positions) of matrices ``m``."""
    w = np.zeros((len(m.runs), 1))
    w[runs, 0] = 1
    tm, tg = side_means(*run_sides(m.p, m.member, m.val, m.p_cf), w)
    return (tm - tg)[:, 0]


def reliability_at(m, n_runs: int, folds: int) -> float:
    """CM's Spearman-Brown reliability from the first ``n_runs`` runs: whole repeats as
    halves (as the audit does), or single runs for the paired estimator below 2 repeats."""
    cols = np.arange(n_runs)
    sub = [a[:, cols] for a in (m.p, m.member, m.val)]
    p_cf = None if m.p_cf is None else m.p_cf[:, cols]
    if n_runs >= 2 * folds:
        rel = split_half(*sub, cols // folds, folds=folds, p_cf=p_cf)
        return rel["cm"]["spearman_brown"]
    if p_cf is None:
        return float("nan")  # brute force: every pair needs in- and out-runs in each half
    rel = split_half(*sub, cols, folds=1, p_cf=p_cf)  # each run a unit of its own
    return rel["cm"]["spearman_brown"]
