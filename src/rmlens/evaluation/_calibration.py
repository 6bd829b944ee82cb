"""Calibration of p = sigmoid(r+ - r-): ECE with equal-mass bins, Brier score, temperature.

A pair set holds only one label per pair (the chosen response won), so calibration is
measured top-label (Guo et al. 2017, "On Calibration of Modern Neural Networks"): the RM's
confidence in its own pick, c = max(p, 1 - p), against whether that pick was right
(1 if p > 1/2 and the chosen response won, or p < 1/2 and the rejected one won; 1/2 at
p == 1/2, as ties count in accuracy). Swapping chosen and rejected leaves every number here
unchanged.

ECE estimator (equal-mass, "adaptive" binning; Nixon et al. 2019, Roelofs et al. 2022):
sort the n confidences, cut them into B = min(n_bins, n) bins of n/B pairs each
(``numpy.array_split`` of the stable sort order, sizes differ by at most one), and

    ECE = sum_b (n_b / n) * |mean(correct in b) - mean(c in b)|

Equal-mass bins keep every bin populated where a trained RM's confidences bunch up near 1.
The estimator is biased upward for small bins (noise in a bin's accuracy adds to |.|), so
compare ECEs at similar n and n_bins.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar
from scipy.special import expit

from rmlens import stats
from rmlens.stats import _outcomes as _labels  # y, default all ones, of p's shape


def top_label(p, y=None) -> tuple[np.ndarray, np.ndarray]:
    """Confidence max(p, 1 - p) and correctness of the pick, each (n,).

    ``y`` (n,) is 1 where the first response (the chosen one) won; default all ones.
    """
    p = np.asarray(p, dtype=float)
    y = _labels(p, y)
    conf = np.maximum(p, 1 - p)
    correct = np.where(p == 0.5, 0.5, ((p > 0.5) == (y == 1)).astype(float))
    return conf, correct


def reliability_bins(p, y=None, *, n_bins: int = 10) -> pd.DataFrame:
    """Equal-mass bins of the top-label confidence.

    Parameters
    ----------
    p : array of shape (n,)
        Probability that the first (chosen) response wins.
    y : array of shape (n,), optional
        1 where the first response won, 0 where the second did; default all ones.
    n_bins : int, default=10
        Number of bins (fewer when there are fewer pairs).

    Returns
    -------
    DataFrame
        One row per bin: ``confidence`` (mean c), ``accuracy`` (mean correct), ``n``,
        ``lo`` and ``hi`` (the bin's smallest and largest c).
    """
    conf, correct = top_label(p, y)
    if conf.size == 0:
        return pd.DataFrame(columns=["confidence", "accuracy", "n", "lo", "hi"])
    order = np.argsort(conf, kind="stable")
    rows = []
    for idx in np.array_split(order, min(n_bins, conf.size)):
        rows.append(
            {
                "confidence": float(conf[idx].mean()),
                "accuracy": float(correct[idx].mean()),
                "n": int(idx.size),
                "lo": float(conf[idx].min()),
                "hi": float(conf[idx].max()),
            }
        )
    return pd.DataFrame(rows)


def expected_calibration_error(p, y=None, *, n_bins: int = 10) -> float:
    """Top-label ECE with equal-mass bins (module docstring).

    Parameters
    ----------
    p : array of shape (n,)
        Probability that the first (chosen) response wins, e.g. sigmoid(r+ - r-).
    y : array of shape (n,), optional
        1 where the first response won, 0 where the second did; default all ones (a pair set).
    n_bins : int, default=10
        Number of equal-mass bins.

    Returns
    -------
    float
        The pair-weighted mean gap between accuracy and confidence over the bins; NaN for
        no pairs.

    Examples
    --------
    >>> round(expected_calibration_error([0.9, 0.8, 0.3, 0.6], [1, 0, 0, 1], n_bins=2), 3)
    0.35
    """
    bins = reliability_bins(p, y, n_bins=n_bins)
    if bins.empty:
        return float("nan")
    gap = (bins.accuracy - bins.confidence).abs()  # (n_bins,)
    return float((bins.n * gap).sum() / bins.n.sum())


def brier_score(p, y=None) -> float:
    """Mean squared error of p against the outcome: mean((p - y)^2); y defaults to ones.

    Parameters
    ----------
    p : array of shape (n,)
        Probability that the first (chosen) response wins.
    y : array of shape (n,), optional
        Outcomes; default all ones.

    Returns
    -------
    float
        NaN for no pairs.
    """
    p = np.asarray(p, dtype=float)
    if p.size == 0:
        return float("nan")
    return float(np.mean((p - _labels(p, y)) ** 2))


def fit_temperature(margin, y=None, *, bounds: tuple[float, float] = (1e-2, 1e3)) -> float:
    """Temperature T minimizing the log-loss of sigmoid(margin / T) (Guo et al. 2017; the
    log-loss is :func:`rmlens.stats.log_loss` of the margins).

    Parameters
    ----------
    margin : array of shape (n,)
        r+ - r- of the pairs to fit on.
    y : array of shape (n,), optional
        Outcomes; default all ones (the chosen response won).
    bounds : (float, float), default=(0.01, 1000.0)
        Search interval for T. An RM with no errors on the fitting pairs has its optimum at
        T -> 0 and gets the lower bound.

    Returns
    -------
    float
        T; no pairs is a ValueError.
    """
    d = np.asarray(margin, dtype=float)
    if d.size == 0:
        raise ValueError("fit_temperature needs at least one pair")
    lo, hi = np.log(bounds[0]), np.log(bounds[1])
    result = minimize_scalar(
        lambda log_t: stats.log_loss(d / np.exp(log_t), y, logits=True),
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-6},
    )
    return float(np.exp(result.x))


def calibration_metrics(margin, *, n_bins: int = 10) -> dict:
    """ECE, Brier score, log-loss and the reliability bins of a pair set's margins (n,).

    Parameters
    ----------
    margin : array of shape (n,)
        r+ - r- of each pair (the chosen response is the first).
    n_bins : int, default=10
        Equal-mass bins of the ECE and the reliability bins.

    Returns
    -------
    dict
        ``ece``, ``brier``, ``log_loss`` and ``bins`` (the rows of :func:`reliability_bins`).
    """
    p = expit(np.asarray(margin, dtype=float))
    return {
        "ece": expected_calibration_error(p, n_bins=n_bins),
        "brier": brier_score(p),
        "log_loss": stats.log_loss(margin, logits=True),
        "bins": reliability_bins(p, n_bins=n_bins).to_dict("records"),
    }


def temperature_scaling(
    margin, *, frac: float, n_bins: int = 10, seed: int = 0
) -> tuple[dict, np.ndarray]:
    """Fit T on a seeded random ``frac`` of the pairs; ECE and Brier before/after on the rest.

    Parameters
    ----------
    margin : array of shape (n,)
        r+ - r- of each pair.
    frac : float
        Share of the pairs T is fitted on; each part needs at least 2 pairs (a ValueError
        otherwise).
    n_bins : int, default=10
        Equal-mass bins of the ECE.
    seed : int, default=0
        Seed of the split.

    Returns
    -------
    summary : dict
        ``temperature, frac, n_fit, n_eval, ece_before, ece_after, brier_before,
        brier_after, bins_after``.
    held : ndarray of shape (n,), bool
        The evaluation part.
    """
    d = np.asarray(margin, dtype=float)
    n_fit = int(round(frac * d.size))
    if n_fit < 2 or d.size - n_fit < 2:
        raise ValueError(
            f"calibrate_frac={frac} of {d.size} pairs leaves {n_fit} to fit the temperature and "
            f"{d.size - n_fit} to evaluate it; each needs at least 2"
        )
    order = np.random.default_rng(seed).permutation(d.size)
    held = np.ones(d.size, dtype=bool)
    held[order[:n_fit]] = False
    t = fit_temperature(d[~held])
    before, after = expit(d[held]), expit(d[held] / t)
    summary = {
        "temperature": t,
        "frac": frac,
        "n_fit": n_fit,
        "n_eval": int(held.sum()),
        "ece_before": expected_calibration_error(before, n_bins=n_bins),
        "ece_after": expected_calibration_error(after, n_bins=n_bins),
        "brier_before": brier_score(before),
        "brier_after": brier_score(after),
        "bins_after": reliability_bins(after, n_bins=n_bins).to_dict("records"),
    }
    return summary, held
