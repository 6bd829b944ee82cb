"""Regressor and SHAP fits on rows of the design: all pairs, each half of the runs, noise.

What ``Attributor.fit`` runs per target and regressor beyond the held-out R^2: the fit on
all pairs, the fits to each half's targets and the fits to pure noise that give the chance
level of the stability figures (``_stability``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from rmlens.attribution._config import AttributeConfig
from rmlens.attribution._regress import Design, explain, make_regressor
from rmlens.attribution._stability import NOISE_FITS, compare_importance


def shap_rows(reg: str, cfg: AttributeConfig) -> int:
    """How many pairs SHAP explains for regressor ``reg``."""
    return cfg.shap_rows if reg == "lightgbm" else cfg.mlp_shap_rows


def no_stability(why: str) -> dict:
    """The stability columns of a fit whose figures were not computed, and why."""
    return {"rank_spearman": np.nan, "top10_overlap": np.nan, "top10_half1": [],
            "top10_half2": [], "rank_spearman_noise": np.nan, "top10_overlap_noise": np.nan,
            "stability_note": f"not computed: {why}"}


def half_stability(target, reg, design, halves, note, cfg, n_rows, half_rows, noise) -> dict:
    """Fit ``reg`` and SHAP on each half's ``target``; compare the two importances, and
    give the same figures for fits to pure noise (``noise``: per regressor, cached).

    Both halves use the same pairs (finite in both), the same explained rows and the same
    background, so the rankings differ only through the targets.
    """
    ys = [pd.to_numeric(h[target], errors="coerce").to_numpy(dtype=float) for h in halves]
    keep = np.flatnonzero(np.isfinite(ys[0]) & np.isfinite(ys[1]))
    if len(keep) < 10 or not subset(design, keep).names:
        return no_stability(f"too few pairs with {target} in both halves ({len(keep)})")
    first, second = half_importances(reg, design, keep, [y[keep] for y in ys], cfg, n_rows)
    half_rows.extend({"target": target, "regressor": reg, "half": half, "feature": f,
                      "importance": float(v)}
                     for half, imp in ((1, first), (2, second)) for f, v in imp.items())
    if reg not in noise:
        noise[reg] = chance_level(reg, design, cfg, n_rows)
    return {**compare_importance(first, second),
            "rank_spearman_noise": noise[reg]["rank_spearman"],
            "top10_overlap_noise": noise[reg]["top10_overlap"], "stability_note": note}


def chance_level(reg, design, cfg, n_rows) -> dict:
    """The chance level of the figures: fits to ``NOISE_FITS`` pure-noise targets on all
    pairs, the mean of ``rank_spearman`` and ``top10_overlap`` over their pairs (see
    ``half_stability``)."""
    rng = np.random.default_rng([cfg.seed, 2])
    every = np.arange(len(design.X))
    pure = [rng.standard_normal(len(every)) for _ in range(NOISE_FITS)]
    imps = half_importances(reg, design, every, pure, cfg, n_rows)
    pairs = [compare_importance(imps[i], imps[j]) for i in range(len(imps))
             for j in range(i + 1, len(imps))]
    return {k: float(np.nanmean([p[k] for p in pairs])) for k in ("rank_spearman",
                                                                  "top10_overlap")}


def half_importances(reg, design, rows, ys, cfg, n_rows) -> list[pd.Series]:
    """Mean |SHAP| per feature of ``reg`` fit to each target of ``ys`` on ``design.X[rows]``,
    explained on the same sampled rows with the same background."""
    sub = subset(design, rows)
    rng = np.random.default_rng([cfg.seed, 1])
    explained = sample(rng, len(rows), n_rows)
    background = sample(rng, len(rows), cfg.shap_background)
    out = []
    for y in ys:
        model = fit_all(reg, sub, y, cfg)
        exp = explain(reg, model, sub, rows=explained, background=background, seed=cfg.seed)
        out.append(pd.Series(np.abs(exp.values).mean(axis=0), index=sub.names))
    return out


def subset(design: Design, rows: np.ndarray) -> Design:
    """``design`` on ``rows``, without the columns that are constant there."""
    X = design.X[rows]
    varying = np.array([np.unique(c[np.isfinite(c)]).size > 1 for c in X.T], dtype=bool) \
        if X.shape[1] else np.zeros(0, dtype=bool)
    names = [n for n, v in zip(design.names, varying) if v]
    return Design(X[:, varying], names, design.categorical[varying],
                  {n: c for n, c in design.categories.items() if n in names}, design.dropped)


def fit_all(kind: str, design: Design, y: np.ndarray, cfg: AttributeConfig):
    """Regressor ``kind`` fit on all rows of ``design``, its warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_regressor(kind, design, seed=cfg.seed, n_jobs=cfg.n_jobs).fit(design.X, y)


def sample(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """``k`` of ``n`` row indices drawn without replacement, sorted (all of them if k >= n)."""
    return np.sort(rng.choice(n, size=k, replace=False)) if k < n else np.arange(n)
