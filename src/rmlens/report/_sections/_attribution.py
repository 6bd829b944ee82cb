"""Attribution: feature importance per regressor and target, and its stability."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rmlens.attribution import (
    ABOVE_CHANCE,
    MEANINGLESS,
    R2_FLOOR,
    WARN_BELOW,
    fit_warnings,
    informative,
    informative_column,
    not_informative,
    stability_warnings,
)

from .._html import esc, figure_div, fmt, num_list, plotly_text, prose, table, warning_box
from ._base import Section, bar_layout

_TOP = 5  # top features listed per fit
_TARGET_ORDER = {"tm": 0, "tg": 1, "cm": 2}
_TARGET_COLORS = {"tm": "#3b6fb6", "tg": "#2e9e5b", "cm": "#c8433a"}


def attribution_section(imp: pd.DataFrame | None, fit: pd.DataFrame | None) -> Section | None:
    """Feature importance bars per regressor and target, with held-out R^2; a fit whose
    held-out R^2 is below the floor (``R2_FLOOR``) is warned about and not ranked."""
    if imp is None and fit is None:
        return None
    body = (
        '<p class="note">Which pair features explain TM, TG and CM. A feature much more '
        "important for TM than for TG is one the reward models use to memorize rather than "
        "to generalize. A fit whose held-out R\u00b2 is below "
        f"{R2_FLOOR:g} explains nothing: its features are not ranked.</p>"
    )
    figures: list[dict[str, Any]] = []
    r2: dict[tuple[str, str], Any] = {}
    if fit is not None and {"target", "regressor", "r2"} <= set(fit.columns):
        r2 = {(str(t), str(g)): v for t, g, v in zip(fit.target, fit.regressor, fit.r2)}
    if fit is not None:
        for warning in fit_warnings(fit):
            body += warning_box(warning[0].upper() + warning[1:] + ".")
        body += "<h3>Held-out R\u00b2</h3>" + table(_fit_table(fit, imp))
        body += _stability_block(fit)
    if imp is not None:
        useless = {key for key, v in r2.items() if not informative(v)}
        keys = zip(imp.target.astype(str), imp.regressor.astype(str))
        shown = imp[[key not in useless for key in keys]]
        for k, (regressor, part) in enumerate(shown.groupby("regressor", sort=True)):
            div, height, figure = _importance_figure(k, regressor, part, r2)
            body += figure_div(div, height)
            figures.append({"id": div, "figure": figure})
        if useless:
            listed = ", ".join(f"{t.upper()} - {g}" for t, g in sorted(useless))
            body += f'<p class="note">Not shown, not informative: {esc(listed)}.</p>'
    return Section("attribution", "Attribution", body, figures)


def _fit_table(fit: pd.DataFrame, imp: pd.DataFrame | None) -> pd.DataFrame:
    """The fit table without the stability columns, ``informative`` (from ``r2``) after
    ``r2_std`` and the top features, or why a fit's features are not ranked."""
    out = fit[[c for c in fit.columns if c not in (*_STABILITY_COLUMNS, "informative")]].copy()
    ok = informative_column(fit)
    out.insert(min(4, len(out.columns)), "informative", ok)
    if imp is not None and "r2" in fit.columns:
        top = []
        for (_, row), useful in zip(fit.iterrows(), ok):
            rows = imp[(imp.target == row["target"]) & (imp.regressor == row["regressor"])]
            ranked = rows.nlargest(_TOP, "importance").feature.astype(str)
            top.append(", ".join(ranked) if useful else not_informative(row["r2"]))
        out[f"top {_TOP} features"] = top
    return out


