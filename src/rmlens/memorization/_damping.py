"""The damping of influence (last-layer, or Gauss-Newton through a fine-tuned RM's trained
parameters), calibrated on the audit's own runs.

Runs whose RM is not convex (an MLP head, a fine-tuned RM) give their paired
counterfactuals over a grid of damping values (``rmlens.influence``): the ranking
of pairs barely depends on the damping, the size of the effects does. Brute force's CM is
unbiased but noisy per pair; its mean over all pairs is not noisy. So the audit keeps the
damping at which the mean paired CM equals the mean brute-force CM of the same runs and
pairs, interpolating p_cf linearly between the two grid values that bracket it (paired CM is
linear in p_cf). Paired CM of pair i at grid value k is the mean over the runs that gave it
a side of s_ir (p_ir - p_cf_irk), s = +1 where run r trained on i and -1 where it held i
out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rmlens._io import number
from rmlens.memorization._reliability import run_sides, side_means, split_half
from rmlens.stats import spearman


def run_sums(p, p_cf_grid, member, val) -> tuple[np.ndarray, np.ndarray]:
    """One run's contribution to every pair's paired CM at every grid value: the sums
    s (p - p_cf) (n_pairs, K) and the counts (n_pairs,) of runs that gave both sides."""
    sign = np.where(member, 1.0, -1.0)
    used = ~val & np.isfinite(p) & np.isfinite(p_cf_grid).all(1)
    diff = np.where(used[:, None], sign[:, None] * (p[:, None] - p_cf_grid), 0.0)
    return diff, used.astype(float)


def brute_cm(p: np.ndarray, member: np.ndarray, val: np.ndarray) -> np.ndarray:
    """Brute-force CM (n_pairs,) of matrices (n_pairs, n_runs): NaN without both sides."""
    tm, tg = side_means(*run_sides(p, member, val), np.ones((p.shape[1], 1)))
    return (tm - tg)[:, 0]


def choose_damping(
    brute: np.ndarray, sums: np.ndarray, counts: np.ndarray, grid,
    target_name: str = "brute force's mean CM",
) -> tuple[int, float, dict]:
    """Where on the grid the mean paired CM meets the mean brute CM.

    Returns ``k`` and ``t``: p_cf = (1 - t) p_cf[k] + t p_cf[k + 1] (``t`` 0 and ``k`` the
    last index at the grid's large end), and the calibration's record for ``summary.json``.
    Only pairs with a brute-force CM and a paired one count in either mean.
    ``target_name``: what ``brute`` is, in the record's words at a grid's edge.
    """
    grid = np.asarray(grid, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        paired = sums / counts[:, None]  # (n_pairs, K)
    pairs = np.isfinite(brute) & (counts > 0)
    record = {
        "method": "Gauss-Newton influence, damping calibrated so that the mean paired CM "
        "equals brute force's mean CM over the same runs and pairs",
        "pairs": int(pairs.sum()),
        "grid": grid.tolist(),
    }
    if not pairs.any():
        record.update(edge="no pair has both brute-force sides yet", damping=float(grid[-1]))
        return len(grid) - 1, 0.0, record
    target = float(brute[pairs].mean())
    means = paired[pairs].mean(0)
    record.update(brute_mean_cm=target, paired_mean_cm=means.tolist())
    k, t, edge = _bracket(means, target, target_name)
    if edge:
        record["edge"] = edge
    shown = grid[k]
    if t:
        shown = np.exp((1 - t) * np.log(grid[k]) + t * np.log(grid[k + 1]))
    record["damping"] = float(shown)
    return k, t, record


def _bracket(means: np.ndarray, target: float, name: str) -> tuple[int, float, str | None]:
    """The first k (small damping first) with means[k] >= target >= means[k + 1], and t."""
    if target >= means[0]:
        return 0, 0.0, (
            f"{name} ({target:.4f}) is above the paired mean CM at the "
            f"smallest damping ({means[0]:.4f}): the smallest is kept"
        )
    for k in range(len(means) - 1):
        hi, lo = means[k], means[k + 1]
        if hi >= target >= lo:
            return k, float((hi - target) / (hi - lo)) if hi > lo else 0.0, None
    return len(means) - 1, 0.0, (
        f"{name} ({target:.4f}) is below the paired mean CM at the largest "
        f"damping ({means[-1]:.4f}): the largest is kept"
    )


def blend(p_cf_grid: np.ndarray, k: int, t: float) -> np.ndarray:
    """p_cf (n_pairs,) at the calibrated damping from one run's grid (n_pairs, K)."""
    if t == 0:
        return p_cf_grid[:, k]
    return (1 - t) * p_cf_grid[:, k] + t * p_cf_grid[:, k + 1]


def grid_matrix(column: pd.Series, shape: tuple[int, int], cell) -> np.ndarray:
    """Long tables' ``p_cf_grid`` (one list per row) as (n_pairs, n_runs, K), NaN where no
    row gives a (pair, run) cell; ``cell`` the rows' (pair, run) positions."""
    values = np.stack(column.to_numpy())
    grid = np.full((*shape, values.shape[1]), np.nan)
    grid[cell] = values
    return grid


def calibrate(p, p_cf_grid, member, val, grid=None) -> tuple[np.ndarray, dict]:
    """p_cf (n_pairs, n_runs) at the calibrated damping, from whole matrices: ``p``,
    ``member``, ``val`` (n_pairs, n_runs) and ``p_cf_grid`` (n_pairs, n_runs, K)."""
    K = p_cf_grid.shape[2]
    sums, counts = np.zeros((len(p), K)), np.zeros(len(p))
    for j in range(p.shape[1]):
        s, c = run_sums(p[:, j], p_cf_grid[:, j], member[:, j], val[:, j])
        sums += s
        counts += c
    grid = np.arange(1, K + 1) if grid is None else grid
    k, t, record = choose_damping(brute_cm(p, member, val), sums, counts, grid)
    p_cf = np.column_stack([blend(p_cf_grid[:, j], k, t) for j in range(p.shape[1])])
    return p_cf, record


def brute_agreement(cm: np.ndarray, m, reliability: dict, units, folds: int, seed: int) -> dict:
    """How paired CM agrees with brute-force CM of the same runs: their Spearman
    correlation, brute force's own split-half reliability, and the ceiling of the
    correlation sqrt(rel_paired rel_brute) that two noisy measures of one thing reach.

    The runs are shared, so this checks the calibrated estimator on the audit's own data;
    it is no substitute for a disjoint brute-force reference (``benchmarks/paired_cm.py``).
    """
    brute = brute_cm(m.p, m.member, m.val)
    rel_brute = split_half(m.p, m.member, m.val, units, folds=folds, seed=seed)["cm"]
    rel_brute = rel_brute["spearman_brown"]
    rel_paired = reliability["cm"]["spearman_brown"]
    ok = np.isfinite(brute) & np.isfinite(cm)
    rho = spearman(brute, cm)  # over the pairs where both are finite
    ceiling = float(np.sqrt(max(rel_paired, 0.0) * max(rel_brute, 0.0)))
    return {
        "pairs": int(ok.sum()),
        "spearman": rho,
        "brute_reliability": float(rel_brute),
        "ceiling": ceiling,
        "share_of_ceiling": rho / ceiling if ceiling > 0 else float("nan"),
    }


AGREE_BELOW = 0.8  # paired CM below this share of its ceiling against brute force: warned


def damping_warning(damping: dict | None) -> dict | None:
    """A plain warning when the calibration hit the grid's edge, or when paired CM agrees
    with the same runs' brute-force CM at less than ``AGREE_BELOW`` of the ceiling."""
    if not damping:
        return None
    parts = [damping["edge"]] if damping.get("edge") else []
    check = damping.get("brute_check") or {}
    share = number(check.get("share_of_ceiling"))
    if np.isfinite(share) and share < AGREE_BELOW:
        parts.append(
            f"paired CM agrees with the same runs' brute-force CM at Spearman "
            f"{check['spearman']:.2f}, {share:.0%} of the {check['ceiling']:.2f} that the "
            f"two reliabilities allow (brute force's: {check['brute_reliability']:.2f}): "
            f"{_influence_words(damping)} misses much of what retraining changes here; prefer "
            "`estimator` brute with more runs"
        )
    if not parts:
        return None
    return {"code": "paired_influence", "message": "; ".join(parts)}


def damping_sentence(damping: dict) -> str:
    """summary.json's ``damping`` in one sentence, for the console and the report.

    Parameters
    ----------
    damping : dict
        ``summary.json``'s ``damping``: the calibration's record (``damping`` and, when
        present, ``brute_mean_cm`` and ``edge``) and ``brute_check`` (``spearman``,
        ``share_of_ceiling``, ``ceiling``, ``brute_reliability``), when computed.

    Returns
    -------
    str
        The damping (a multiple of tr(G)/d) and how it was calibrated, with brute force's
        mean CM when known; then, when its Spearman is finite, how paired CM agrees with the
        same runs' brute-force CM; then the note on the grid's edge, if any. No final period.
    """
    scale = "tr(G)/min(q, n)" if damping.get("influence") == "gauss-newton" else "tr(G)/d"
    what = _influence_words(damping)
    text = (
        f"{what[0].upper()}{what[1:]}: damping {damping['damping']:.3g} x {scale}, "
        "calibrated so that the mean paired CM equals brute force's over these runs"
    )
    if "brute_mean_cm" in damping:
        text += f" ({damping['brute_mean_cm']:.4f})"
    check = damping.get("brute_check") or {}
    if np.isfinite(number(check.get("spearman"))):
        text += (
            f"; against the same runs' brute-force CM: Spearman {check['spearman']:.2f}, "
            f"{check['share_of_ceiling']:.0%} of the {check['ceiling']:.2f} that the two "
            f"reliabilities allow (brute force's: {check['brute_reliability']:.2f})"
        )
    if damping.get("edge"):
        text += f"; {damping['edge']}"
    return text


# What each kind of influence is, for the estimator's note (long) and the damping's
# sentence and warning (short).
INFLUENCE_WORDS = {
    "last-layer": "last-layer Gauss-Newton influence",
    "gauss-newton": "Gauss-Newton influence through the trained parameters (LoRA adapters "
    "and head, or every weight of a full fine-tune)",
}
_SHORT = {"last-layer": "last-layer influence",
          "gauss-newton": "Gauss-Newton influence through the trained parameters"}  # fmt: skip


def _influence_words(damping: dict) -> str:
    return _SHORT[damping.get("influence") or "last-layer"]


def calibrate_on_held(p, p_cf_grid, fit, held, grid, how_one: str,
                held_words: str = "the RM's own evaluation split") -> tuple[np.ndarray, dict]:
    """p_cf at the damping where the mean TG of the trained pairs (each with its group
    removed) equals the mean p of the RM's own evaluation pairs, which it never trained on:
    the brute-force calibration of a paired audit, with the evaluation split as the out-side.
    A grid of one value (given, or the benchmark's without an evaluation split) is kept,
    ``how_one`` saying which."""
    if len(grid) == 1:
        return p_cf_grid[:, 0], {"damping": float(grid[0]), "damping_how": how_one}
    target = np.full(len(p), np.nan)
    target[fit] = np.nanmean(p[fit]) - np.nanmean(p[held])  # mean TM - mean out-side p
    sums = np.where(np.isin(np.arange(len(p)), fit)[:, None], p[:, None] - p_cf_grid, 0.0)
    counts = np.isin(np.arange(len(p)), fit).astype(float)
    k, t, record = choose_damping(target, np.nan_to_num(sums), counts, grid,
                                  "mean TM minus the evaluation pairs' mean p")
    out = p[held][np.isfinite(p[held])]
    se = float(np.std(out, ddof=1) / np.sqrt(len(out))) if len(out) > 1 else float("nan")
    how = (f"calibrated on {held_words}, {len(held)} pairs: mean TG of the trained pairs = "
           f"their mean p ({np.mean(out):.4f} +- {se:.4f} standard error)")  # fmt: skip
    chosen = {"damping": record["damping"], "damping_how": how}
    if record.get("edge"):
        chosen["damping_how"] += f"; {record['edge']}"
        chosen["damping_edge"] = "largest" if k == len(grid) - 1 else "smallest"
    return blend(p_cf_grid, k, t), chosen
