"""Best-of-n overoptimization of the audit's RMs (``rmlens overoptimize`` or ``mitigate
--candidates``): gold and proxy against KL_bon for its single runs, its ensembles and the
oracle, and their summary figures."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._html import esc, figure_div, interval_text, num_list, plotly_text, table
from ._base import Section, bar_layout

COLORS = ("#3b6fb6", "#d9822b", "#3a9a5b", "#b8403a")
KL_TITLE = "KL_bon = log n - (n-1)/n (an upper bound)"


def _figure(div: str, curves: pd.DataFrame, value: str, title: str) -> dict[str, Any]:
    data = []
    for k, (rm, part) in enumerate(curves.groupby("rm", sort=False)):
        part = part.sort_values("n")
        oracle = rm == "oracle"
        if oracle and value == "proxy":
            continue
        line = {"color": "black", "dash": "dash"} if oracle else {"color": COLORS[k % 4]}
        x = num_list(part["kl"])
        lo, hi = part.get(f"{value}_lo"), part.get(f"{value}_hi")
        if lo is not None and lo.notna().all() and hi.notna().all():
            data.append({"type": "scatter", "x": x + x[::-1],
                         "y": num_list(hi) + num_list(lo)[::-1], "fill": "toself",
                         "line": {"width": 0}, "fillcolor": "rgba(120,120,120,0.15)",
                         "hoverinfo": "skip", "showlegend": False})  # fmt: skip
        data.append({"type": "scatter", "mode": "lines+markers", "name": plotly_text(rm),
                     "x": x, "y": num_list(part[value]), "line": line,
                     "text": [f"n = {n}" for n in part["n"]],
                     "hovertemplate": "%{text}: %{y:.3f}<extra></extra>"})  # fmt: skip
    layout = bar_layout(320, title={"text": plotly_text(title)},
                        xaxis={"title": {"text": KL_TITLE}},
                        yaxis={"title": {"text": plotly_text(value)}, "automargin": True})
    return {"id": div, "figure": {"data": data, "layout": layout}}


def overoptimization_section(summary: list[dict], curves: pd.DataFrame | None,
                             source: str) -> Section | None:  # fmt: skip
    """The audit's rows of an overoptimization: summary table and gold/proxy curves."""
    if not summary:
        return None
    n_max = int(curves["n"].max()) if curves is not None and len(curves) else None
    rows = [{"RM": r.get("rm"), "gold at largest n": interval_text(r, "gold_at_max_n"),
             "peak n": r.get("peak_n"), "drop from peak": interval_text(r, "gold_drop"),
             "area to oracle": interval_text(r, "oracle_gap_area"),
             "Spearman(proxy, gold)": interval_text(r, "spearman")} for r in summary]  # fmt: skip
    body = (f'<p class="note">From <code>{esc(source)}</code>: this audit\'s RMs pick the best of '
            f"n candidates (n up to {esc(n_max)}) of a pool with a known gold reward; the "
            "expected gold and proxy (standardized) reward of the pick are exact, against "
            "KL_bon. Bands: bootstrap over runs and prompts. Dashed: the oracle, which picks "
            "by gold.</p>")  # fmt: skip
    body += table(pd.DataFrame(rows))
    figures = []
    if curves is not None and len(curves):
        for value, title in (("gold", "gold reward of the pick"),
                             ("proxy", "proxy reward of the pick (z over the pool)")):  # fmt: skip
            div = f"overopt-{value}"
            body += figure_div(div, 320)
            figures.append(_figure(div, curves, value, title))
    return Section("overoptimization", "Best-of-n overoptimization", body, figures)

