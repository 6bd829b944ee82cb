"""Gauss-Newton influence: a fine-tuned RM's paired counterfactuals, through its trained weights.

The last-layer step (``_last_layer``) with the representation difference z_j replaced by
J_j, the gradient of pair j's reward difference d_j = r(x, y+) - r(x, y-) with respect to
the run's trained parameters theta (LoRA adapters and the score head; ``_pair_gradients``):

    H = J_T' C J_T + lambda I,        d_G' = d_G - sign M (I + sign C_G M)^-1 g_G,
    M = J_G H^-1 J_G',

T the run's training pairs, C = diag(p (1 - p)), g = p - t, sign -1 to remove group G and
+1 to add it. A LoRA run has far more parameters than pairs, so H^-1 is taken in pair space
(Woodbury), from the Gram matrix J J' alone.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from rmlens.influence._last_layer import DAMPING, group_steps


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
    parameters (``_pair_gradients``).

    The step of ``last_layer_counterfactuals`` with z_j replaced by J_j, the gradient of
    pair j's reward difference d_j with respect to theta (LoRA adapters and head): H =
    J_T' C J_T + lambda I over the run's training pairs T, and group G's new differences
    d_G - sign M (I + sign C_G M)^-1 g_G with M = J_G H^-1 J_G'. With q parameters far more
    than pairs, H^-1 is taken in pair space (Woodbury): with B = C_T^1/2 J_T and
    B B' = U diag(e) U', the nonzero eigenvectors of G = B'B are V = B' U e^-1/2, so
    M = Y_G diag(1 / (e + lambda)) Y_G' + (J_G J_G' - Y_G Y_G') / lambda, Y = J V
    = (J J_T') C_T^1/2 U e^-1/2: every quantity comes from the Gram matrix J J' (n x n).
    With more training pairs than q, G's own eigendecomposition (q x q) serves instead. The
    damping grid is relative to the mean nonzero curvature tr(G) / min(q, n_T).

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
        Damping values relative to tr(G) / min(q, n_T).

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

    p_cf = group_steps(d, g, c, groups, inside, outside, lambdas, single=single, block=block)
    return expit(d), p_cf, lambdas


def _gram(jac: np.ndarray) -> np.ndarray:
    """J J' in float64, from J's own precision (float32 gradients: a float32 product, whose
    rounding, about 1e-7 of the entries, sits far below the damping's smallest value)."""
    return (jac @ jac.T).astype(np.float64)
