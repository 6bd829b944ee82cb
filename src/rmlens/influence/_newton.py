"""The convex reward head: L2-penalized linear Bradley-Terry, solved to its optimum, and its
exact-in-the-limit group counterfactuals (DESIGN.md section 3, the paired estimator).

A linear head on frozen features scores r(x, y) = w . h(x, y) / s, so a pair's reward
difference is d_j = w . z_j with z_j = (h(x, y+) - h(x, y-)) / s: the head is logistic
regression on z, label 1, no intercept. With per-pair weights c_j (``reweight``), targets t
(1 - eps for ``label_smoothing``, else 1) and offsets o_j (minus the margin), the objective is

    L(w) = sum_j c_j [t softplus(-(d_j + o_j)) + (1 - t) softplus(d_j + o_j)] + lambda/2 w' P w

whose gradient and Hessian are, with p_j = sigmoid(d_j + o_j),

    g(w) = Z' c (p - t) + lambda P w          H(w) = Z' diag(c p (1 - p)) Z + lambda P.

P = diag(penalty) is the identity except for poe's bias-expert coordinates, which carry
``EXPERT_PENALTY`` (nearly free: see ``rmlens.rewards._head``).

Newton's method solves it (step halving keeps every step a descent step). At the optimum w
of a run's training pairs, the head with a group G of k pairs removed (sign -1) or added
(sign +1) is, to first order, one Newton step of the changed objective:

    w_G = w - sign (H + sign Z_G' D_G Z_G)^-1 Z_G' g_G

with g_G = c_G (p_G - t) and D_G = diag(c_G p_G (1 - p_G)). With A = H^-1 and
M = Z_G A Z_G' (k x k), the push-through identity (H + sign Z' D Z)^-1 Z' = A Z'
(I + sign D M)^-1 makes it w_G = w - sign A Z_G' (I + sign D_G M)^-1 g_G: a k x k solve per
group (Woodbury), after one d x d inverse per run. The step is exact when L is quadratic and
nearly so near a strongly convex optimum; a chord step (the changed objective's gradient at
w_G, times the same inverse) removes most of what is left, and ``refit`` gives the exact
answer to check both.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.special import expit, log_expit

MAX_NEWTON = 100
TOLERANCE = 1e-14  # Newton decrement / 2 below this, per unit of pair weight: converged
PATH_TOLERANCE = 1e-7  # enough to compare lambdas by their validation loss
REFINE_SHARE = 0.01  # groups above this share of a run's training pairs take chord steps
# poe's bias expert: lambda times this on its coordinates, so the expert is nearly free and
# the penalized main head leaves to it every shortcut the expert can express; not 0, so a
# shortcut that separates the training pairs still has a finite optimum
EXPERT_PENALTY = 1e-4


@contextmanager
def one_blas_thread():
    """BLAS on one thread: for d x d solves (d in the hundreds) threads cost more than they
    save, and torch's OpenMP workers, spinning after each torch call, starve them (measured:
    a logistic head's lambda path on 960 pairs x 384 features, 0.45 s with 2 BLAS threads
    on 2 cores, 0.16 s with one)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        yield


