"""The memorization map: TM (x) against TG (y) density with marginal histograms."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from rmlens._io import write_atomic  # noqa: E402


def plot_memorization_map(table: pd.DataFrame, path: str | Path, *, title: str = "") -> Path:
    """Density of pairs over (TM, TG) in [0, 1]^2; CM = 0 is the diagonal."""
    data = table.dropna(subset=["tm", "tg"])
    fig = plt.figure(figsize=(7, 7))
    grid = fig.add_gridspec(
        2, 2, width_ratios=(4, 1), height_ratios=(1, 4), hspace=0.05, wspace=0.05
    )
    ax = fig.add_subplot(grid[1, 0])
    top = fig.add_subplot(grid[0, 0], sharex=ax)
    right = fig.add_subplot(grid[1, 1], sharey=ax)
    hb = ax.hexbin(
        data.tm, data.tg, gridsize=40, extent=(0, 1, 0, 1), bins="log", cmap="viridis", mincnt=1
    )
    ax.plot([0, 1], [0, 1], color="crimson", lw=1, ls="--", label="CM = 0")
    ax.set(
        xlim=(0, 1),
        ylim=(0, 1),
        xlabel="TM (trained on the pair)",
        ylabel="TG (held out from the pair)",
    )
    ax.legend(loc="lower right")
    bins = np.linspace(0, 1, 41)
    top.hist(data.tm, bins=bins, color="steelblue")
    right.hist(data.tg, bins=bins, color="steelblue", orientation="horizontal")
    top.tick_params(labelbottom=False)
    right.tick_params(labelleft=False)
    top.set_title(title or f"Memorization map ({len(data)} pairs)")
    fig.colorbar(hb, ax=right, label="pairs (log)")

    def save(tmp: Path) -> None:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")

    write_atomic(path, save)
    plt.close(fig)
    return Path(path)
