"""PNGs of a comparison: one dot-and-interval plot per metric family, CM by margin tercile,
and the agreement between audits beside its ceiling. Drawn through ``rmlens._png``
(atomic, no pyplot state)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._png import empty_note, plot_to
from rmlens.comparison import metrics as M


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def plot_family(figures: pd.DataFrame, family: str, audits: list[str], path: Path) -> Path:
    """One panel per metric of ``family``: each audit's value (dot) and interval (line)."""
    rows = figures[figures.family == family]
    few = rows.groupby("metric").few_pairs.all() if "few_pairs" in rows else pd.Series([])
    left_out = sorted(m for m, all_few in few.items() if all_few)  # a slice of a pair or two
    rows = rows[~rows.metric.isin(left_out)]
    metrics = sorted(rows.metric.unique(), key=lambda m: (M.order(m), m))
    colors = dict(zip(audits, _colors(len(audits))))
    audits = [a for a in audits if (rows.audit == a).any()]  # e.g. no probes for a reference
    n = max(len(metrics), 1)
    size = (7.5, 0.35 * len(audits) * n + 0.9 * n + 0.6)
    with plot_to(path, size=size, layout="constrained") as fig:
        axes = np.atleast_1d(fig.subplots(n, 1, squeeze=False)[:, 0])
        for ax, metric in zip(axes, metrics or [None]):
            if metric is None:
                empty_note(ax)
                continue
            part = rows[rows.metric == metric].set_index("audit").reindex(audits)
            y = np.arange(len(audits))[::-1]
            for k, row in enumerate(part.itertuples()):
                color = colors[audits[k]]
                if bool(getattr(row, "few_pairs", False)):  # too few pairs: a grey ring
                    if np.isfinite(row.value):
                        ax.plot(row.value, y[k], "o", mfc="none", mec="#9aa1ad", ms=6)
                    continue
                if np.isfinite(row.lo) and np.isfinite(row.hi):
                    ax.plot([row.lo, row.hi], [y[k], y[k]], color=color, lw=2)
                if np.isfinite(row.value):
                    ax.plot(row.value, y[k], "o", color=color, ms=6)
            if metric in M.ACCURACY_METRICS:
                ax.axvline(M.CHANCE, color="grey", ls="--", lw=1)
            elif "spearman" in metric or metric.startswith("cm_") or metric in M.DIFFERENCES:
                ax.axvline(0, color="grey", ls=":", lw=1)
            ax.set_yticks(y, [str(a) for a in audits])
            ax.set_ylim(-0.7, len(audits) - 0.3)
            ax.set_title(M.label(metric), loc="left", fontsize=10)
            ax.grid(axis="x", alpha=0.3)
        title = (f"{M.FAMILIES.get(family, family)} (dots: value; lines: bootstrap interval "
                 "over runs)")
        if left_out:
            shown = ", ".join(f"{M.label(m)} (n {int(figures[figures.metric == m].n.max())})"
                              for m in left_out)  # fmt: skip
            title += f"\nnot drawn, too few pairs: {shown}"
        if "few_pairs" in rows and rows.few_pairs.any():
            title += "\ngrey rings: too few pairs (no interval)"
        fig.suptitle(title, fontsize=10)
    return path


def plot_cm_by_margin(figures: pd.DataFrame, audits: list[str], path: Path) -> Path:
    """Mean CM per margin tercile, one line per audit, with intervals."""
    names = ["cm_margin_low", "cm_margin_mid", "cm_margin_high"]
    colors = _colors(len(audits))
    with plot_to(path, size=(6.5, 4.2)) as fig:
        ax = fig.subplots()
        drawn = False
        for k, audit in enumerate(audits):
            part = figures[(figures.audit == audit) & figures.metric.isin(names)]
            part = part.set_index("metric").reindex(names)
            if not np.isfinite(part.value.to_numpy(float)).any():
                continue
            x = np.arange(3) + (k - (len(audits) - 1) / 2) * 0.06
            lo, hi = part.lo.to_numpy(float), part.hi.to_numpy(float)
            v = part.value.to_numpy(float)
            err = np.vstack([v - lo, hi - v])
            err = np.where(np.isfinite(err), err, 0)
            ax.errorbar(x, v, yerr=err, marker="o", capsize=3, color=colors[k], label=audit)
            drawn = True
        if not drawn:
            empty_note(ax, "no margin column")
        else:
            ax.legend(loc="best")
        ax.axhline(0, color="grey", ls=":", lw=1)
        ax.set_xticks(range(3), ["low", "mid", "high"])
        ax.set_xlabel("margin tercile")
        ax.set_ylabel("mean CM = TM - TG")
        ax.set_title("Memorization by preference margin")
    return path


def plot_agreement(agreement: pd.DataFrame, path: Path) -> Path:
    """Spearman between audits per score (bars) and its ceiling (ticks)."""
    n_pairs = max(1, agreement[["audit_a", "audit_b"]].drop_duplicates().shape[0])
    with plot_to(path, size=(7.5, 1.6 + 0.9 * n_pairs)) as fig:
        ax = fig.subplots()
        if agreement.empty:
            empty_note(ax, "one audit: nothing to agree with")
            return path
        pairs = agreement[["audit_a", "audit_b"]].drop_duplicates().to_numpy().tolist()
        colors = {"tm": "#3b6fb6", "tg": "#2e9e5b", "cm": "#c8433a"}
        for i, (a, b) in enumerate(pairs):
            for k, score in enumerate(("tm", "tg", "cm")):
                row = agreement[(agreement.audit_a == a) & (agreement.audit_b == b)
                                & (agreement.score == score)]  # fmt: skip
                if row.empty:
                    continue
                row = row.iloc[0]
                y = i + (k - 1) * 0.25
                ax.barh(y, row.spearman, height=0.22, color=colors[score],
                        label=score.upper() if i == 0 else None)  # fmt: skip
                if np.isfinite(row.ceiling):
                    ax.plot([row.ceiling] * 2, [y - 0.12, y + 0.12], color="black", lw=2.5)
        ax.set_yticks(range(len(pairs)), [f"{a} vs {b}" for a, b in pairs])
        ax.invert_yaxis()
        values = agreement.spearman.to_numpy(float)
        low = float(values[np.isfinite(values)].min()) if np.isfinite(values).any() else 0.0
        ax.set_xlim(min(0.0, low) - 0.05, 1.05)
        ax.set_xlabel("Spearman across common pairs (black tick: ceiling sqrt(rel_a rel_b))")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.set_title("Agreement between audits")
    return path