@dataclass
class LogisticProblem:
    """The pairs of a convex head: the logistic problem L(w) of the module's docstring.

    Parameters
    ----------
    z : ndarray of shape (n, d)
        Each pair's feature difference (h(x, y+) - h(x, y-)) / s.
    c : ndarray of shape (n,)
        Each pair's loss weight.
    o : ndarray of shape (n,)
        Each pair's offset (minus the margin; 0 without one).
    t : float, default=1.0
        The target, shared (1 - eps for label smoothing).
    penalty : ndarray of shape (d,), optional
        The diagonal of P, scaling lambda per coordinate (None: 1 everywhere).
    """

    z: np.ndarray
    c: np.ndarray
    o: np.ndarray
    t: float = 1.0
    penalty: np.ndarray | None = None

    def take(self, index) -> LogisticProblem:
        return LogisticProblem(self.z[index], self.c[index], self.o[index], self.t, self.penalty)

    def ridge(self, lam: float) -> np.ndarray | float:
        """lambda P: the penalty's diagonal.

        Parameters
        ----------
        lam : float
            The penalty lambda.

        Returns
        -------
        ndarray of shape (d,) or float
            lambda times ``penalty``; the scalar lambda when P = I.
        """
        return lam if self.penalty is None else lam * self.penalty

    def loss(self, w: np.ndarray, lam: float) -> float:
        e = self.z @ w + self.o
        pair = -(self.t * log_expit(e) + (1 - self.t) * log_expit(-e))
        return float(self.c @ pair + 0.5 * (self.ridge(lam) * w) @ w)

    def grad_hess(self, w: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
        p = expit(self.z @ w + self.o)
        g = self.z.T @ (self.c * (p - self.t)) + self.ridge(lam) * w
        root = self.z * np.sqrt(self.c * p * (1 - p))[:, None]
        h = np.dot(root.T, root)  # X'X of one array: np.dot takes BLAS syrk for it
        h[np.diag_indices_from(h)] += self.ridge(lam)
        return g, h


def fit_logistic(
    problem: LogisticProblem, lam: float, w0: np.ndarray | None = None, tol: float = TOLERANCE
) -> np.ndarray:
    """The optimum w of ``problem`` under penalty ``lam``: damped Newton from ``w0``, until
    half the Newton decrement is below ``tol`` per unit of pair weight.

    Parameters
    ----------
    problem : LogisticProblem
        The pairs.
    lam : float
        The penalty lambda (> 0).
    w0 : ndarray of shape (d,), optional
        The warm start (zeros if None).
    tol : float
        Half the Newton decrement, per unit of pair weight, at which it stops.

    Returns
    -------
    ndarray of shape (d,)
        The optimum w.
    """
    d = problem.z.shape[1]
    w = np.zeros(d) if w0 is None else np.array(w0, dtype=float)
    scale = max(float(problem.c.sum()), 1.0)
    current = problem.loss(w, lam)
    for _ in range(MAX_NEWTON):
        g, h = problem.grad_hess(w, lam)
        step = cho_solve(cho_factor(h, overwrite_a=True, check_finite=False), g)
        decrement = float(g @ step)  # g' H^-1 g
        if decrement / 2 <= tol * scale:
            break
        if decrement <= 1e-6 * scale:  # quadratic convergence: the full step, no search
            w = w - step
            current = problem.loss(w, lam)
            continue
        t = 1.0
        while True:
            trial = w - t * step
            value = problem.loss(trial, lam)
            if value <= current - 0.25 * t * decrement or t < 1e-10:
                break
            t /= 2
        w, current = trial, value
    return w


def inverse_hessian(problem: LogisticProblem, w: np.ndarray, lam: float) -> np.ndarray:
    """A = H(w)^-1 (d x d), by Cholesky."""
    _, h = problem.grad_hess(w, lam)
    return cho_solve(cho_factor(h, overwrite_a=True, check_finite=False), np.eye(len(w)))


@dataclass
class _Group:
    """One group's first Newton step: its rows, sign, Z_G A, K = I + sign D M, D."""

    rows: np.ndarray
    sign: int
    za: np.ndarray  # (k, d)
    k: np.ndarray  # (k, k)
    curvature: np.ndarray  # (k,)

    def woodbury(self, v: np.ndarray) -> np.ndarray:
        """(H + sign Z_G' D Z_G)^-1 Z_G' v from A = H^-1: A Z_G' (I + sign D M)^-1 v."""
        return self.za.T @ np.linalg.solve(self.k, v)


def _first_step(problem: LogisticProblem, rows, za, w, sign) -> tuple[_Group, np.ndarray]:
    """The Newton step w_G - w = -sign (H + sign Z_G' D Z_G)^-1 Z_G' g_G of one group."""
    group = problem.take(rows)
    p = expit(group.z @ w + group.o)
    g = group.c * (p - group.t)
    curvature = group.c * p * (1 - p)
    m = za @ group.z.T  # M = Z_G A Z_G' (k x k)
    step = _Group(rows, sign, za, np.eye(len(rows)) + sign * curvature[:, None] * m, curvature)
    return step, -sign * step.woodbury(g)


def counterfactuals(
    problem: LogisticProblem,
    w: np.ndarray,
    lam: float,
    groups: np.ndarray,
    inside: np.ndarray,
    outside: np.ndarray,
    keep: int | None = None,
    *,
    steps: int = 3,
    refine_share: float = REFINE_SHARE,
    block: int = 256,
) -> np.ndarray:
    """p of every pair under the head with its own group removed (if in) or added (if out).

    Parameters
    ----------
    problem : LogisticProblem
        Every pair of the audit (n rows), the run's scaling applied.
    w : ndarray of shape (d,)
        The run's optimum on the pairs ``inside``.
    lam : float
        The run's penalty lambda.
    groups : ndarray of shape (n,), int
        Group code of every pair.
    inside, outside : ndarray of shape (n,), bool
        The run's training pairs, and the pairs it holds out (validation pairs are
        neither: their p_cf is NaN).
    keep : int, optional
        Coordinates of w that score (the rest, poe's bias expert, only train); all if None.
    steps : int, default=3
        1: the Newton step alone. Each further step is a chord step: the changed
        objective's gradient at the new w (over all of the run's training pairs, for a block
        of groups at once), times the same Woodbury inverse. Each divides the error by about
        ten (a group of 14% of the run's pairs: 5e-3 after the Newton step, 2e-4 after two
        chord steps).
    refine_share : float, default=0.01
        Only groups holding more than this share of the run's training pairs take the chord
        steps: the Newton step's error shrinks with the group's share, and a chord step costs
        a pass over the run's pairs per group (prompt-grouped data has about one group per
        pair).
    block : int, default=256
        Groups whose chord steps share one matrix product (memory: n x block floats).

    Returns
    -------
    ndarray of shape (n,): sigmoid of the counterfactual scored margin (the RM's r+ - r-,
    no margin offset) of the pairs ``inside | outside``; NaN elsewhere.
    """
    keep = len(w) if keep is None else keep
    train = problem.take(inside)
    a = inverse_hessian(train, w, lam)
    p_cf = np.full(len(groups), np.nan)
    rows = group_rows(groups, inside | outside)
    if not rows:
        return p_cf
    za = problem.z[np.concatenate(rows)] @ a  # (m, d): one matrix product for every group
    parts = list(zip(rows, np.split(za, np.cumsum([len(r) for r in rows])[:-1])))
    refined = [steps > 1 and len(r) > refine_share * len(train.z) for r, _ in parts]
    single = [part for part, more in zip(parts, refined) if not more and len(part[0]) == 1]
    if single:
        rows = np.concatenate([r for r, _ in single])
        p_cf[rows] = expit(_single_steps(problem, rows, np.vstack([z for _, z in single]), w,
                                         np.where(inside[rows], -1, 1), keep))  # fmt: skip
    for (r, z), more in zip(parts, refined):
        if not more and len(r) > 1:
            _, delta = _first_step(problem, r, z, w, -1 if inside[r[0]] else 1)
            p_cf[r] = expit(problem.z[r, :keep] @ (w + delta)[:keep])
    big = [part for part, more in zip(parts, refined) if more]
    for start in range(0, len(big), block):
        firsts = [_first_step(problem, r, z, w, -1 if inside[r[0]] else 1)
                  for r, z in big[start:start + block]]  # fmt: skip
        new_w = w[:, None] + np.column_stack([delta for _, delta in firsts])  # (d, b)
        for _ in range(steps - 1):
            new_w -= _chord(problem, train, firsts, new_w, lam, a)
        for j, (group, _) in enumerate(firsts):
            p_cf[group.rows] = expit(problem.z[group.rows, :keep] @ new_w[:keep, j])
    return p_cf


def group_rows(groups: np.ndarray, used: np.ndarray) -> list[np.ndarray]:
    """The rows of each group among the pairs ``used`` (a bool mask), group by group."""
    order = np.flatnonzero(used)
    order = order[np.argsort(groups[order], kind="stable")]
    return [r for r in np.split(order, np.flatnonzero(np.diff(groups[order])) + 1) if len(r)]


def _single_steps(problem: LogisticProblem, rows, za, w, sign, keep: int) -> np.ndarray:
    """The Newton step of many groups of one pair each, at once: with k = 1, M = z A z' and
    (I + sign D M)^-1 are scalars; the new scored margin is v w - sign (v A z') g / (1 +
    sign D M), v the pair's scored coordinates."""
    z = problem.z[rows]
    p = expit(z @ w + problem.o[rows])
    g = problem.c[rows] * (p - problem.t)
    curvature = problem.c[rows] * p * (1 - p)
    m = np.einsum("ij,ij->i", za, z)  # z A z'
    scored = np.einsum("ij,ij->i", za[:, :keep], z[:, :keep])  # v A z'
    x = g / (1 + sign * curvature * m)
    return z[:, :keep] @ w[:keep] - sign * scored * x


def _chord(problem, train: LogisticProblem, firsts, new_w: np.ndarray, lam: float, a):
    """(H + sign Z_G' D Z_G)^-1 grad L_G(w_G) for a block of groups (columns of ``new_w``):
    the gradient of each changed objective (the run's pairs, less the group if removed,
    plus it if added) at its own w_G, times the first step's inverse (Woodbury)."""
    e = train.z @ new_w + train.o[:, None]  # (n_train, b)
    grad = train.z.T @ (train.c[:, None] * (expit(e) - train.t))
    grad += np.reshape(train.ridge(lam), (-1, 1)) * new_w
    for j, (group, _) in enumerate(firsts):
        g = problem.take(group.rows)
        own = g.z.T @ (g.c * (expit(g.z @ new_w[:, j] + g.o) - g.t))
        grad[:, j] += group.sign * own  # removed: its pairs leave the sum; added: they join
    ag = a @ grad  # A grad, (d, b)
    for j, (group, _) in enumerate(firsts):
        z_g = problem.z[group.rows]
        # (H + s Z'DZ)^-1 = A - s A Z' (I + s D M)^-1 D Z A
        ag[:, j] -= group.sign * group.woodbury(group.curvature * (z_g @ ag[:, j]))
    return ag


def refit(
    problem: LogisticProblem,
    w: np.ndarray,
    lam: float,
    inside: np.ndarray,
    rows: np.ndarray,
    keep: int | None = None,
) -> np.ndarray:
    """p of ``rows`` (one group's pairs) under the head refitted exactly with them removed
    (when they are among ``inside``) or added, from the warm start ``w``: the truth that
    the Newton step approximates.

    Parameters
    ----------
    problem : LogisticProblem
        Every pair of the audit (n rows).
    w : ndarray of shape (d,)
        The run's optimum, the warm start.
    lam : float
        The run's penalty lambda.
    inside : ndarray of shape (n,), bool
        The run's training pairs.
    rows : ndarray of int
        The group's pairs.
    keep : int, optional
        Coordinates of w that score (all if None).

    Returns
    -------
    ndarray of shape (len(rows),)
        sigmoid(z . w_refit) of each of the group's pairs.
    """
    keep = len(w) if keep is None else keep
    change = np.zeros(len(inside), dtype=bool)
    change[rows] = True
    removing = bool(inside[rows].all())
    train = inside & ~change if removing else inside | change
    w_new = fit_logistic(problem.take(train), lam, w0=w)
    return expit(problem.z[rows, :keep] @ w_new[:keep])
