"""Last-layer influence: the paired counterfactuals of a non-convex RM, through its last layer.

An explicit RM scores r(x, y) = u . phi(x, y) + b, phi the representation its last linear
layer reads (an MLP head's hidden units; a fine-tuned RM's pooled hidden state). Holding phi
fixed, a pair's reward difference is d_j = u . z_j with z_j = phi(x, y+) - phi(x, y-), and
the last layer is logistic regression on z: the convex problem of ``rmlens.influence``
with w = u. Its Gauss-Newton Hessian over the run's training pairs,

    H = Z' diag(p (1 - p)) Z + lambda I,

turns a group's gradient into its counterfactual, one damped Newton step per group (the
step of ``_newton.counterfactuals`` with ``steps=1``):

    u_G = u - sign (H + sign Z_G' D_G Z_G)^-1 Z_G' g_G,

so with A = H^-1 and M = Z_G A Z_G' (k x k), the group's new reward differences are
Z_G u - sign M (I + sign D_G M)^-1 g_G (push-through). One eigendecomposition
G = V diag(e) V' serves the whole damping grid: M = Y_G diag(1 / (e + lambda)) Y_G' with
Y = Z V.

Why this approximation: it costs one eigendecomposition of a d x d matrix per run (d the
hidden size) plus a pass that every run makes anyway (the representations of every pair), so
a fine-tuned run's counterfactuals cost seconds, not trainings; it is the convex head's own
step, so exact where that is; and it keeps the group structure (a k x k solve per group)
that per-pair influence scores (TracIn, TRAK) give up. What it leaves out: the change of
phi itself (the backbone or the head's first layer) and early stopping, under which u is no
optimum. Both change the *size* of a group's effect far more than its *ranking*, so the
damping lambda is not taken from the training (the lambda that would make an early-stopped
u stationary gives effects near 0) but calibrated: each run gives the counterfactuals over a
grid of damping values, and the audit keeps the value at which the mean paired CM equals
brute force's mean CM over the same runs (a mean over every pair, so reliable where
brute-force CM per pair is not; ``rmlens.memorization._damping``).

``group_steps`` is that step for every group at once; Gauss-Newton influence through
every trained parameter (``_gauss_newton``) takes it with z_j replaced by a pair's gradient.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from rmlens.influence._newton import group_rows, one_blas_thread

# The damping grid, relative to the mean curvature tr(G) / d of the Gauss-Newton matrix
# G = Z' diag(p (1 - p)) Z of the run's training pairs (so the grid does not depend on the
# scale of phi): 1e-4 to 1e4 in half-decades (a fine-tuned RM's head on few pairs, d above
# n, needs the large end).
DAMPING = tuple(float(x) for x in 10.0 ** np.arange(-4, 4.01, 0.5))


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
    n, d = z.shape
    o = np.zeros(n) if offset is None else np.asarray(offset, dtype=np.float64)
    fitted = expit(z @ u + o)
    g = fitted - float(target)  # each pair's loss gradient in its reward difference
    c = fitted * (1 - fitted)  # and its curvature
    with one_blas_thread():
        train = z[inside] * np.sqrt(c[inside])[:, None]
        e, v = np.linalg.eigh(train.T @ train)  # G = V diag(e) V'
        e = np.clip(e, 0.0, None)
        lambdas = max(float(e.sum()) / d, np.finfo(float).tiny) * np.asarray(damping, float)
        y = z @ v  # (n, d): z in G's eigenbasis, so z A z' = sum_k y_k^2 / (e_k + lambda)
        inv = 1.0 / (e[:, None] + lambdas[None, :])  # (d, K)
        scored = z @ u
        p_cf = group_steps(
            scored, g, c, groups, inside, outside, lambdas,
            single=lambda rows: (y[rows] ** 2) @ inv,
            block=lambda rows, k: (y[rows] * inv[:, k]) @ y[rows].T,
        )  # fmt: skip
    return expit(scored), p_cf, lambdas


def group_steps(scored, g, c, groups, inside, outside, lambdas, *, single, block) -> np.ndarray:
    """p_cf (n, K) of every group's damped Newton step, given M = Z_G A Z_G' through
    ``single(rows)`` (groups of one pair: M (s, K) for all at once) and ``block(rows, k)``
    (M (k, k) of one group at damping index k): the new reward differences are
    Z_G u - sign M (I + sign D_G M)^-1 g_G, sign -1 to remove a group and +1 to add it."""
    n = len(scored)
    p_cf = np.full((n, len(lambdas)), np.nan)
    parts = group_rows(groups, inside | outside)
    ones = np.concatenate([r for r in parts if len(r) == 1] or [np.zeros(0, int)])
    if len(ones):  # k = 1: M is a scalar per damping value
        m = single(ones)  # (s, K)
        sign = np.where(inside[ones], -1.0, 1.0)[:, None]
        x = g[ones, None] / (1 + sign * c[ones, None] * m)
        p_cf[ones] = expit(scored[ones, None] - sign * m * x)
    for rows in (r for r in parts if len(r) > 1):
        sign = -1.0 if inside[rows[0]] else 1.0
        for k in range(len(lambdas)):
            m = block(rows, k)
            x = np.linalg.solve(np.eye(len(rows)) + sign * c[rows, None] * m, g[rows])
            p_cf[rows, k] = expit(scored[rows] - sign * m @ x)
    return p_cf
