"""Paired counterfactuals of RMs that are not convex: last-layer Gauss-Newton influence.

An explicit RM scores r(x, y) = u . phi(x, y) + b, phi the representation its last linear
layer reads (an MLP head's hidden units; a fine-tuned RM's pooled hidden state). Holding phi
fixed, a pair's reward difference is d_j = u . z_j with z_j = phi(x, y+) - phi(x, y-), and
the last layer is logistic regression on z: the convex problem of ``rmlens.rewards._convex``
with w = u. Its Gauss-Newton Hessian over the run's training pairs,

    H = Z' diag(p (1 - p)) Z + lambda I,

turns a group's gradient into its counterfactual, one damped Newton step per group
(``_convex.counterfactuals`` with ``steps=1``, Woodbury per group):

    u_G = u - sign (H + sign Z_G' D_G Z_G)^-1 Z_G' g_G.

Why this approximation: it costs one d x d inverse per run and damping value (d the hidden
size) plus a pass that every run makes anyway (the representations of every pair), so a
fine-tuned run's counterfactuals cost seconds, not trainings; it is exact for the convex head
it generalizes; and it keeps the group structure (a k x k solve per group) that per-pair
influence scores (TracIn, TRAK) give up. What it leaves out: the change of phi itself
(the backbone or the head's first layer) and early stopping, under which u is no optimum.
Both change the *size* of a group's effect far more than its *ranking*, so the damping
lambda is not taken from the training (the lambda that would make an early-stopped u
stationary gives effects near 0) but calibrated: each run gives the counterfactuals over a
grid of damping values, and the audit keeps the value at which the mean paired CM equals
brute force's mean CM over the same runs (a mean over every pair, so reliable where
brute-force CM per pair is not; ``rmlens.memorization._damping``).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from rmlens.rewards._convex import LogisticProblem, counterfactuals, one_blas_thread

# The damping grid, relative to the mean curvature tr(G) / d of the Gauss-Newton matrix
# G = Z' diag(p (1 - p)) Z of the run's training pairs (so the grid does not depend on the
# scale of phi): 1e-4 to 1e4 in half-decades (a fine-tuned RM's head on few pairs, d above
# n, needs the large end).
DAMPING = tuple(float(x) for x in 10.0 ** np.arange(-4, 4.01, 0.5))
OBJECTIVES = ("bt", "label_smoothing")  # objectives whose last layer is the logistic problem


def last_layer_counterfactuals(
    z: np.ndarray,
    u: np.ndarray,
    groups: np.ndarray,
    inside: np.ndarray,
    outside: np.ndarray,
    *,
    offset: np.ndarray | None = None,
    target: float = 1.0,
    damping: tuple[float, ...] = DAMPING,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """p of every pair under the run's RM, and p_cf over the damping grid.

    Parameters
    ----------
    z : ndarray of shape (n, d)
        phi(x, y+) - phi(x, y-) of every pair: the last layer's input differences.
    u : ndarray of shape (d,)
        The last layer's weights.
    groups, inside, outside : ndarray of shape (n,)
        Group codes, the run's training pairs and its held-out pairs (the run's validation
        pairs are neither: their p_cf is NaN).
    offset : ndarray of shape (n,), optional
        Training offsets of the pairs' reward differences (minus the margin, with
        ``use_margin``); they enter the gradient, never the scores.
    target : float, default=1.0
        The Bradley-Terry target (1 - eps for label smoothing).
    damping : tuple of float
        Damping values relative to tr(G) / d.

    Returns
    -------
    p : ndarray of shape (n,)
        sigmoid(u . z).
    p_cf : ndarray of shape (n, len(damping))
        The counterfactual p of each pair (its group removed if in, added if out) at each
        damping value; NaN outside ``inside | outside``.
    lambdas : ndarray of shape (len(damping),)
        The damping values in absolute terms (what is added to H's diagonal).
    """
    z = np.asarray(z, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    n = len(z)
    o = np.zeros(n) if offset is None else np.asarray(offset, dtype=np.float64)
    problem = LogisticProblem(z, np.ones(n), o, float(target))
    train = problem.take(inside)
    p_train = expit(train.z @ u + train.o)
    curvature = float((p_train * (1 - p_train)) @ np.einsum("ij,ij->i", train.z, train.z))
    scale = max(curvature / z.shape[1], np.finfo(float).tiny)
    lambdas = scale * np.asarray(damping, dtype=np.float64)
    p = expit(z @ u)
    with one_blas_thread():
        p_cf = np.column_stack([
            counterfactuals(problem, u, float(lam), groups, inside, outside, steps=1)
            for lam in lambdas
        ])  # fmt: skip
    return p, p_cf, lambdas
