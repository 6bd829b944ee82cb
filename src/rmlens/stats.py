"""One home per statistic: the figures every layer reports, one function each.

In the style of ``sklearn.metrics``: plain functions of arrays, imported wherever the figure
is computed, so that a tie, a NaN or an empty input is handled the same way everywhere.

- :func:`pairwise_correct`, :func:`pairwise_accuracy`: tie-aware accuracy (a tie counts 1/2)
- :func:`log_loss`: the Bradley-Terry negative log-likelihood of preference probabilities
- :func:`spearman`: rank correlation, ties by average ranks; :func:`spearman_test`: with its
  p-value, exactly as ``scipy.stats.spearmanr``; :func:`spearman_rows`: row by row, vectorised;
  :func:`spearman_columns`: every column of one matrix against every column of another
- :func:`spearman_brown`, :func:`prophecy_factor`: reliability of a longer test, and its inverse
- :func:`bootstrap_runs`, :func:`run_weights`, :func:`run_mean`, :func:`pooled_ratio`,
  :func:`percentile_interval`, :func:`nanquantiles`: the percentile bootstrap over runs
  (DESIGN.md section 3: runs are the unit of randomness; pairs and groups are fixed by the
  data). A draw is a multiset of runs, kept as run indices; a mean over runs is recomputed
  on it, a figure pooled over runs reads it as run weights
- :func:`wilson_interval`: the interval of a proportion out of n (a probe's flip rate)
- :func:`best_of_n`, :func:`best_of_n_weights`, :func:`kl_best_of_n`: the exact expectation of
  best-of-n selection from a pool of N candidates, and its KL bound (DESIGN.md section 8)

A bottom module: it imports numpy, and scipy where a function needs it (so that code
which reads finished results starts without scipy's import time).
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Literal

import numpy as np

__all__ = [
    "best_of_n",
    "best_of_n_weights",
    "bootstrap_runs",
    "cross_fitted_fall",
    "group_draws",
    "kl_best_of_n",
    "log_loss",
    "nanquantiles",
    "pairwise_accuracy",
    "pairwise_correct",
    "percentile_interval",
    "pooled_ratio",
    "prophecy_factor",
    "run_mean",
    "run_weights",
    "spearman",
    "spearman_brown",
    "spearman_columns",
    "spearman_rows",
    "spearman_test",
    "wilson_interval",
]


def pairwise_correct(r_chosen, r_rejected=0.0) -> np.ndarray:
    """Per pair, 1 where r+ > r-, 1/2 where r+ == r- (a tie), else 0.

        correct_i = [r+_i > r-_i] + 1/2 [r+_i == r-_i]

    A NaN compares false both ways and scores 0; a caller that must tell a missing score
    from a wrong one masks it first.

    Parameters
    ----------
    r_chosen : array-like of shape (n_pairs,)
        Rewards of the chosen responses, or margins r+ - r- with ``r_rejected=0``.
    r_rejected : array-like of shape (n_pairs,) or float, default=0.0
        Rewards of the rejected responses (or the threshold: 0.5 for probabilities).

    Returns
    -------
    ndarray of shape (n_pairs,), float

    Examples
    --------
    >>> pairwise_correct([2.0, 1.0, 0.0, np.nan], [1.0, 1.0, 3.0, 0.0]).tolist()
    [1.0, 0.5, 0.0, 0.0]
    """
    c, r = np.asarray(r_chosen, dtype=float), np.asarray(r_rejected, dtype=float)
    return (c > r) + 0.5 * (c == r)


def pairwise_accuracy(r_chosen, r_rejected=0.0) -> float:
    """Tie-aware pairwise accuracy: the mean of :func:`pairwise_correct`.

        accuracy = (1/n) sum_i ([r+_i > r-_i] + 1/2 [r+_i == r-_i])

    Parameters
    ----------
    r_chosen : array-like of shape (n_pairs,)
        Rewards of the chosen responses, or margins r+ - r- with ``r_rejected=0``.
    r_rejected : array-like of shape (n_pairs,) or float, default=0.0
        Rewards of the rejected responses; 0.5 when ``r_chosen`` holds probabilities
        sigmoid(r+ - r-), which tie exactly where they equal 0.5.

    Returns
    -------
    float
        In [0, 1]; NaN for no pairs. A NaN reward counts as a wrong pair.

    Examples
    --------
    One right, one tie, one wrong, one tie: (1 + 1/2 + 0 + 1/2) / 4.

    >>> pairwise_accuracy([1, 2, 3, 0], [0, 2, 4, 0])
    0.5
    >>> pairwise_accuracy([0.9, 0.5, 0.2], 0.5)  # probabilities: (1 + 1/2 + 0) / 3
    0.5
    """
    c = np.asarray(r_chosen, dtype=float)
    if c.size == 0:
        return float("nan")
    return float(np.mean(pairwise_correct(c, r_rejected)))


def _outcomes(x: np.ndarray, y) -> np.ndarray:
    if y is None:
        return np.ones_like(x)
    y = np.asarray(y, dtype=float)
    if y.shape != x.shape:
        raise ValueError(f"`y` has shape {y.shape} but `p` has shape {x.shape}")
    return y


def log_loss(p, y=None, *, logits: bool = False) -> float:
    """Log-loss of pairwise preference probabilities (the Bradley-Terry loss without margin).

        log_loss = -(1/n) sum_i log q_i,   q_i = p_i if y_i = 1 else 1 - p_i

    With ``logits=True``, ``p`` holds margins d = r+ - r- and the loss is computed without
    forming sigmoid(d): -log sigmoid(s d) = log(1 + exp(-s d)), s = 2y - 1, exact for large
    ``|d|``. From probabilities, each q is floored at the smallest normal float, so that a
    probability of 0 costs about 708 rather than infinity.

    Parameters
    ----------
    p : array-like of shape (n_pairs,)
        P(chosen > rejected) = sigmoid(r+ - r-), or the margins with ``logits=True``.
    y : array-like of shape (n_pairs,), optional
        Outcomes (1: the chosen response won); default all ones.
    logits : bool, default=False
        Whether ``p`` holds margins rather than probabilities.

    Returns
    -------
    float
        NaN for no pairs.

    Examples
    --------
    >>> round(log_loss([0.5, 0.5]), 6)  # -log(1/2)
    0.693147
    >>> round(log_loss([0.0], logits=True), 6)  # a zero margin: also -log(1/2)
    0.693147
    >>> round(log_loss([0.8, 0.8], y=[1, 0]), 6)  # -(log 0.8 + log 0.2) / 2
    0.916291
    """
    x = np.asarray(p, dtype=float)
    if x.size == 0:
        return float("nan")
    y = _outcomes(x, y)
    if logits:
        sign = 2 * y - 1
        return float(np.mean(np.logaddexp(0.0, -sign * x)))  # softplus(-d) == -log sigmoid(d)
    q = np.where(y == 1, x, 1 - x)
    return float(-np.mean(np.log(np.maximum(q, np.finfo(float).tiny))))


def spearman(a, b, *, nan_policy: Literal["omit", "propagate"] = "omit") -> float:
    """Spearman rank correlation: the Pearson correlation of the average ranks.

        rho = corr(rank(a), rank(b)),  tied values share the mean of their ranks

    Parameters
    ----------
    a, b : array-like of shape (n,)
    nan_policy : {"omit", "propagate"}, default="omit"
        "omit": use the entries where both are finite. "propagate": NaN if either holds a
        NaN, as ``scipy.stats.spearmanr`` does.

    Returns
    -------
    float
        NaN with fewer than 3 entries or when either side is constant. ``spearman(b, a)``
        equals ``scipy.stats.spearmanr(a, b)`` bit for bit; ``spearman(a, b)`` can differ
        from it in the last bit (the two divide by the standard deviations in turn).

    Examples
    --------
    >>> round(spearman([1, 2, 3, 4], [10, 20, 40, 30]), 6)  # 1 - 6 (0+0+1+1) / (4 (16-1))
    0.8
    >>> spearman([1, 2, 3, np.nan], [3, 2, 1, 0])  # the NaN entry is left out
    -1.0
    >>> spearman([1, 2, 2], [1, 2, 3])  # ranks 1, 2.5, 2.5: corr = 1.5 / sqrt(1.5 * 2)
    0.8660254037844387
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if nan_policy == "propagate":
        if np.isnan(a).any() or np.isnan(b).any():
            return float("nan")
    else:
        ok = np.isfinite(a) & np.isfinite(b)
        a, b = a[ok], b[ok]
    if a.size < 3:
        return float("nan")
    from scipy.stats import rankdata
    ra, rb = rankdata(a), rankdata(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def spearman_test(a, b) -> tuple[float, float]:
    """Spearman's rho and its two-sided p-value, exactly as ``scipy.stats.spearmanr(a, b)``.

        ``rho = corr(rank(a), rank(b)),  p = 2 P(T_{n-2} > |rho| sqrt((n - 2) / (1 - rho^2)))``

    Use it where scipy's own figures are wanted, p-value included; unlike :func:`spearman`,
    it leaves no entry out and has no floor on ``n``.

    Parameters
    ----------
    a, b : array-like of shape (n,)

    Returns
    -------
    (float, float)
        rho and p. Both NaN when either side holds a NaN (scipy's ``nan_policy="propagate"``),
        is constant (with scipy's ``ConstantInputWarning``) or for n < 2; rho is +-1 (to rounding)
        with a NaN p-value for n = 2.

    Examples
    --------
    >>> spearman_test([1, 2, 3], [1, 3, 2])[0]  # 1 - 6 (0 + 1 + 1) / (3 (9 - 1))
    0.5
    >>> spearman_test([1, 2, np.nan, 4], [1, 2, 3, 4])
    (nan, nan)
    """
    from scipy.stats import spearmanr
    res = spearmanr(a, b)
    return float(res.statistic), float(res.pvalue)


def spearman_rows(a, b, *, b_ranked: bool = False) -> np.ndarray:
    """Spearman correlation of ``a`` and ``b`` along the last axis: one rho per row, at once.

        rho = sum (ra - mean ra)(rb - mean rb) / sqrt(sum (ra - mean ra)^2 sum (rb - mean rb)^2)

    with ra, rb the average ranks of each row. It matches :func:`spearman` row by row up to
    rounding (it sums the centred ranks directly rather than through ``numpy.corrcoef``).

    Parameters
    ----------
    a : array-like of shape (..., n)
    b : array-like of shape (..., n), broadcast against ``a``
        Its rows, or their average ranks with ``b_ranked=True`` (rank a row once for many).
    b_ranked : bool, default=False
        Whether ``b`` already holds average ranks along its last axis.

    Returns
    -------
    ndarray of shape ``a.shape[:-1]`` (broadcast with ``b``'s), float
        NaN where a row is constant or holds a NaN.

    Examples
    --------
    >>> spearman_rows([[1, 2, 3], [3, 2, 1], [1, 1, 1]], [1, 3, 2]).tolist()
    [0.5, -0.5, nan]
    """
    from scipy.stats import rankdata
    a = rankdata(a, axis=-1)
    a = a - a.mean(axis=-1, keepdims=True)
    b = np.asarray(b) if b_ranked else rankdata(b, axis=-1)
    b = b - b.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(-1) / np.sqrt((a**2).sum(-1) * (b**2).sum(-1))


def spearman_columns(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman correlation of every column of ``a`` with every column of ``b``.

        rho_jf = cos(centred rank(a_j), centred rank(b_f))  over the rows where b_f is finite

    Each column of ``b`` is ranked on its finite rows, and ``a`` on those same rows (once,
    over all rows, for a column of ``b`` that is finite everywhere).

    Parameters
    ----------
    a : ndarray of shape (n, n_a)
        Finite values (an SAE's latent activations over the responses).
    b : ndarray of shape (n, n_b)
        NaN where a value is missing (hand-built features of the responses).

    Returns
    -------
    ndarray of shape (n_a, n_b)
        NaN where a column is constant on those rows or ``b``'s has fewer than 3 finite values.

    Examples
    --------
    >>> a = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [4.0, 0.0]])
    >>> b = np.array([[1.0], [3.0], [2.0], [np.nan]])
    >>> np.round(spearman_columns(a, b), 12).tolist()  # ranks 1, 2, 3 against 1, 3, 2
    [[0.5], [nan]]
    """
    out = np.full((a.shape[1], b.shape[1]), np.nan)
    everywhere = _unit_ranks(a)
    for f in range(b.shape[1]):
        v = b[:, f]
        ok = np.isfinite(v)
        if ok.sum() < 3:
            continue
        ra = everywhere if ok.all() else _unit_ranks(a[ok])
        rv = _unit_ranks(v[ok, None])[:, 0]
        rho = ra.T @ rv  # cosines of centred ranks: Spearman's rho
        dead = (np.abs(ra).sum(0) == 0) | (np.abs(rv).sum() == 0)
        out[:, f] = np.where(dead, np.nan, rho)
    return out


def _unit_ranks(a: np.ndarray) -> np.ndarray:
    """Average ranks of each column, centred and scaled to unit norm (0 for a constant one)."""
    from scipy.stats import rankdata

    r = rankdata(a, axis=0).astype(float)
    r -= r.mean(0)
    norm = np.linalg.norm(r, axis=0)
    return np.divide(r, norm, out=np.zeros_like(r), where=norm > 0)


def spearman_brown(r, factor):
    """Reliability of a test ``factor`` times as long (Spearman 1910; Brown 1910).

        rel(factor) = factor r / (1 + (factor - 1) r)

    Parameters
    ----------
    r : float or ndarray
        Reliability (e.g. a split-half correlation) at the current length.
    factor : float
        How many times longer (2 corrects a split-half correlation to the full test).

    Returns
    -------
    float or ndarray, as ``r``
        A negative ``r`` (halves that agree less than chance) has no reliability to
        project: 0, where the formula would diverge near ``r = -1 / (factor - 1)``.

    Examples
    --------
    >>> spearman_brown(0.5, 2)  # 2 * 0.5 / 1.5
    0.6666666666666666
    >>> spearman_brown(-0.9, 2)  # the formula would give -18
    0.0
    """
    r = np.maximum(r, 0.0) if isinstance(r, np.ndarray) else max(float(r), 0.0)
    return factor * r / (1 + (factor - 1) * r)


def prophecy_factor(rel: float, target: float = 0.8) -> float:
    """How many times longer a test of reliability ``rel`` must be to reach ``target``: the
    Spearman-Brown prophecy formula, :func:`spearman_brown` solved for the factor.

        factor = target (1 - rel) / (rel (1 - target))

    Parameters
    ----------
    rel : float
        The reliability of the test as it is (for example CM's split-half reliability).
    target : float, default=0.8
        The reliability wanted.

    Returns
    -------
    float
        NaN where ``rel`` is not > 0.

    Examples
    --------
    >>> round(prophecy_factor(0.5, 0.8), 6)  # 0.8 * 0.5 / (0.5 * 0.2)
    4.0
    >>> round(spearman_brown(0.5, prophecy_factor(0.5, 0.8)), 6)
    0.8
    """
    if not np.isfinite(rel) or rel <= 0:
        return float("nan")
    return target * (1 - rel) / (rel * (1 - target))


def bootstrap_runs(n_runs: int, n_boot: int, seed) -> np.ndarray:
    """Run indices of each bootstrap draw: the runs resampled with replacement.

    One draw is a multiset of ``n_runs`` runs; a figure that is a mean over runs is
    recomputed on each draw, and :func:`percentile_interval` reads its interval off them.

    Parameters
    ----------
    n_runs, n_boot : int
    seed : int or numpy.random.Generator seed

    Returns
    -------
    ndarray of shape (n_boot, n_runs), int

    Examples
    --------
    >>> bootstrap_runs(3, 2, seed=0).shape
    (2, 3)
    """
    return np.random.default_rng(seed).integers(0, n_runs, size=(n_boot, n_runs))


def group_draws(groups, n_boot: int, seed) -> list[np.ndarray]:
    """Row indices of each draw of a bootstrap over groups: the groups resampled with
    replacement, each drawn group bringing all its rows.

    Rows of one group are not independent (pairs of one prompt or user), so a figure over
    rows is recomputed on each draw and :func:`percentile_interval` reads its interval off
    them.

    Parameters
    ----------
    groups : array-like of shape (n,)
        Each row's group label.
    n_boot : int
        Draws.
    seed : int or numpy.random.Generator seed

    Returns
    -------
    list of ndarray of int
        One array of row positions per draw, of varying length.

    Examples
    --------
    >>> [d.tolist() for d in group_draws(["a", "a", "b"], 2, seed=0)]
    [[2, 2], [2, 0, 1]]
    """
    labels = np.asarray(groups)
    _, inverse = np.unique(labels.astype(str) if labels.dtype == object else labels,
                           return_inverse=True)  # fmt: skip
    order = np.argsort(inverse, kind="stable")
    rows = np.split(order, np.flatnonzero(np.diff(inverse[order])) + 1)  # sorted labels
    rng = np.random.default_rng(seed)
    return [np.concatenate([rows[g] for g in rng.integers(0, len(rows), len(rows))])
            for _ in range(n_boot)]  # fmt: skip


def run_weights(draws: np.ndarray, n_runs: int) -> np.ndarray:
    """How often each run is in each draw of :func:`bootstrap_runs`, as floats.

    A figure pooled over runs (a weighted mean, a ratio of sums) reads a draw as these
    weights: weights @ per_run.

    Parameters
    ----------
    draws : ndarray of shape (n_boot, n_runs), int
        Run indices of each draw, as :func:`bootstrap_runs` returns them.
    n_runs : int
        The number of runs (the length of each weight row).

    Returns
    -------
    ndarray of shape (n_boot, n_runs), float

    Examples
    --------
    >>> run_weights(np.array([[0, 0, 2], [1, 2, 1]]), 3).tolist()
    [[2.0, 0.0, 1.0], [0.0, 2.0, 1.0]]
    """
    weights = np.zeros((len(draws), n_runs))
    for b, drawn in enumerate(draws):
        weights[b] = np.bincount(drawn, minlength=n_runs)
    return weights


def run_mean(per_run, draws: np.ndarray) -> tuple[float, np.ndarray]:
    """A mean over runs of a per-run figure (NaN: the run has none), and its bootstrap draws.

        value = mean over runs r with a figure of v_r

    Parameters
    ----------
    per_run : array-like of shape (n_runs,)
        The figure of each run; NaN where a run has none.
    draws : ndarray of shape (n_boot, n_runs), int
        Run indices of each draw (:func:`bootstrap_runs`).

    Returns
    -------
    (float, ndarray of shape (n_boot,))
        The mean, and the mean of each draw (NaN for a draw of runs without the figure).

    Examples
    --------
    >>> value, boot = run_mean([1.0, np.nan, 3.0], np.array([[0, 0, 2], [1, 1, 1]]))
    >>> value, boot.tolist()
    (2.0, [1.6666666666666667, nan])
    """
    v = np.asarray(per_run, dtype=float)  # (n_runs,)
    ok = np.isfinite(v)
    value = float(v[ok].mean()) if ok.any() else float("nan")
    if not len(draws):
        return value, np.zeros(0)
    picked = v[draws]  # (n_boot, n_runs)
    with np.errstate(invalid="ignore"):
        counts = np.isfinite(picked).sum(1)
        sums = np.where(np.isfinite(picked), picked, 0.0).sum(1)
        return value, np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def pooled_ratio(num: np.ndarray, den: np.ndarray,
                 weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per column, the sum over runs of ``num`` over the sum over runs of ``den``, and its
    bootstrap draws (a figure pooled over runs, such as an accuracy over all held-out pairs).

        value_j = sum_r num_rj / sum_r den_rj,  draw_bj = sum_r w_br num_rj / sum_r w_br den_rj

    Parameters
    ----------
    num, den : ndarray of shape (n_runs, n_cols)
    weights : ndarray of shape (n_boot, n_runs)
        Run weights of each draw (:func:`run_weights`).

    Returns
    -------
    (ndarray of shape (n_cols,), ndarray of shape (n_boot, n_cols))
        NaN where the denominator is 0.

    Examples
    --------
    >>> value, boot = pooled_ratio(np.array([[1.0], [3.0]]), np.array([[2.0], [4.0]]),
    ...                            np.array([[2.0, 0.0]]))
    >>> value.tolist(), boot.tolist()
    ([0.6666666666666666], [[0.5]])
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        value = num.sum(0) / den.sum(0)
        draws = (weights @ num) / (weights @ den)
    value = np.where(den.sum(0) > 0, value, np.nan)
    return value, np.where(np.isfinite(draws), draws, np.nan)


def percentile_interval(values, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of one figure's bootstrap draws.

        (lo, hi) = quantiles (1 - level) / 2 and (1 + level) / 2 of the finite draws

    Parameters
    ----------
    values : array-like of shape (n_boot,)
        The figure on each bootstrap draw; NaN and infinite draws are left out.
    level : float, default=0.95
        Coverage of the interval.

    Returns
    -------
    (float, float)
        NaN, NaN under 2 finite draws (one draw has no spread, and would look precise).

    Examples
    --------
    >>> percentile_interval([0.0, 1.0, 2.0, 3.0, 4.0, np.nan], level=0.5)
    (1.0, 3.0)
    """
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size < 2:
        return float("nan"), float("nan")
    alpha = (1 - level) / 2
    lo, hi = np.quantile(values, [alpha, 1 - alpha])
    return float(lo), float(hi)


def nanquantiles(draws: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """Quantiles of each row, NaNs left out: ``np.nanquantile(draws, qs, axis=1).T``
    (linear method) bit for bit, without NumPy's loop over the rows.

        q-quantile of a row's k finite sorted values x_0..x_{k-1}: x_j + g (x_{j+1} - x_j),
        j + g = (k - 1) q

    NaNs sort last, so row i's finite values are its first k_i sorted ones. The
    interpolation is NumPy's own (from the upper neighbour when g >= 1/2).

    Parameters
    ----------
    draws : ndarray of shape (n_rows, n_draws)
        A figure's bootstrap draws, one row per pair; NaN where a draw has no value.
    qs : ndarray of shape (n_q,)
        Quantiles in [0, 1].

    Returns
    -------
    ndarray of shape (n_rows, n_q)
        NaN for a row without finite values.

    Examples
    --------
    >>> nanquantiles(np.array([[3.0, 1.0, np.nan, 2.0], [np.nan] * 4]), np.array([0.25, 0.5]))
    array([[1.5, 2. ],
           [nan, nan]])
    """
    ordered = np.sort(draws, axis=1)  # (n_rows, n_draws)
    k = (~np.isnan(draws)).sum(1)  # (n_rows,)
    virtual = (k[:, None] - 1) * qs[None, :]  # (n_rows, n_q)
    below = np.floor(virtual)
    gamma = virtual - below
    below = np.clip(below, 0, None).astype(np.int64)
    above = np.minimum(below + 1, np.maximum(k[:, None] - 1, 0))
    a = np.take_along_axis(ordered, below, axis=1)
    b = np.take_along_axis(ordered, above, axis=1)
    diff = b - a
    out = a + diff * gamma
    late = gamma >= 0.5
    out[late] = (b - diff * (1 - gamma))[late]
    out[k == 0] = np.nan
    return out


def wilson_interval(successes, n, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a binomial proportion (a flip rate out of n edited pairs).

        p = k / n,  z = Phi^-1((1 + level) / 2)
        centre = (p + z^2 / 2n) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)

    Unlike p +- z sqrt(p(1-p)/n) it stays inside [0, 1] and has width at p = 0.

    Parameters
    ----------
    successes, n : array-like
        Counts; NaN where ``n`` is 0.
    level : float, default=0.95

    Returns
    -------
    (ndarray, ndarray)
        Lower and upper bounds.

    Examples
    --------
    >>> lo, hi = wilson_interval([50, 0], [100, 0])
    >>> np.round(lo, 4).tolist(), np.round(hi, 4).tolist()
    ([0.4038, nan], [0.5962, nan])
    """
    k, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    z = NormalDist().inv_cdf((1 + level) / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        shrink = 1 + z**2 / n
        centre = (p + z**2 / (2 * n)) / shrink
        half = z / shrink * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    ok = n > 0
    return np.where(ok, centre - half, np.nan), np.where(ok, centre + half, np.nan)


def best_of_n_weights(n_candidates: int, n: int) -> np.ndarray:
    """Probability that the i-th smallest of N candidates is the best of n drawn without
    replacement: w_i = C(i-1, n-1) / C(N, n), i = 1..N (zero below n; they sum to 1).

    Parameters
    ----------
    n_candidates : int
        N, the candidates in the pool.
    n : int
        The n of best-of-n, in [1, N] (a ValueError otherwise).

    Returns
    -------
    ndarray of shape (n_candidates,), float
        w_i for i = 1..N, the candidates sorted by increasing score.

    Examples
    --------
    >>> best_of_n_weights(4, 2).round(4).tolist()  # C(0,1), C(1,1), C(2,1), C(3,1) / C(4,2)
    [0.0, 0.1667, 0.3333, 0.5]
    """
    if not 1 <= n <= n_candidates:
        raise ValueError(f"`n` must be in [1, {n_candidates}], got {n}")
    i = np.arange(1, n_candidates + 1, dtype=float)
    log_w = np.full(n_candidates, -np.inf)
    k = i >= n  # log C(i-1, n-1) - log C(N, n), by log-gamma (N = 256 overflows floats)
    from scipy.special import gammaln
    log_w[k] = (gammaln(i[k]) - gammaln(n) - gammaln(i[k] - n + 1)
                - gammaln(n_candidates + 1) + gammaln(n + 1) + gammaln(n_candidates - n + 1))
    return np.exp(log_w)


def best_of_n(proxy, values, ns) -> np.ndarray:
    """Expected ``values`` of the best-of-n pick by ``proxy``, exactly, over each pool.

        E[v of best of n] = sum_i w_i v_(i),  v_(i): the value of the i-th smallest proxy

    with ``best_of_n_weights`` (Coste et al. 2024's unbiased estimator: no resampling noise).
    Candidates tied on the proxy share their mean value (the pick among them is uniform).

    Parameters
    ----------
    proxy : array-like of shape (n_pools, N) or (N,)
        One row per pool (a prompt's candidates): the scores that pick.
    values : array-like of the shape of ``proxy``, or (k, n_pools, N)
        The values averaged (gold for the gold curve, ``proxy`` itself for the proxy
        curve); with a leading axis, k kinds of value picked by the same proxy at once.
    ns : sequence of int
        The n of best-of-n, each in [1, N].

    Returns
    -------
    ndarray of shape (n_pools, len(ns)), (len(ns),) for one pool, or with the leading k.

    Examples
    --------
    >>> best_of_n([0.1, 0.4, 0.3], [1.0, 2.0, 3.0], [1, 2, 3]).tolist()
    [2.0, 2.3333333333333335, 2.0]
    """
    p, v = np.asarray(proxy, dtype=float), np.asarray(values, dtype=float)
    one = p.ndim == 1
    p = np.atleast_2d(p)
    stacked = v.ndim == p.ndim + 1 if not one else v.ndim == 2
    v = v.reshape((-1, *p.shape)) if stacked else np.atleast_2d(v)[None]
    if v.shape[1:] != p.shape:
        raise ValueError(f"`values` has shape {np.shape(values)} but `proxy` has shape "
                         f"{np.shape(proxy)}")  # fmt: skip
    order = np.argsort(p, axis=1, kind="stable")
    p_sorted = np.take_along_axis(p, order, axis=1)
    v_sorted = np.take_along_axis(v, order[None], axis=2)  # (k, n_pools, N)
    tied = np.diff(p_sorted, axis=1) == 0
    if tied.any():  # candidates tied on the proxy: each gets the mean value of its tie group
        n_pools, n_candidates = p.shape
        starts = np.concatenate([np.ones((n_pools, 1), bool), ~tied], axis=1)
        group = np.cumsum(starts.ravel()) - 1  # (n_pools * N,): tie groups, row after row
        counts = np.bincount(group)
        for k in range(len(v_sorted)):
            v_sorted[k] = (np.bincount(group, v_sorted[k].ravel()) / counts)[group].reshape(
                n_pools, n_candidates)
    weights = np.stack([best_of_n_weights(p.shape[1], int(n)) for n in ns])  # (len(ns), N)
    out = v_sorted @ weights.T  # (k, n_pools, len(ns))
    out = out[:, 0] if one else out
    return out if stacked else out[0]


def kl_best_of_n(n) -> np.ndarray:
    """KL(best-of-n || base policy) <= log n - (n - 1) / n: an upper bound, 0 at n = 1.

    Parameters
    ----------
    n : int or array-like of int
        The n of best-of-n (>= 1).

    Returns
    -------
    ndarray of float
        The bound for each n, of the shape of ``n``.

    Examples
    --------
    >>> kl_best_of_n([1, 2]).round(4).tolist()
    [0.0, 0.1931]
    """
    n = np.asarray(n, dtype=float)
    return np.log(n) - (n - 1) / n


def cross_fitted_fall(curves, half) -> np.ndarray:
    """Per pool, the value at the peak read from the other half's mean curve minus the value
    at the curve's last point.

    A peak read from the curve it is measured on favours a fall: noise alone puts the
    maximum above the last point. Here each half of the pools (prompts) takes its peak's
    position from the other half, so a curve that only rises gives 0 and noise averages
    out to 0 (Gao et al. 2023's overoptimization, told apart from sampling noise).

    Parameters
    ----------
    curves : array-like of shape (..., n_pools, K)
        Each pool's curve over K points (the n of best-of-n), any leading axes (runs) each
        read on its own.
    half : array-like of bool, shape (n_pools,)
        The pools of one half (True) and of the other (False); both non-empty.

    Returns
    -------
    ndarray of shape (..., n_pools)

    Examples
    --------
    >>> cross_fitted_fall([[0.0, 2.0, 1.0], [0.0, 1.0, 2.0]], [True, False]).tolist()
    [0.0, -1.0]
    """
    curves, half = np.asarray(curves, dtype=float), np.asarray(half, dtype=bool)
    if half.all() or not half.any():
        raise ValueError("`half` must put pools on both sides")
    out = np.empty(curves.shape[:-1])
    for side in (True, False):
        peak = curves[..., half != side, :].mean(axis=-2).argmax(axis=-1)
        at = np.take_along_axis(curves[..., half == side, :], peak[..., None, None], axis=-1)
        out[..., half == side] = at[..., 0] - curves[..., half == side, -1]
    return out
