"""Post-hoc length calibration: a reference that removes an RM's length bias without training.

Huang et al. 2024, "Post-hoc Reward Calibration: A Case Study on Length Bias" (arXiv
2409.17407, ICLR 2025), treat a reward as true quality plus a bias that depends on length
only, estimate the bias by a locally weighted regression of reward on length over every
scored response, and subtract it:

    r_cal(x, y) = r(x, y) - f(len(y))      f = LOWESS(reward ~ length), all responses pooled

so that, across the pair set, no length earns more reward on average than another. A pair
whose two responses have the same length keeps its margin exactly.

Length unit: characters of the response (``rmlens.data._schema.to_text``; the prompt is left out).
The authors' code measures the response both in characters and in tokens of the RM's
tokenizer; characters need no tokenizer, so one f serves every RM (pretrained classifiers,
ensembles, the backbones compared by the objectives table) and the texts a shortcut probe
edits, and they are not capped by truncation as token counts are.

LOWESS (Cleveland 1979), local-linear with tricube weights and robustness rounds, as
``statsmodels.nonparametric.lowess`` computes it (the field's implementation, which the
authors call). At a length x_i, a straight line is fitted by weighted least squares to the
k = floor(frac * n) responses nearest in length:

    w_j    = (1 - (|x_j - x_i| / h_i)^3)^3 * rho_j       (0 beyond h_i)
    f(x_i) = ybar + b * (x_i - xbar),   b = sum_j w_j (x_j - xbar)(y_j - ybar)
                                                / sum_j w_j (x_j - xbar)^2

with xbar, ybar the w-weighted means and h_i the distance to the k-th nearest response. The
first fit has rho = 1; each of ``it`` robustness rounds refits with the bisquare weights
rho_j = (1 - (e_j / (6 median|e|))^2)^2 (0 past 1), e_j the residual of response j. As
statsmodels does with ``delta = 0.01 * (max - min)``, the line is fitted at up to 101 lengths
spread over the range and interpolated in between.

Why not call statsmodels: response lengths tie a lot (empty, one-word or boilerplate
responses; synthetic sets of equal-length responses), and where one length holds the k
nearest responses (h_i = 0) statsmodels divides by zero and returns a single response's
reward; here, as in Cleveland's and R's ``lowess``, tied responses then weigh 1 each. Ties
also make the fit cheap: the sums run over distinct lengths, so 200,000 responses fit in
well under a second. tests/test_evaluation.py checks the values against statsmodels'.
``frac`` defaults to 0.5, the authors' setting (statsmodels' own default is 2/3).

Once fitted, f is fixed: new lengths (a probe's padded response) are placed on it by linear
interpolation between the fitted lengths and along the end segments beyond them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rmlens._base import Params
from rmlens._params import check_params, non_negative_int, positive
from rmlens.evaluation._config import LOWESS_FRAC
from rmlens.stats import spearman

UNIT = "characters"


def response_lengths(responses: Sequence[Any]) -> np.ndarray:
    """Length in characters of each response (conversations rendered by ``to_text``), (n,).

    Parameters
    ----------
    responses : sequence of str or of conversations
        The responses.

    Returns
    -------
    ndarray of shape (n,), float
        The lengths.
    """
    # lazy: pandas loads only when this runs
    from rmlens.data import to_text

    return np.fromiter(
        (len(r) if isinstance(r, str) else len(to_text(r)) for r in responses),
        dtype=float,
        count=len(responses),
    )


def _vectors(rewards, lengths) -> tuple[np.ndarray, np.ndarray]:
    r, x = np.asarray(rewards, dtype=float), np.asarray(lengths, dtype=float)
    if r.ndim != 1 or r.shape != x.shape:
        raise ValueError(f"rewards {r.shape} and lengths {x.shape} must be equal 1-d shapes")
    if not (np.isfinite(r).all() and np.isfinite(x).all()):
        raise ValueError("rewards and lengths must be finite (no NaN or inf)")
    return r, x


def _tricube(u: np.ndarray) -> np.ndarray:
    return np.clip(1 - np.abs(u) ** 3, 0, None) ** 3


def _lowess(x: np.ndarray, y: np.ndarray, *, frac: float, it: int, grid: int = 101):
    """LOWESS of y (n,) on x (n,) (module docstring): (distinct x sorted, f at them)."""
    u, where, counts = np.unique(x, return_inverse=True, return_counts=True)  # (U,)
    if u.size == 1:  # one length: nothing to regress on, f is the mean
        return u, np.array([y.mean()])
    k = min(max(int(frac * x.size + 1e-10), 2), x.size)
    steps = np.linspace(u[0], u[-1], grid)
    at = np.unique(np.r_[np.searchsorted(u, steps), u.size - 1].clip(0, u.size - 1))  # (m,)
    dist = np.abs(u[None, :] - u[at, None])  # (m, U)
    order = np.argsort(dist, axis=1)
    kth = np.argmax(np.cumsum(counts[order], axis=1) >= k, axis=1)  # k-th nearest response
    h = np.take_along_axis(dist, order, axis=1)[np.arange(at.size), kth]  # (m,)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(h[:, None] > 0, _tricube(dist / h[:, None]), dist == 0)  # (m, U)
    rho, fit = np.ones_like(y), np.full(at.size, np.nan)
    for _ in range(it + 1):
        w0 = np.bincount(where, weights=rho, minlength=u.size)  # sum of rho per length
        w1 = np.bincount(where, weights=rho * y, minlength=u.size)  # sum of rho * y
        a = t * w0  # (m, U): weight of each distinct length
        s0 = a.sum(axis=1)
        ok = s0 > 0  # else every neighbour is an outlier: the last fit stays
        s0 = np.where(ok, s0, 1.0)
        xbar, ybar = a @ u / s0, t @ w1 / s0
        dx = u[None, :] - xbar[:, None]
        sxx = (a * dx**2).sum(axis=1)
        sxy = (t * dx * (w1 - w0 * ybar[:, None])).sum(axis=1)
        flat = sxx <= 1e-12 * s0 * np.ptp(u) ** 2  # all weight on one length: its mean
        slope = np.where(flat, 0.0, sxy / np.where(flat, 1.0, sxx))
        fit = np.where(ok, ybar + slope * (u[at] - xbar), fit)
        f = np.interp(u, u[at], fit)
        e = np.abs(y - f[where])  # (n,) residuals
        scale = 6 * np.median(e)
        # bisquare; a median residual of 0 leaves only the exact fits (as statsmodels)
        rho = (1 - np.clip(e / scale, 0, 1) ** 2) ** 2 if scale > 0 else (e == 0) * 1.0
    return u, f


class LengthCalibrator(Params):
    """The bias f(length) of an RM's rewards, fitted by LOWESS (module docstring).

    Parameters
    ----------
    frac : float, default=0.5
        Share of all responses in each local fit, in (0, 1].
    it : int, default=3
        Robustness rounds of LOWESS (0: plain tricube local-linear fit).

    Attributes
    ----------
    lengths_ : ndarray of shape (n_lengths,)
        The distinct lengths fitted, sorted.
    bias_ : ndarray of shape (n_lengths,)
        f at ``lengths_``.

    Examples
    --------
    >>> lengths = np.array([10.0, 20, 30, 40, 10, 20, 30, 40])
    >>> rewards = 0.1 * lengths + np.array([1.0, 1, 1, 1, -1, -1, -1, -1])
    >>> cal = LengthCalibrator().fit(rewards, lengths)
    >>> np.round(cal.transform(rewards, lengths), 6).tolist()
    [1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0]
    """

    _constraints = {
        "frac": (lambda x: positive(x) and x <= 1, "a float in (0, 1]"),
        "it": (non_negative_int, "an int >= 0"),
    }

    def __init__(self, *, frac: float = LOWESS_FRAC, it: int = 3):
        self.frac = frac
        self.it = it

    def fit(self, rewards, lengths) -> LengthCalibrator:
        """Fit f on rewards (n,) and lengths (n,) of all scored responses.

        Parameters
        ----------
        rewards : array of shape (n,)
            Rewards of all scored responses (chosen and rejected pooled).
        lengths : array of shape (n,)
            Their lengths (:func:`response_lengths`).

        Returns
        -------
        LengthCalibrator
            ``self``, fitted; no responses is a ValueError.
        """
        check_params(self, self._constraints)
        r, x = _vectors(rewards, lengths)
        if r.size == 0:
            raise ValueError("no responses to fit the length bias on")
        self.lengths_, self.bias_ = _lowess(x, r, frac=self.frac, it=self.it)
        return self

    def bias(self, lengths) -> np.ndarray:
        """f at ``lengths`` (n,): interpolated, and extended along the end segments.

        Parameters
        ----------
        lengths : array of shape (n,)
            Response lengths.

        Returns
        -------
        ndarray of shape (n,)
            The fitted bias; an unfitted calibrator is a RuntimeError.
        """
        if not hasattr(self, "bias_"):
            raise RuntimeError(
                "This LengthCalibrator instance is not fitted yet. Call 'fit' first."
            )
        x, knots, f = np.asarray(lengths, dtype=float), self.lengths_, self.bias_
        out = np.interp(x, knots, f)
        if knots.size > 1:
            lo = (f[1] - f[0]) / (knots[1] - knots[0])
            hi = (f[-1] - f[-2]) / (knots[-1] - knots[-2])
            out = np.where(x < knots[0], f[0] + lo * (x - knots[0]), out)
            out = np.where(x > knots[-1], f[-1] + hi * (x - knots[-1]), out)
        return out

    def transform(self, rewards, lengths) -> np.ndarray:
        """Calibrated rewards r - f(length), (n,).

        Parameters
        ----------
        rewards : array of shape (n,)
            Rewards.
        lengths : array of shape (n,)
            Lengths of the same responses.

        Returns
        -------
        ndarray of shape (n,)
            The rewards less :meth:`bias` of their lengths.
        """
        r, x = _vectors(rewards, lengths)
        return r - self.bias(x)


def calibrate_length(rewards, lengths, *, frac: float = LOWESS_FRAC) -> np.ndarray:
    """Subtract a LOWESS fit of reward on length from every reward (Huang et al. 2024).

    Parameters
    ----------
    rewards : array of shape (n,)
        Rewards of all scored responses (a pair set's chosen and rejected, pooled).
    lengths : array of shape (n,)
        Their lengths; ``response_lengths`` gives characters, the unit ``evaluate`` uses.
    frac : float, default=0.5
        Share of the responses in each local fit.

    Returns
    -------
    ndarray of shape (n,)
        r - f(length). Split it back into chosen and rejected to get calibrated margins.

    Examples
    --------
    >>> rewards = np.array([2.0, 4.0, 3.0, 5.0])
    >>> lengths = np.array([10.0, 20.0, 10.0, 20.0])
    >>> calibrate_length(rewards, lengths).round(6).tolist()
    [-0.5, -0.5, 0.5, 0.5]
    """
    return LengthCalibrator(frac=frac).fit(rewards, lengths).transform(rewards, lengths)


def length_correlation(
    rewards, lengths, *, calibrated=None, frac: float = LOWESS_FRAC
) -> tuple[float, float]:
    """Spearman correlation of reward with length before and after length calibration.

    Parameters
    ----------
    rewards, lengths : array of shape (n,)
        All scored responses, chosen and rejected pooled.
    calibrated : array of shape (n,), optional
        The calibrated rewards when already computed; else ``calibrate_length(rewards,
        lengths, frac=frac)``.
    frac : float, default=0.5
        Share of the responses in each local fit (without ``calibrated``).

    Returns
    -------
    (rho_before, rho_after) : tuple of float
        NaN when fewer than 3 responses, or rewards or lengths are constant.

    Examples
    --------
    >>> lengths = np.arange(1.0, 41.0)
    >>> rewards = 0.5 * lengths + np.sin(lengths)
    >>> before, after = length_correlation(rewards, lengths)
    >>> round(before, 2), abs(after) < 0.1
    (0.99, True)
    """
    r, x = _vectors(rewards, lengths)
    after = calibrate_length(r, x, frac=frac) if calibrated is None else calibrated
    # (lengths, rewards): the order in which the figures were computed by scipy, to the bit
    before = spearman(x, r, nan_policy="propagate")
    return before, spearman(x, np.asarray(after, dtype=float), nan_policy="propagate")


class LengthCalibratedRM:
    """An RM whose reward is r(x, y) - f(len(y)), f fitted once (``LengthCalibrator``).

    Scores any text, so the shortcut probes measure the calibrated RM on the responses they
    edit. An ensemble scores the mean of its members, as ``evaluate`` does.

    Parameters
    ----------
    rm : RewardModel or EnsembleRM
        Anything ``rmlens.hub.member_scores`` scores.
    calibrator : LengthCalibrator
        Fitted on ``rm``'s rewards.
    """

    def __init__(self, rm: Any, calibrator: LengthCalibrator):
        self.rm = rm
        self.calibrator = calibrator

    def score(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        """Calibrated rewards (n,) of (prompt, response) texts.

        Parameters
        ----------
        prompts, responses : sequence of str or of conversations
            The texts, one (prompt, response) per reward.

        Returns
        -------
        ndarray of shape (n,)
            The RM's reward (an ensemble's mean) less f(length of the response).
        """
        # lazy: torch, transformers, scipy load only when this runs
        from rmlens.hub import member_scores

        raw = member_scores(self.rm, prompts, responses).mean(axis=0)
        return self.calibrator.transform(raw, response_lengths(responses))
