"""Audit-guided objectives (DESIGN.md section 2): per-pair loss weights from a nested paired
audit inside a run's own training groups, and the no-audit baseline they are judged against.

The paper's proposal is complementary memorization: RMs memorize the easy high-margin pairs,
so an objective should move training toward the pairs the RM does not yet generalize,
low-margin ones first. What the RM generalizes is what the audit measures, so the weights come
from an audit; to keep TG honest that audit sees the run's training groups only:

- nested audit: the run's training groups split into K folds; the convex head at the run's
  lambda is fitted on K - 1 of them, and each training pair gets, from every fit, an in-side
  and an out-side probability (the fit itself, and its Newton counterfactual with the pair's
  group removed or added: ``rmlens.influence.counterfactuals``). In-run TM_i and TG_i are
  their means over the K fits, CM_i = TM_i - TG_i.
- q_i: the pair's margin as a rank quantile in [0, 1] (0 the weakest preference): the data's
  ``margin`` where the pairs have one, else the reward margin r+ - r- of a Bradley-Terry head
  fitted on the run's training pairs (a wrong-side pair ranks lowest).

The weights, each normalized to mean 1 over the training pairs unless said otherwise:

    low_margin     w_i ∝ 2 - q_i                      (no audit: margin alone)
    complementary  w_i ∝ (2 - q_i) (1 - TG_i)^gamma   (what the audit adds: 1 - TG)
    curate         w_i = c if TM_i < 1/2 else 1        (c = curate_weight; 0 drops the pair)

``complementary`` thus gives a pair that the RM trained without it already gets right
(TG near 1) little weight, and a low-margin pair it does not generalize the most;
``curate`` leaves out what the RM cannot fit even when trained on it (dataset cartography's
hard-to-learn region, Swayamdipta et al. 2020: mostly label noise), not renormalized, so that
weight 0 is exactly training without those pairs.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit
from scipy.stats import rankdata

from rmlens.influence import LogisticProblem, counterfactuals, fit_logistic


def margin_quantile(margin: np.ndarray) -> np.ndarray:
    """q_i = (rank_i - 1) / (n - 1) of each margin (average ranks for ties), (n,); 0.5 for a
    single pair."""
    margin = np.asarray(margin, dtype=float)
    if len(margin) < 2:
        return np.full(len(margin), 0.5)
    return (rankdata(margin) - 1) / (len(margin) - 1)


def _mean_one(w: np.ndarray) -> np.ndarray:
    return w / w.mean() if len(w) and w.mean() > 0 else np.ones_like(w)


def low_margin_weights(margin: np.ndarray) -> np.ndarray:
    """w_i ∝ 2 - q_i, mean 1: the weakest preference counts twice the strongest."""
    return _mean_one(2.0 - margin_quantile(margin))


def complementary_weights(tm: np.ndarray, tg: np.ndarray, margin: np.ndarray,
                          gamma: float) -> np.ndarray:  # fmt: skip
    """w_i ∝ (2 - q_i) (1 - TG_i)^gamma [TM_i >= 1/2], mean 1 (module docstring)."""
    learned = np.asarray(tm, dtype=float) >= 0.5
    w = (2.0 - margin_quantile(margin)) * (1.0 - np.asarray(tg, dtype=float)) ** gamma
    return _mean_one(w * learned)


def curate_weights(tm: np.ndarray, weight: float) -> np.ndarray:
    """w_i = ``weight`` where in-run TM_i < 1/2 (not learned even when trained on), else 1."""
    return np.where(np.asarray(tm, dtype=float) < 0.5, weight, 1.0)


def nested_audit(problem: LogisticProblem, lam: float, groups: np.ndarray, folds: int,
                 seed: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """In-run TM and TG of every pair of ``problem`` (a run's training pairs), (n,) each.

    ``groups`` (n,) int codes; the groups are shuffled (``seed``) into ``folds`` folds (at
    most one per group). Fit f trains on the pairs outside fold f; a pair in it gives p as
    its in-side and its counterfactual with its group removed as its out-side, a pair of
    fold f the reverse (its group added).
    """
    groups = np.asarray(groups)
    labels = np.unique(groups)
    k = int(min(folds, len(labels)))
    if k < 2:
        raise ValueError("a nested audit needs at least 2 groups among the training pairs")
    order = np.random.default_rng([seed, 28]).permutation(len(labels))
    fold_of = np.empty(len(labels), dtype=int)
    fold_of[order] = np.arange(len(labels)) % k
    fold = fold_of[np.searchsorted(labels, groups)]
    in_side, out_side = np.zeros(len(groups)), np.zeros(len(groups))
    w = None
    for f in range(k):
        outside = fold == f
        inside = ~outside
        w = fit_logistic(problem.take(inside), lam, w0=w)
        p = expit(problem.z @ w)
        p_cf = counterfactuals(problem, w, lam, groups, inside, outside)
        in_side += np.where(inside, p, p_cf)
        out_side += np.where(inside, p_cf, p)
    return in_side / k, out_side / k


def weight_summary(weights: np.ndarray) -> dict:
    """What a run records of its loss weights: their spread and the pairs left out."""
    w = np.asarray(weights, dtype=float)
    q = np.quantile(w, [0.1, 0.5, 0.9]) if len(w) else [np.nan] * 3
    return {
        "weight_min": float(w.min()) if len(w) else None,
        "weight_p10": float(q[0]),
        "weight_median": float(q[1]),
        "weight_p90": float(q[2]),
        "weight_max": float(w.max()) if len(w) else None,
        "weight_cv": float(w.std() / w.mean()) if len(w) and w.mean() > 0 else 0.0,
        "n_zero_weight": int((w == 0).sum()),
    }
