"""Attribution plots as PNG (matplotlib Agg): importance bars, SHAP beeswarms, TM-vs-TG."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from rmlens._io import write_bytes


def _figure(n_rows: int, n_cols: int, width: float, height: float):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width * n_cols, height * n_rows),
                             squeeze=False)
    return plt, fig, axes


def _save(plt, fig, path: Path) -> Path:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return write_bytes(buf.getvalue(), path)


def plot_importance(importance: pd.DataFrame, path: str | Path, *, top: int = 15) -> Path:
    """Mean |SHAP| bars, one panel per (regressor, target), ``top`` features each."""
    regressors = list(dict.fromkeys(importance.regressor))
    targets = list(dict.fromkeys(importance.target))
    plt, fig, axes = _figure(len(regressors), len(targets), 4.6, 0.28 * top + 1.2)
    for i, reg in enumerate(regressors):
        for j, target in enumerate(targets):
            ax = axes[i][j]
            rows = importance[(importance.regressor == reg) & (importance.target == target)]
            rows = rows.nlargest(top, "importance").iloc[::-1]
            ax.barh(rows.feature, rows.importance, color="#3b6ea5")
            ax.set_title(f"{target.upper()} - {reg}")
            ax.set_xlabel("mean |SHAP|")
            ax.tick_params(axis="y", labelsize=7)
    return _save(plt, fig, Path(path))


def plot_beeswarm(explanations: dict, regressor: str, path: str | Path, *, top: int = 15) -> Path:
    """SHAP beeswarm per target for one regressor (color: feature value, low to high)."""
    import shap

    targets = [t for (t, r) in explanations if r == regressor]
    plt, fig, axes = _figure(1, len(targets), 6.0, 0.35 * top + 1.5)
    for j, target in enumerate(targets):
        ax = axes[0][j]
        shap.plots.beeswarm(explanations[(target, regressor)], max_display=top, ax=ax,
                            show=False, plot_size=None, color_bar=j == len(targets) - 1)
        ax.set_title(f"{target.upper()} - {regressor}")
        ax.tick_params(axis="y", labelsize=7)
    return _save(plt, fig, Path(path))


def plot_diff(diff: pd.DataFrame, path: str | Path, *, top: int = 15) -> Path:
    """TM minus TG importance per regressor: right = used for memorization, left = for
    generalization."""
    regressors = list(dict.fromkeys(diff.regressor))
    plt, fig, axes = _figure(1, len(regressors), 5.0, 0.28 * top + 1.2)
    for j, reg in enumerate(regressors):
        ax = axes[0][j]
        rows = diff[diff.regressor == reg]
        rows = rows.loc[rows["diff"].abs().nlargest(top).index].sort_values("diff")
        colors = ["#b5473a" if d > 0 else "#3b6ea5" for d in rows["diff"]]
        ax.barh(rows.feature, rows["diff"], color=colors)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_title(f"TM - TG importance - {reg}")
        ax.set_xlabel("mean |SHAP| on TM minus on TG")
        ax.tick_params(axis="y", labelsize=7)
    return _save(plt, fig, Path(path))
