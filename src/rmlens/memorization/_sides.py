"""The two sides of every (pair, run), in and out, and their means over runs: the core of
every memorization estimate (``_estimate``), of damping calibration (``_damping``) and of
reliability (``_reliability``)."""

from __future__ import annotations

import numpy as np


def run_sides(
    p: np.ndarray, member: np.ndarray, val: np.ndarray | None = None, p_cf: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The in-side and out-side probability of every (pair, run), NaN where a run gives none.

    A run's validation pairs (``val``) are neither in nor out. Brute force (``p_cf`` None):
    p is in-side where the run trained on the pair, else out-side. Paired: the run's p is
    one side and its counterfactual p_cf the other.

    Parameters
    ----------
    p : ndarray of shape (n_pairs, n_runs)
        sigmoid(r+ - r-) per run.
    member : ndarray of shape (n_pairs, n_runs), bool
        The runs' training pairs.
    val : ndarray of shape (n_pairs, n_runs), bool, or None, default=None
        The runs' validation pairs.
    p_cf : ndarray of shape (n_pairs, n_runs) or None, default=None
        The paired counterfactuals; None for a brute-force audit.

    Returns
    -------
    p_in, p_out : ndarray of shape (n_pairs, n_runs)
        The in-side and out-side probabilities.
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
    """TM, TG for run weights: weighted means of the in-side and out-side probabilities.

    Only runs that gave a side count for it (a NaN is no run of that side).

    Parameters
    ----------
    p_in, p_out : ndarray of shape (n_pairs, n_runs)
        The sides of :func:`run_sides`.
    weights : ndarray of shape (n_runs, n_draws)
        Each draw's weight of each run (one column of ones: the plain means).

    Returns
    -------
    tm, tg : ndarray of shape (n_pairs, n_draws)
    """
    has_in, has_out = ~np.isnan(p_in), ~np.isnan(p_out)
    w32 = weights.astype(np.float32)
    n_in = (has_in.astype(np.float32) @ w32).astype(np.float64)  # exact: integer counts
    n_out = (has_out.astype(np.float32) @ w32).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tm = (np.where(has_in, p_in, 0.0) @ weights) / n_in
        tg = (np.where(has_out, p_out, 0.0) @ weights) / n_out
    return tm, tg
