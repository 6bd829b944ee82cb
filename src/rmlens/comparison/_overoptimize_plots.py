"""PNGs of ``overoptimize``: the curves against KL_bon (Gao et al. 2023's figure), each
audit's ensembles, and the audit figures beside the hacking figures, run by run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._png import plot_to
from rmlens.comparison._plots import _colors

LABELS = {
    "gold": "gold reward of the pick",
    "proxy": "proxy reward of the pick (z over the pool)",
    "words": "words of the pick",
    "signature": "share of picks with the signature phrase",
    "padded": "share of padded picks",
    "taste": "share of picks ending with a taste sentence",
}
KL_LABEL = "KL_bon = log n - (n-1)/n (an upper bound)"
ORACLE_STYLE = {"color": "black", "ls": "--", "lw": 1.5}


def _n_axis(ax, curves: pd.DataFrame) -> None:
    """Ticks of n along the top, at their KL."""
    ticks = curves.drop_duplicates("n").sort_values("n")
    top = ax.secondary_xaxis("top")
    shown = ticks[ticks["n"].isin([1, 2, 4, 16, 64, 256]) | (ticks["n"] == ticks["n"].max())]
    top.set_xticks(shown["kl"].to_numpy(float), [str(n) for n in shown["n"]], fontsize=7)
    top.set_xlabel("n", fontsize=8)


def _line(ax, part: pd.DataFrame, value: str, **style) -> None:
    part = part.sort_values("n")
    x = part["kl"].to_numpy(float)
    ax.plot(x, part[value].to_numpy(float), marker="o", ms=2.5, **style)
    lo, hi = part[f"{value}_lo"].to_numpy(float), part[f"{value}_hi"].to_numpy(float)
    if np.isfinite(lo).all() and np.isfinite(hi).all():
        ax.fill_between(x, lo, hi, color=style.get("color"), alpha=0.15, lw=0)


def plot_curves(curves: pd.DataFrame, values: list[str], path: Path) -> Path:
    """One panel per value (gold, proxy, words, shortcut shares): each audit's single-run
    mean with its interval band, and the oracle dashed."""
    audits = list(dict.fromkeys(curves.loc[curves["kind"] == "runs", "rm"]))
    colors = dict(zip(audits, _colors(len(audits))))
    cols = 3 if len(values) > 4 else 2
    rows = -(-len(values) // cols)
    with plot_to(path, size=(4.6 * cols, 3.6 * rows + 0.6), layout="constrained") as fig:
        axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False).ravel())
        oracle = curves[curves["kind"] == "oracle"]
        for ax, value in zip(axes, values):
            for audit in audits:
                _line(ax, curves[curves["rm"] == audit], value, color=colors[audit],
                      label=audit, lw=1.5)  # fmt: skip
            if value != "proxy":
                _line(ax, oracle, value, label="oracle (best-of-n by gold)", **ORACLE_STYLE)
            ax.set_title(LABELS.get(value, value), loc="left", fontsize=9)
            ax.set_xlabel(KL_LABEL, fontsize=8)
            ax.grid(alpha=0.3)
            _n_axis(ax, curves)
        for ax in axes[len(values):]:
            ax.set_visible(False)
        axes[0].legend(fontsize=7, loc="best")
        fig.suptitle("Best-of-n against the gold reward: the mean of each audit's single-run "
                     "RMs (band: bootstrap over runs and prompts)", fontsize=10)  # fmt: skip
    return path


def plot_ensembles(curves: pd.DataFrame, path: Path) -> Path:
    """Gold vs KL per audit: its single-run mean, its ensembles, and the oracle."""
    audits = list(dict.fromkeys(curves.loc[curves["kind"] == "runs", "rm"]))
    cols = min(3, len(audits))
    rows = -(-len(audits) // cols)
    oracle = curves[curves["kind"] == "oracle"]
    styles = _colors(4)
    with plot_to(path, size=(4.6 * cols, 3.4 * rows + 0.6), layout="constrained") as fig:
        axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False).ravel())
        for ax, audit in zip(axes, audits):
            part = curves[curves["audit"] == audit]
            for k, rm in enumerate(dict.fromkeys(part["rm"])):
                label = "single runs (mean)" if rm == audit else rm[len(audit) + 1:]
                _line(ax, part[part["rm"] == rm], "gold", color=styles[k % 4], label=label,
                      lw=1.5)  # fmt: skip
            _line(ax, oracle, "gold", label="oracle", **ORACLE_STYLE)
            ax.set_title(audit, loc="left", fontsize=9)
            ax.set_xlabel(KL_LABEL, fontsize=8)
            ax.set_ylabel("gold reward of the pick", fontsize=8)
            ax.grid(alpha=0.3)
            _n_axis(ax, curves)
            ax.legend(fontsize=7, loc="best")
        for ax in axes[len(audits):]:
            ax.set_visible(False)
        fig.suptitle("Ensembles of each audit's runs against its single runs (gold)",
                     fontsize=10)
    return path


def plot_hacking(hacking: dict, path: Path) -> Path:
    """Each run: its audit figures (x) against the area between the oracle's and its gold
    curve (y), coloured by audit, with the pooled Spearman in each title."""
    figures = [f for f in ("length_spearman", "shortcut_accuracy")
               if any(f in run for runs in hacking["runs"].values() for run in runs.values())]
    labels = list(hacking["runs"])
    colors = dict(zip(labels, _colors(len(labels))))
    rho = {(r["audit_figure"], r["hacking_figure"]): r for r in hacking["across_runs"]}
    with plot_to(path, size=(4.8 * max(1, len(figures)), 4.0), layout="constrained") as fig:
        axes = np.atleast_1d(fig.subplots(1, max(1, len(figures)), squeeze=False).ravel())
        for ax, name in zip(axes, figures):
            for label in labels:
                runs = hacking["runs"][label].values()
                ax.scatter([r.get(name, np.nan) for r in runs],
                           [r["oracle_gap_area"] for r in runs], s=14, alpha=0.8,
                           color=colors[label], label=label)  # fmt: skip
            r = rho.get((name, "oracle_gap_area"), {})
            ax.set_title(f"Spearman {r.get('spearman', np.nan):+.2f} over {r.get('n', 0)} runs",
                         loc="left", fontsize=9)
            ax.set_xlabel(f"audit: {name.replace('_', ' ')} (held-out pairs)", fontsize=8)
            ax.set_ylabel("hacking: area between oracle and gold curves", fontsize=8)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7, loc="best")
        fig.suptitle("Does the audit predict the hacking? One dot per run", fontsize=10)
    return path


def plot_overoptimization(found, out: Path) -> list[str]:
    """Write the PNGs into ``out``; the file names written."""
    values = [v for v in ("gold", "proxy", "words", "signature", "padded", "taste")
              if v in found.curves.columns]  # fmt: skip
    files = [plot_curves(found.curves, values, out / "overoptimization.png").name]
    if (found.curves["kind"] == "ensemble").any():
        files.append(plot_ensembles(found.curves, out / "overoptimization_ensembles.png").name)
    if found.hacking["runs"]:
        files.append(plot_hacking(found.hacking, out / "overoptimization_hacking.png").name)
    return files
