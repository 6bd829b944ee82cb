"""Plot of the comparison: accuracy and normalized margin per split, EX-RM vs IM-RM."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._png import plot_to

COLORS = {"explicit": "#1f77b4", "implicit": "#ff7f0e"}


def plot_generalization(table: pd.DataFrame, path: str | Path) -> Path:
    """Grouped bars: one group per split, one bar per RM; chance accuracy dashed.

    Parameters
    ----------
    table : DataFrame
        One row per RM and split: ``split``, ``rm``, ``accuracy`` and ``norm_margin``
        (as :func:`generalize` returns it).
    path : str or Path
        Where the PNG is written.

    Returns
    -------
    Path
        ``path``.
    """
    splits = list(dict.fromkeys(table.split))
    rms = list(dict.fromkeys(table.rm))
    x = np.arange(len(splits))
    width = 0.8 / max(len(rms), 1)
    with plot_to(path, size=(max(8, 1.6 * len(splits) + 4), 4.2), layout=None) as fig:
        axes = fig.subplots(1, 2)
        for ax, metric, label in (
            (axes[0], "accuracy", "accuracy (ties 1/2)"),
            (axes[1], "norm_margin", "|r+ - r-| / std(r)"),
        ):
            for i, rm in enumerate(rms):
                part = table[table.rm == rm].set_index("split").reindex(splits)
                ax.bar(
                    x + (i - (len(rms) - 1) / 2) * width,
                    part[metric],
                    width,
                    label=f"{rm} RM",
                    color=COLORS.get(rm),
                )
            ax.set_xticks(x, splits, rotation=30, ha="right", fontsize=8)
            ax.set_ylabel(label)
        axes[0].axhline(0.5, color="grey", ls="--", lw=1)
        axes[0].set_ylim(0, 1)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=len(rms), fontsize=8, frameon=False)
        axes[0].set_title("accuracy by split")
        axes[1].set_title("normalized absolute margin")
        fig.tight_layout(rect=(0, 0, 1, 0.94))  # room for the legend above the panels
    return Path(path)
