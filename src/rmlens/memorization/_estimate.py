"""Counterfactual memorization estimators (DESIGN.md section 3).

With p_ir = sigmoid(r+_ir - r-_ir) for pair i under run r's RM, the brute-force estimator:

    TM_i = mean of p_ir over runs whose training set contains pair i
    TG_i = mean of p_ir over runs whose training set excludes pair i
    CM_i = TM_i - TG_i

The paired estimator also has, from every run, p_cf_ir: pair i under run r's RM with i's
group removed (if r trained on it) or added (if r held it out). Every run then gives pair i
an in-side probability (p_ir if in, else p_cf_ir) and an out-side one (p_cf_ir if in, else
p_ir), and TM_i, TG_i are the means of the in-side and out-side probabilities over the runs:
CM_i is a mean of paired differences, so the between-run noise cancels.

The sigmoid is applied per run before averaging; CM is never clipped. Only runs that scored a
pair (a finite p_ir) count for it, in n_in and n_out as in the means; a pair left with no
in-runs or no out-runs gets NaN. Intervals: percentile bootstrap over runs, NaN scores
ignored the same way; an interval that rests on fewer than 2 runs is NaN (a bootstrap over
one run has no spread, and would look precise): TM's needs 2 in-runs, TG's 2 out-runs, CM's
both.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit

from rmlens.memorization._damping import calibrate, grid_matrix
from rmlens.memorization._reliability import run_sides, side_means
from rmlens.stats import bootstrap_runs, nanquantiles, run_weights

MIN_RUNS_FOR_INTERVAL = 2
ESTIMATE_COLUMNS = [
    "tm", "tg", "cm", "n_in", "n_out", "tm_lo", "tm_hi", "tg_lo", "tg_hi", "cm_lo", "cm_hi",
]  # fmt: skip


def memorization_scores(
    p: np.ndarray,
    member: np.ndarray,
    *,
    p_cf: np.ndarray | None = None,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    chunk: int = 2048,
) -> pd.DataFrame:
    """TM, TG, CM with bootstrap intervals from a probability and a membership matrix.

    Parameters
    ----------
    p : ndarray of shape (n_pairs, n_runs)
        sigmoid(r+ - r-) of each pair under each run's RM; NaN where the run did not score
        the pair (that run then counts neither in ``n_in`` nor in ``n_out``).
    member : ndarray of shape (n_pairs, n_runs), bool
        Whether the run trained on the pair (from the run manifests).
    p_cf : ndarray of shape (n_pairs, n_runs), optional
        The paired estimator: each pair under each run's RM with its group removed (where
        ``member``) or added (elsewhere); NaN where not scored. Without it, brute force.
        ``n_in`` and ``n_out`` count the runs that gave an in-side and an out-side
        probability (paired: every run that scored the pair gives both).
    n_boot : int, default=1000
        Bootstrap resamples of the runs (0: no intervals). An interval is NaN where it
        rests on fewer than 2 runs (TM: in-runs; TG: out-runs; CM: either).
    level : float, default=0.95
        Coverage of the percentile bootstrap intervals.
    seed : int, default=0
        Seed of the bootstrap draws of runs.
    chunk : int, default=2048
        Pairs per block: memory is bounded by about 8 arrays of chunk x n_boot floats
        (130 MB at the defaults), whatever the number of pairs.

    Returns
    -------
    DataFrame
        One row per pair, in the order of ``p``: ``tm, tg, cm, n_in, n_out`` and the
        interval bounds ``tm_lo, tm_hi, tg_lo, tg_hi, cm_lo, cm_hi`` (NaN without
        bootstrap). TM, TG and CM are NaN where ``n_in`` or ``n_out`` is 0.
    """
    p_in, p_out = run_sides(
        np.asarray(p, dtype=np.float64),
        np.asarray(member, dtype=bool),
        p_cf=None if p_cf is None else np.asarray(p_cf, dtype=np.float64),
    )
    n_pairs, n_runs = p_in.shape
    weights = np.zeros((n_runs, 0))
    if n_boot > 0:
        draws = bootstrap_runs(n_runs, n_boot, seed)
        weights = np.ascontiguousarray(run_weights(draws, n_runs).T)  # (n_runs, n_boot)
    once = np.ones((n_runs, 1))
    alpha = (1 - level) / 2 * 100
    qs = np.true_divide([alpha, 100 - alpha], 100)
    out = {name: np.full(n_pairs, np.nan) for name in ESTIMATE_COLUMNS}
    for start in range(0, n_pairs, chunk):
        rows = slice(start, start + chunk)
        tm, tg = (x[:, 0] for x in side_means(p_in[rows], p_out[rows], once))
        out["tm"][rows], out["tg"][rows], out["cm"][rows] = tm, tg, tm - tg
        out["n_in"][rows] = (~np.isnan(p_in[rows])).sum(1)  # a run that gave no side is no run
        out["n_out"][rows] = (~np.isnan(p_out[rows])).sum(1)
        if n_boot:
            btm, btg = side_means(p_in[rows], p_out[rows], weights)
            out["tm_lo"][rows], out["tm_hi"][rows] = nanquantiles(btm, qs).T
            out["tg_lo"][rows], out["tg_hi"][rows] = nanquantiles(btg, qs).T
            btm -= btg  # CM's draws, in place
            out["cm_lo"][rows], out["cm_hi"][rows] = nanquantiles(btm, qs).T
    frame = pd.DataFrame(out)
    frame[["n_in", "n_out"]] = frame[["n_in", "n_out"]].astype(np.int64)
    nan = (frame.n_in == 0) | (frame.n_out == 0)
    frame.loc[nan, ["tm", "tg", "cm"]] = np.nan
    few_in = frame.n_in < MIN_RUNS_FOR_INTERVAL
    few_out = frame.n_out < MIN_RUNS_FOR_INTERVAL
    frame.loc[few_in, ["tm_lo", "tm_hi"]] = np.nan
    frame.loc[few_out, ["tg_lo", "tg_hi"]] = np.nan
    frame.loc[few_in | few_out, ["cm_lo", "cm_hi"]] = np.nan
    return frame


def estimate(
    scores: pd.DataFrame, membership: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """TM, TG, CM per pair from long tables.

    Parameters
    ----------
    scores : DataFrame with ``run``, ``id``, ``r_chosen``, ``r_rejected``
        With ``p`` and ``p_cf`` (a paired audit's scores), the paired estimator; with ``p``
        and ``p_cf_grid`` (last-layer influence), the paired estimator at the damping
        calibrated on these runs (``rmlens.memorization._damping``).
    membership : DataFrame with ``run``, ``id``, ``in_train``, optionally ``validation``
        From the runs' training manifests, never from the scores. A run's validation pairs
        (``validation`` true: never trained on, read by its early stopping) count neither
        in nor out for that run.
    n_boot : int, default=1000
        Bootstrap resamples of the runs (0: no intervals).
    seed : int, default=0
        Seed of the bootstrap.

    Returns
    -------
    DataFrame
        ``id`` and the columns of :func:`memorization_scores`, one row per pair, sorted by
        ``id``.
    """
    ids = pd.Index(np.sort(scores.id.unique()))
    runs = np.sort(scores.run.unique())
    p = np.full((len(ids), len(runs)), np.nan)  # (n_pairs, n_runs); NaN: run did not score it
    row, col = ids.get_indexer(scores.id), np.searchsorted(runs, scores.run.to_numpy())
    p[row, col] = expit(scores.r_chosen.to_numpy() - scores.r_rejected.to_numpy())
    p_cf = None
    if "p_cf" in scores:
        p[row, col] = scores.p.to_numpy(float)
        p_cf = np.full(p.shape, np.nan)
        p_cf[row, col] = scores.p_cf.to_numpy(float)
    elif "p_cf_grid" in scores:  # last-layer influence: calibrated below
        p[row, col] = scores.p.to_numpy(float)
    known = np.zeros(p.shape, dtype=bool)
    member = np.zeros(p.shape, dtype=bool)
    m_row = ids.get_indexer(membership.id)
    m_col = np.searchsorted(runs, membership.run.to_numpy())
    ok = (m_row >= 0) & (m_col < len(runs))
    ok[ok] &= runs[m_col[ok]] == membership.run.to_numpy()[ok]
    known[m_row[ok], m_col[ok]] = True
    member[m_row[ok], m_col[ok]] = membership.in_train.to_numpy(bool)[ok]
    if not known[~np.isnan(p)].all():
        raise ValueError("membership is missing for some (run, id) that have scores")
    if "validation" in membership:
        val = membership.validation.to_numpy(bool)[ok]
        p[m_row[ok][val], m_col[ok][val]] = np.nan  # neither in nor out
    if "p_cf_grid" in scores:
        grid = grid_matrix(scores.p_cf_grid, p.shape, (row, col))
        p_cf, _ = calibrate(p, grid, member, np.zeros(p.shape, dtype=bool))
    table = memorization_scores(p, member, p_cf=p_cf, n_boot=n_boot, seed=seed)
    table.insert(0, "id", ids.to_numpy())
    return table
