"""Evaluation plots: reliability diagram, reward distribution, probe flip rates, reward by
length."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._png import plot_to


def plot_reliability(
    bins: list[dict],
    path: str | Path,
    *,
    ece: float,
    after: list[dict] | None = None,
    after_ece: float | None = None,
) -> Path:
    """Accuracy against confidence per equal-mass bin; the diagonal is perfect calibration."""
    with plot_to(path, size=(5.5, 5.5), layout=None) as fig:
        ax = fig.subplots()
        ax.plot([0.5, 1], [0.5, 1], color="grey", ls="--", lw=1, label="perfect calibration")
        frame = pd.DataFrame(bins)
        if not frame.empty:
            size = 30 + 170 * frame.n / frame.n.max()
            ax.plot(frame.confidence, frame.accuracy, color="steelblue", lw=1)
            ax.scatter(frame.confidence, frame.accuracy, s=size, color="steelblue",
                       label=f"RM (ECE {ece:.3f})", zorder=3)  # fmt: skip
        if after:
            fa = pd.DataFrame(after)
            ax.plot(fa.confidence, fa.accuracy, color="darkorange", lw=1, marker="o",
                    label=f"temperature-scaled (ECE {after_ece:.3f}, held-out part)")  # fmt: skip
        ax.set(xlim=(0.48, 1.01), ylim=(-0.02, 1.02), xlabel="confidence max(p, 1 - p)",
               ylabel="accuracy of the pick", title="Reliability (equal-mass bins)")  # fmt: skip
        ax.legend(loc="lower right", fontsize=8)
    return Path(path)


def plot_rewards(r_chosen, r_rejected, path: str | Path) -> Path:
    """Histograms of chosen and rejected rewards and of the margin r+ - r-."""
    c, r = np.asarray(r_chosen, dtype=float), np.asarray(r_rejected, dtype=float)
    with plot_to(path, size=(10, 3.8), layout=None) as fig:
        left, right = fig.subplots(1, 2)
        both = np.concatenate([c, r])
        edges = np.histogram_bin_edges(both if both.size else [0, 1], bins=40)
        left.hist(c, bins=edges, alpha=0.6, color="seagreen", label="chosen")
        left.hist(r, bins=edges, alpha=0.6, color="indianred", label="rejected")
        left.set(xlabel="reward", ylabel="responses", title="Rewards")
        left.legend()
        right.hist(c - r, bins=40, color="steelblue")
        right.axvline(0, color="black", lw=1)
        right.set(xlabel="r+ - r-", ylabel="pairs", title="Margins (right of 0: correct)")
    return Path(path)


def plot_probes(table: pd.DataFrame, path: str | Path) -> Path:
    """Flip rate per probe, one bar per edited side, with its 95% interval when the table
    has one (``flip_rate_lo``, ``flip_rate_hi``)."""
    probes = list(dict.fromkeys(table.probe))
    y = np.arange(len(probes))
    with plot_to(path, size=(7, 0.45 * len(probes) + 1.5), layout=None) as fig:
        ax = fig.subplots()
        colors = {"chosen": "seagreen", "rejected": "indianred"}
        sides = list(dict.fromkeys(table.side))
        height = 0.8 / max(len(sides), 1)
        for k, side in enumerate(sides):
            part = table[table.side == side].set_index("probe").reindex(probes)
            rate = part.flip_rate.fillna(0)
            xerr = None
            if {"flip_rate_lo", "flip_rate_hi"} <= set(part.columns):
                xerr = np.vstack([rate - part.flip_rate_lo, part.flip_rate_hi - rate])
                xerr = np.nan_to_num(xerr).clip(min=0)
            ax.barh(y + k * height, rate, height=height, xerr=xerr, capsize=2,
                    error_kw={"elinewidth": 0.8, "ecolor": "#333"},
                    color=colors.get(side, "grey"), label=f"edit on {side}")  # fmt: skip
        ax.set_yticks(y + height * (len(sides) - 1) / 2, probes)
        ax.invert_yaxis()
        ax.set(xlabel="flip rate (share of pairs whose preference flips; 95% interval)",
               title="Shortcut probes")  # fmt: skip
        ax.legend(fontsize=8)
    return Path(path)


def plot_length(lengths, raw, calibrated, calibrator, path: str | Path) -> Path:
    """Reward against response length before (with the fitted f) and after calibration."""
    x = np.asarray(lengths, dtype=float)
    with plot_to(path, size=(10, 3.8), layout=None) as fig:
        left, right = fig.subplots(1, 2, sharex=True)
        grid = np.linspace(x.min(), x.max(), 200) if x.size else np.zeros(0)
        for ax, y, title in ((left, raw, "Raw reward"), (right, calibrated, "Calibrated")):
            ax.scatter(x, y, s=4, alpha=0.25, color="steelblue", linewidths=0)
            ax.set(xlabel="response length (characters)", ylabel="reward", title=title)
            ax.set_xscale("symlog", linthresh=10)
        left.plot(grid, calibrator.bias(grid), color="darkorange", lw=2, label="LOWESS f(length)")
        right.axhline(0, color="darkorange", lw=1)
        left.legend(loc="best")
    return Path(path)
