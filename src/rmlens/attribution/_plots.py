"""Attribution plots as PNG: importance bars, SHAP beeswarms, TM-vs-TG.

With the fit table, each panel's title gives its held-out R^2 and says when the fit is not
informative (R^2 below ``R2_FLOOR``); such a panel's bars are grey.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._png import plot_to
from rmlens.attribution._informative import informative, r2_title


def _r2(fit: pd.DataFrame | None) -> dict:
    """(target, regressor) -> held-out R^2 of the fit table (empty without one)."""
    if fit is None or "r2" not in fit.columns:
        return {}
    return {(str(t), str(r)): float(v) for t, r, v in zip(fit.target, fit.regressor, fit.r2)}


def plot_importance(importance: pd.DataFrame, path: str | Path, *, top: int = 15,
                    fit: pd.DataFrame | None = None) -> Path:
    """Mean |SHAP| bars, one panel per (regressor, target), ``top`` features each; ``fit``
    (``Attributor.fit_``) puts the held-out R^2 in the titles."""
    r2 = _r2(fit)
    regressors = list(dict.fromkeys(importance.regressor))
    targets = list(dict.fromkeys(importance.target))
    size = (4.6 * len(targets), (0.28 * top + 1.2) * len(regressors))
    with plot_to(path, size=size) as fig:
        axes = fig.subplots(len(regressors), len(targets), squeeze=False)
        for i, reg in enumerate(regressors):
            for j, target in enumerate(targets):
                ax = axes[i][j]
                rows = importance[(importance.regressor == reg) & (importance.target == target)]
                rows = rows.nlargest(top, "importance").iloc[::-1]
                score = r2.get((str(target), str(reg)))
                useful = score is None or informative(score)
                ax.barh(rows.feature, rows.importance, color="#3b6ea5" if useful else "#b0b0b0")
                ax.set_title(r2_title(target, reg, score))
                ax.set_xlabel("mean |SHAP|")
                ax.tick_params(axis="y", labelsize=7)
    return Path(path)


def plot_beeswarm(explanations: dict, regressor: str, path: str | Path, *, top: int = 15,
                  fit: pd.DataFrame | None = None) -> Path:
    """SHAP beeswarm per target for one regressor (color: feature value, low to high);
    ``fit`` (``Attributor.fit_``) puts the held-out R^2 in the titles."""
    import shap

    r2 = _r2(fit)
    targets = [t for (t, r) in explanations if r == regressor]
    with plot_to(path, size=(6.0 * len(targets), 0.35 * top + 1.5)) as fig:
        axes = fig.subplots(1, len(targets), squeeze=False)
        for j, target in enumerate(targets):
            ax = axes[0][j]
            with _seeded_numpy():  # shap jitters the dots with numpy's global generator
                shap.plots.beeswarm(explanations[(target, regressor)], max_display=top, ax=ax,
                                    show=False, plot_size=None, color_bar=j == len(targets) - 1)
            ax.set_title(r2_title(target, regressor, r2.get((str(target), str(regressor)))))
            ax.tick_params(axis="y", labelsize=7)
    return Path(path)


@contextmanager
def _seeded_numpy(seed: int = 0):
    """Numpy's global generator seeded for the block, its state restored after: the same
    explanations draw the same beeswarm, and the caller's random stream is left alone."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def plot_diff(diff: pd.DataFrame, path: str | Path, *, top: int = 15) -> Path:
    """TM minus TG importance per regressor: right = used for memorization, left = for
    generalization."""
    from matplotlib.ticker import MaxNLocator

    regressors = list(dict.fromkeys(diff.regressor))
    with plot_to(path, size=(5.0 * len(regressors), 0.28 * top + 1.2)) as fig:
        axes = fig.subplots(1, len(regressors), squeeze=False)
        for j, reg in enumerate(regressors):
            ax = axes[0][j]
            rows = diff[diff.regressor == reg]
            rows = rows.loc[rows["diff"].abs().nlargest(top).index].sort_values("diff")
            colors = ["#b5473a" if d > 0 else "#3b6ea5" for d in rows["diff"]]
            ax.barh(rows.feature, rows["diff"], color=colors)
            ax.axvline(0, color="black", linewidth=0.8)
            ax.set_title(f"TM - TG importance - {reg}")
            ax.set_xlabel("mean |SHAP| on TM minus on TG")
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4))  # small diffs: long labels
            ax.tick_params(axis="y", labelsize=7)
    return Path(path)
