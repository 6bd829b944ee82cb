"""The two sides of every (pair, run), in and out, and their means over runs: the core of
every memorization estimate (``_estimate``), of damping calibration (``_damping``) and of
reliability (``_reliability``)."""

from __future__ import annotations

import numpy as np


def run_sides(
    p: np.ndarray, member: np.ndarray, val: np.ndarray | None = None, p_cf: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The in-side and out-side probability of every (pair, run), NaN where a run gives none.

    ``p``, ``member``, ``val``, ``p_cf``: (n_pairs, n_runs). A run's validation pairs
    (``val``) are neither in nor out. Brute force (``p_cf`` None): p is in-side where the
    run trained on the pair, else out-side. Paired: the run's p is one side and its
    counterfactual p_cf the other.
    """
    if val is not None:
        p = np.where(val, np.nan, p)
    if p_cf is None:
        return np.where(member, p, np.nan), np.where(member, np.nan, p)
    if val is not None:
        p_cf = np.where(val, np.nan, p_cf)
    return np.where(member, p, p_cf), np.where(member, p_cf, p)


def side_means(
    p_in: np.ndarray, p_out: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """TM, TG for run weights (n_runs, n_draws): (n_pairs, n_draws) each.

    Weighted means of the in-side and out-side probabilities (:func:`run_sides`); only runs
    that gave a side count for it (a NaN is no run of that side).
    """
    has_in, has_out = ~np.isnan(p_in), ~np.isnan(p_out)
    w32 = weights.astype(np.float32)
    n_in = (has_in.astype(np.float32) @ w32).astype(np.float64)  # exact: integer counts
    n_out = (has_out.astype(np.float32) @ w32).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tm = (np.where(has_in, p_in, 0.0) @ weights) / n_in
        tg = (np.where(has_out, p_out, 0.0) @ weights) / n_out
    return tm, tg