def _importance_figure(
    k: int, regressor: Any, part: pd.DataFrame, r2: dict[tuple[str, str], Any]
) -> tuple[str, int, dict[str, Any]]:
    """One regressor's bars: the 20 most important features, one bar per target."""
    pivot = part.pivot_table(index="feature", columns="target", values="importance", aggfunc="mean")
    top = pivot.abs().max(axis=1).sort_values(ascending=False).index[:20]
    pivot = pivot.loc[top[::-1]]
    targets = sorted(pivot.columns, key=lambda t: _TARGET_ORDER.get(str(t).lower(), 9))
    data = []
    for target in targets[::-1]:
        score = r2.get((str(target), str(regressor)))
        name = str(target).upper()
        if score is not None:
            name += f" (R\u00b2 {fmt(score)})"
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": plotly_text(name),
                "marker": {"color": _TARGET_COLORS.get(str(target).lower(), "#7b8db3")},
                "y": [plotly_text(f) for f in pivot.index],
                "x": num_list(pivot[target]),
                "hovertemplate": "%{y}: %{x:.4f}<extra>" + plotly_text(name) + "</extra>",
            }
        )
    height = 120 + 22 * len(pivot) * max(1, len(pivot.columns)) // 2
    layout = bar_layout(
        height,
        barmode="group",
        title={"text": f"regressor: {plotly_text(regressor)}", "x": 0.01, "y": 0.98},
        legend={
            "orientation": "h",
            "y": 1.0,
            "yanchor": "bottom",
            "x": 0,
            "traceorder": "reversed",
        },
        xaxis={"title": {"text": "importance"}, "gridcolor": "#eee"},
        yaxis={"automargin": True},
    )
    return f"attribution-{k}", height, {"data": data, "layout": layout}


_STABILITY_COLUMNS = (
    "rank_spearman",
    "top10_overlap",
    "top10_half1",
    "top10_half2",
    "rank_spearman_noise",
    "top10_overlap_noise",
    "stability_note",
)


def _stability_block(fit: pd.DataFrame) -> str:
    """How stable the feature ranking is between two halves of the runs (the stability
    columns of attribution_fit.parquet), with the plain warnings."""
    if not {"rank_spearman", "top10_overlap"} <= set(fit.columns):
        return ""
    useful = dict(zip(fit.index, informative_column(fit)))

    def listed(value: Any) -> str:
        return ", ".join(map(str, value)) if isinstance(value, (list, tuple, np.ndarray)) else ""

    def versus(row: Any, key: str, digits: int) -> str:
        noise = row.get(f"{key}_noise", np.nan)
        text = f"{fmt(row[key], digits)} (noise {fmt(noise, 2)})"
        return text if useful[row.name] else f"{text}: {MEANINGLESS}"

    rows = [
        {
            "target": str(row["target"]).upper(),
            "regressor": row["regressor"],
            "rank Spearman": versus(row, "rank_spearman", 2),
            "top-10 overlap": versus(row, "top10_overlap", 2),
            "top 10, half 1": listed(row.get("top10_half1")),
            "top 10, half 2": listed(row.get("top10_half2")),
        }
        for _, row in fit.iterrows()
    ]
    html = (
        "<h3>Stability of the ranking</h3>"
        '<p class="note">The whole repeats of the plan split into two halves (alternating), '
        "TM, TG and CM estimated from each half, the same regressor and SHAP fit to each "
        "half's targets, and the two rankings of the features by mean |SHAP| compared: "
        "Spearman across all features and the share of the top 10 both halves hold. In "
        "brackets, the same figures for fits to pure noise: a ranking no better than those "
        "is set by the features' resolution, not by the target. The stability of a fit that "
        "explains nothing (held-out R\u00b2 below the floor) means nothing.</p>"
    )
    flagged = stability_warnings(fit)
    if pd.to_numeric(fit.rank_spearman, errors="coerce").notna().any():
        rule = (f"a figure below {WARN_BELOW:g}, or less than {ABOVE_CHANCE:g} of the way from "
                "its noise level to 1, is flagged")  # fmt: skip
        if flagged:
            verdict = (f"; {len(flagged)} target{'s' if len(flagged) != 1 else ''} flagged "
                       "(warnings below): treat their top features as tentative")  # fmt: skip
        elif any(useful.values()):
            verdict = "; no informative fit is flagged: their top features hold between halves"
        else:
            verdict = "; no fit is informative, so none is judged"
        html += table(pd.DataFrame(rows), caption=rule + verdict)
    for warning in flagged:
        html += warning_box(warning[0].upper() + warning[1:] + ".")
    if "stability_note" in fit:
        for note in dict.fromkeys(fit.stability_note.dropna().astype(str)):
            html += f'<p class="note">{prose(note[0].upper() + note[1:])}.</p>'
    return html
