"""The memorization map: TM (x) against TG (y) density with marginal histograms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._png import empty_note, plot_to


def plot_memorization_map(table: pd.DataFrame, path: str | Path, *, title: str = "") -> Path:
    """Density of pairs over (TM, TG) in [0, 1]^2; CM = 0 is the diagonal.

    Rows with a missing or infinite TM or TG are left out; with none left the axes say so.

    Parameters
    ----------
    table : DataFrame
        Pairs with ``tm`` and ``tg`` columns (the memorization table).
    path : str or Path
        Where the PNG is written.
    title : str, default=""
        The figure's title; empty: "Memorization map (N pairs)".

    Returns
    -------
    Path
        ``path``.
    """
    from matplotlib.ticker import MaxNLocator

    tm = pd.to_numeric(table["tm"], errors="coerce").to_numpy(dtype=float)
    tg = pd.to_numeric(table["tg"], errors="coerce").to_numpy(dtype=float)
    keep = np.isfinite(tm) & np.isfinite(tg)
    tm, tg = tm[keep], tg[keep]  # (n_pairs,)
    with plot_to(path, size=(7, 7), layout=None) as fig:
        grid = fig.add_gridspec(
            2, 2, width_ratios=(4, 1), height_ratios=(1, 4), hspace=0.08, wspace=0.08
        )
        ax = fig.add_subplot(grid[1, 0])
        top = fig.add_subplot(grid[0, 0], sharex=ax)
        right = fig.add_subplot(grid[1, 1], sharey=ax)
        ax.plot([0, 1], [0, 1], color="crimson", lw=1, ls="--", label="CM = 0")
        ax.set(
            xlim=(0, 1),
            ylim=(0, 1),
            xlabel="TM (trained on the pair)",
            ylabel="TG (held out from the pair)",
        )
        ax.legend(loc="lower right")
        top.tick_params(labelbottom=False)
        right.tick_params(labelleft=False)
        # the histograms' counts: few ticks, none at 0, where their labels would run into the
        # main axes' "1.0" at the shared corner
        top.yaxis.set_major_locator(MaxNLocator(nbins=3, integer=True, prune="lower"))
        right.xaxis.set_major_locator(MaxNLocator(nbins=2, integer=True, prune="lower"))
        top.set_title(title or f"Memorization map ({len(tm)} pairs)")
        if len(tm) == 0:  # hexbin's log colour scale has no range to show
            empty_note(ax, "no pair has both TM and TG")
        else:
            hb = ax.hexbin(
                tm, tg, gridsize=40, extent=(0, 1, 0, 1), bins="log", cmap="viridis", mincnt=1
            )
            bins = np.linspace(0, 1, 41)
            top.hist(tm, bins=bins, color="steelblue")
            right.hist(tg, bins=bins, color="steelblue", orientation="horizontal")
            fig.colorbar(hb, ax=right, label="pairs (log)")
    return Path(path)
