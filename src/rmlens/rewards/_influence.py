"""Paired counterfactuals of RMs that are not convex: last-layer Gauss-Newton influence.

An explicit RM scores r(x, y) = u . phi(x, y) + b, phi the representation its last linear
layer reads (an MLP head's hidden units; a fine-tuned RM's pooled hidden state). Holding phi
fixed, a pair's reward difference is d_j = u . z_j with z_j = phi(x, y+) - phi(x, y-), and
the last layer is logistic regression on z: the convex problem of ``rmlens.rewards._convex``
with w = u. Its Gauss-Newton Hessian over the run's training pairs,

    H = Z' diag(p (1 - p)) Z + lambda I,

turns a group's gradient into its counterfactual, one damped Newton step per group (the
step of ``_convex.counterfactuals`` with ``steps=1``):

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
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from rmlens.rewards._convex import group_rows, one_blas_thread
from rmlens.rewards.objectives import objective_of

# The damping grid, relative to the mean curvature tr(G) / d of the Gauss-Newton matrix
# G = Z' diag(p (1 - p)) Z of the run's training pairs (so the grid does not depend on the
# scale of phi): 1e-4 to 1e4 in half-decades (a fine-tuned RM's head on few pairs, d above
# n, needs the large end).
DAMPING = tuple(float(x) for x in 10.0 ** np.arange(-4, 4.01, 0.5))


def bt_terms(config, margin) -> tuple[np.ndarray | None, float]:
    """The logistic problem's offsets (minus the margin, with ``use_margin``) and target
    (1 - eps for ``label_smoothing``) of a ``HeadConfig`` or ``TrainConfig``."""
    offset = None
    if config.use_margin and margin is not None:
        offset = -np.nan_to_num(np.asarray(margin, dtype=float))
    return offset, objective_of(config).target(config)


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
        p_cf = _group_steps(
            scored, g, c, groups, inside, outside, lambdas,
            single=lambda rows: (y[rows] ** 2) @ inv,
            block=lambda rows, k: (y[rows] * inv[:, k]) @ y[rows].T,
        )  # fmt: skip
    return expit(scored), p_cf, lambdas


def _group_steps(scored, g, c, groups, inside, outside, lambdas, *, single, block) -> np.ndarray:
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


def gauss_newton_counterfactuals(
    jac: np.ndarray,
    d: np.ndarray,
    groups: np.ndarray,
    inside: np.ndarray,
    outside: np.ndarray,
    *,
    offset: np.ndarray | None = None,
    target: float = 1.0,
    damping: tuple[float, ...] = DAMPING,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """p and p_cf over the damping grid from the Gauss-Newton step through all trained
    parameters (``rmlens.rewards._pair_gradients``).

    The step of ``last_layer_counterfactuals`` with z_j replaced by J_j, the gradient of
    pair j's reward difference d_j with respect to theta (LoRA adapters and head): H =
    J_T' C J_T + lambda I over the run's training pairs T, and group G's new differences
    d_G - sign M (I + sign C_G M)^-1 g_G with M = J_G H^-1 J_G'. With q parameters far more
    than pairs, H^-1 is taken in pair space (Woodbury): with B = C_T^1/2 J_T and
    B B' = U diag(e) U', the nonzero eigenvectors of G = B'B are V = B' U e^-1/2, so
    M = Y_G diag(1 / (e + lambda)) Y_G' + (J_G J_G' - Y_G Y_G') / lambda, Y = J V
    = (J J_T') C_T^1/2 U e^-1/2: every quantity comes from the Gram matrix J J' (n x n).
    With more training pairs than q, G's own eigendecomposition (q x q) serves instead. The
    damping grid is relative to the mean nonzero curvature tr(G) / min(q, |T|).

    Parameters
    ----------
    jac : ndarray of shape (n, q)
        Every pair's gradient J_j (or its sketch).
    d : ndarray of shape (n,)
        Every pair's reward difference under the run's RM.
    groups, inside, outside : ndarray of shape (n,)
        As in ``last_layer_counterfactuals``.
    offset : ndarray of shape (n,), optional
        Training offsets of the reward differences (minus the margin).
    target : float, default=1.0
        The Bradley-Terry target.
    damping : tuple of float
        Damping values relative to tr(G) / min(q, |T|).

    Returns
    -------
    p : ndarray of shape (n,)
        sigmoid(d).
    p_cf : ndarray of shape (n, len(damping))
        The counterfactual p of each pair at each damping value; NaN outside
        ``inside | outside``.
    lambdas : ndarray of shape (len(damping),)
        The damping values in absolute terms.
    """
    d = np.asarray(d, dtype=np.float64)
    n, q = jac.shape
    o = np.zeros(n) if offset is None else np.asarray(offset, dtype=np.float64)
    fitted = expit(d + o)
    g = fitted - float(target)
    c = fitted * (1 - fitted)
    train = np.flatnonzero(inside)
    root = np.sqrt(c[train])
    if q <= len(train):  # parameter space: G (q x q) has no null space to speak of
        jt = jac[train].astype(np.float64) * root[:, None]
        e, v = np.linalg.eigh(jt.T @ jt)
        e = np.clip(e, 0.0, None)
        y = jac.astype(np.float64) @ v
        gram = None
    else:  # pair space: everything from J J'
        gram = _gram(jac)
        e, u = np.linalg.eigh(gram[np.ix_(train, train)] * np.outer(root, root))
        keep = e > max(float(e.max(initial=0.0)), np.finfo(float).tiny) * 1e-10
        e, u = e[keep], u[:, keep]
        y = (gram[:, train] * root[None, :]) @ (u / np.sqrt(e))
    lambdas = max(float(e.sum()) / min(q, max(len(train), 1)), np.finfo(float).tiny)
    lambdas = lambdas * np.asarray(damping, float)
    inv = 1.0 / (e[:, None] + lambdas[None, :])  # (r, K)

    def single(rows):
        m = (y[rows] ** 2) @ inv
        if gram is None:
            return m
        rest = np.clip(gram[rows, rows] - (y[rows] ** 2).sum(1), 0.0, None)
        return m + rest[:, None] / lambdas[None, :]

    def block(rows, k):
        yg = y[rows]
        m = (yg * inv[:, k]) @ yg.T
        if gram is None:
            return m
        return m + (gram[np.ix_(rows, rows)] - yg @ yg.T) / lambdas[k]

    p_cf = _group_steps(d, g, c, groups, inside, outside, lambdas, single=single, block=block)
    return expit(d), p_cf, lambdas


def _gram(jac: np.ndarray) -> np.ndarray:
    """J J' in float64, from J's own precision (float32 gradients: a float32 product, whose
    rounding, about 1e-7 of the entries, sits far below the damping's smallest value)."""
    return (jac @ jac.T).astype(np.float64)
