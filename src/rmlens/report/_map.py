"""The interactive memorization map: point sample, density layer, marginals and pair data."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rmlens.memorization import ESTIMATE_COLUMNS

from ._html import fmt, num_list, plotly_text

TEXT_COLUMNS = ("prompt", "chosen", "rejected")
_MAX_CATEGORIES = 20
_MAX_COLUMNS = 24
_MAX_META_COLUMNS = 40
_DENSITY_BINS = 50
_HIST_BINS = 40
_EXTREMES = (("cm", False), ("tg", True), ("cm", True), ("tm", False), ("tm", True), ("tg", False))
# the axes' titles: of an audit of R runs, and of a one-checkpoint audit (one run that trained
# on every pair; TG from each group's removal by a Gauss-Newton step)
AXIS_TITLES = ("TM: P(chosen wins) in runs that trained on the pair",
               "TG: P(chosen wins) in runs that held it out")  # fmt: skip
CHECKPOINT_AXIS_TITLES = (
    "TM: P(chosen wins) by the RM, which trained on the pair",
    "TG: P(chosen wins) with its group removed (Gauss-Newton step)",
)


def as_text(value: Any) -> str:
    """Pair text as a string: conversations (lists of messages) as ``role: content`` lines."""
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, (list, tuple, np.ndarray)):
        parts = []
        for message in value:
            if isinstance(message, dict):
                parts.append(f"{message.get('role', '')}: {message.get('content', '')}")
            else:
                parts.append(str(message))
        return "\n\n".join(parts)
    return str(value)


def mapped_rows(mem: pd.DataFrame) -> np.ndarray:
    """Row positions of pairs with finite TM and TG (those that can be drawn)."""
    tm = pd.to_numeric(mem["tm"], errors="coerce").to_numpy(float)
    tg = pd.to_numeric(mem["tg"], errors="coerce").to_numpy(float)
    return np.flatnonzero(np.isfinite(tm) & np.isfinite(tg))


def sample_points(mem: pd.DataFrame, *, max_points: int, top_k: int, seed: int) -> np.ndarray:
    """Row positions of the pairs drawn as points: all of them, or extremes plus a sample.

    The extremes (highest and lowest CM, TM and TG) are kept so that the outliers a reader
    looks for are always clickable; the remaining slots are a seeded uniform sample.
    """
    rows = mapped_rows(mem)
    if len(rows) <= max_points:
        return rows
    per_side = min(max(top_k, max_points // 40), max(1, max_points // 6))
    keep: dict[int, None] = {}
    for column, lowest in _EXTREMES:
        values = pd.to_numeric(mem[column], errors="coerce").to_numpy(float)[rows]
        order = np.argsort(values if lowest else -values, kind="stable")
        keep.update(dict.fromkeys(rows[order[:per_side]].tolist()))
    kept = np.fromiter(keep, dtype=np.int64)[:max_points]
    n_more = max_points - len(kept)
    rest = np.setdiff1d(rows, kept)
    rng = np.random.default_rng(seed)
    extra = rng.choice(rest, size=min(n_more, len(rest)), replace=False) if n_more else rest[:0]
    return np.sort(np.concatenate([kept, extra]))


def color_options(mem: pd.DataFrame, rows: np.ndarray) -> list[dict[str, Any]]:
    """Columns the map can be coloured by, with their values for the sampled rows."""
    skip = {"id", *TEXT_COLUMNS, "tm_lo", "tm_hi", "tg_lo", "tg_hi", "cm_lo", "cm_hi"}
    # the scores, then whether another group judged the pair the other way (memorized
    # because the groups disagree), then the rest
    first = ["cm", "tm", "tg", "conflict", "n_in", "n_out"]
    order = first + [c for c in mem.columns if c not in first]
    options: list[dict[str, Any]] = []
    for column in order:
        if len(options) >= _MAX_COLUMNS:
            break
        if column not in mem.columns or column in skip:
            continue
        series = conflict_words(mem[column]) if column == "conflict" else mem[column]
        if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
            options.append(_numeric_option(str(column), series.iloc[rows]))
            continue
        try:
            labels = series.astype(str).where(series.notna(), "(missing)")
        except (TypeError, ValueError):
            continue
        n_unique = labels.nunique()
        if n_unique < 2 or (n_unique == len(series) and n_unique > _MAX_CATEGORIES):
            continue
        options.append(_categorical_option(str(column), labels, rows))
    if {"chosen", "rejected"} <= set(mem.columns):
        diff = [
            len(as_text(c)) - len(as_text(r))
            for c, r in zip(mem["chosen"].iloc[rows], mem["rejected"].iloc[rows])
        ]
        option = _numeric_option("length difference (chosen - rejected, chars)", pd.Series(diff))
        options.append(option)
    return options


def conflict_words(values: pd.Series) -> pd.Series:
    """The ``conflict`` column in words: ``judged the other way`` (another group judged the
    pair's two responses the other way), ``no``, or missing."""
    words = {True: "judged the other way", False: "no"}
    return pd.Series([words.get(_truth(v)) for v in values], index=values.index, dtype=object)


def _truth(value: Any) -> bool | None:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, (int, float, np.integer, np.floating)) and value in (0, 1):
        return bool(value)
    return None


def _numeric_option(name: str, values: pd.Series) -> dict[str, Any]:
    return {
        "name": name,
        "title": plotly_text(name),
        "kind": "numeric",
        "diverging": name == "cm",
        "values": num_list(values),
    }


def _categorical_option(name: str, labels: pd.Series, rows: np.ndarray) -> dict[str, Any]:
    counts = labels.value_counts()
    top = list(counts.index[: _MAX_CATEGORIES - 1]) if len(counts) > _MAX_CATEGORIES else None
    categories = sorted(top or counts.index, key=str)
    if top is not None:
        categories.append("(other)")
    code = {c: i for i, c in enumerate(categories)}
    other = len(categories) - 1
    values = [code.get(v, other) for v in labels.iloc[rows]]
    return {
        "name": name,
        "title": plotly_text(name),
        "kind": "categorical",
        "categories": [plotly_text(c) for c in categories],
        "values": values,
    }


def pair_records(
    mem: pd.DataFrame, rows: np.ndarray, *, text_cap: int, meta_cap: int = 300
) -> dict[str, Any]:
    """Column-wise data of the sampled pairs for hover text and the details panel."""
    part = mem.iloc[rows]
    out: dict[str, Any] = {"n": len(rows), "id": part["id"].astype(str).tolist()}
    for column in ESTIMATE_COLUMNS:
        if column in part.columns:
            out[column] = num_list(part[column])
    texts: dict[str, list[str]] = {}
    cut: dict[str, list[int]] = {}
    for column in TEXT_COLUMNS:
        if column not in part.columns:
            continue
        full = [as_text(v) for v in part[column]]
        texts[column] = [t[:text_cap] for t in full]
        cut[column] = [i for i, t in enumerate(full) if len(t) > text_cap]
    out["text"] = texts
    out["cut"] = cut
    if "conflict" in part.columns:  # the hover says so: memorized because groups disagree
        out["conflict"] = [_truth(v) for v in part["conflict"]]
    meta_columns = _meta_columns(part)
    out["meta_columns"] = [str(c) for c in meta_columns]
    shown = {c: conflict_words(part[c]) if c == "conflict" else part[c] for c in meta_columns}
    out["meta"] = [[_meta_text(v, meta_cap) for v in shown[c]] for c in meta_columns]
    return out


def _meta_columns(part: pd.DataFrame) -> list[Any]:
    """The pair's other columns for the details panel: ``conflict`` first, then in order."""
    skip = {*ESTIMATE_COLUMNS, *TEXT_COLUMNS, "id"}
    rest = [c for c in part.columns if c not in skip]
    first = [c for c in ("conflict",) if c in rest]
    return (first + [c for c in rest if c not in first])[:_MAX_META_COLUMNS]


def _meta_text(value: Any, cap: int) -> str | None:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return None
    if isinstance(value, (bool, np.bool_)):
        return fmt(value)  # yes / no, as in the tables
    if isinstance(value, (float, np.floating)):  # a whole number (an id, a year) as written
        whole = float(value).is_integer() and abs(value) < 1e15
        return str(int(value)) if whole else fmt(value)
    text = as_text(value)
    return text if len(text) <= cap else text[: cap - 1] + "\u2026"


def text_cap_for_budget(mem: pd.DataFrame, rows: np.ndarray, cap: int, budget: int) -> int:
    """Largest per-text length <= ``cap`` whose embedded texts fit ``budget`` characters.

    Prompt, chosen and rejected are cut at the cap, metadata values at ``min(200, cap)``.
    """
    part = mem.iloc[rows]
    texts, meta = [], []
    for column in TEXT_COLUMNS:
        if column in part.columns:
            texts.extend(len(as_text(v)) for v in part[column])
    for column in _meta_columns(part):
        meta.extend(len(_meta_text(v, 200) or "") for v in part[column])
    text_lens, meta_lens = np.asarray(texts, dtype=np.int64), np.asarray(meta, dtype=np.int64)

    def size(c: int) -> int:
        return int(np.minimum(text_lens, c).sum() + np.minimum(meta_lens, min(200, c)).sum())

    if size(cap) <= budget:
        return cap
    lo, hi = 20, cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if size(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


POINT_TRACE, SELECTED_TRACE = 4, 5


def map_figure(
    mem: pd.DataFrame, rows: np.ndarray, *, webgl: bool, one_checkpoint: bool = False
) -> dict[str, Any]:
    """The Plotly spec of the map (traces in the order the page script expects); the axes
    of a one-checkpoint audit say what it did (no run held a pair out).

    Density and marginal histograms are computed here over every pair with an estimate,
    so they stay exact whatever the point sample is.
    """
    all_rows = mapped_rows(mem)
    tm_all = pd.to_numeric(mem["tm"], errors="coerce").to_numpy(float)[all_rows]
    tg_all = pd.to_numeric(mem["tg"], errors="coerce").to_numpy(float)[all_rows]
    sampled = len(rows) < len(all_rows)

    counts, xe, ye = np.histogram2d(
        tm_all, tg_all, bins=_DENSITY_BINS, range=[[0.0, 1.0], [0.0, 1.0]]
    )
    z = np.log10(counts.T + 1.0)
    density = {
        "type": "heatmap",
        "name": f"density of all {len(all_rows):,} pairs",
        "x": num_list((xe[:-1] + xe[1:]) / 2),
        "y": num_list((ye[:-1] + ye[1:]) / 2),
        "z": [[None if v == 0 else round(float(v), 3) for v in line] for line in z],
        "colorscale": [[0, "#eef2f8"], [1, "#3b4a6b"]],
        "showscale": False,
        "hoverinfo": "skip",
        "showlegend": True,
        "visible": True if sampled else "legendonly",
        "xaxis": "x",
        "yaxis": "y",
    }
    edges = np.linspace(0.0, 1.0, _HIST_BINS + 1)
    centres = num_list((edges[:-1] + edges[1:]) / 2)
    hist_tm = np.histogram(tm_all, bins=edges)[0].tolist()
    hist_tg = np.histogram(tg_all, bins=edges)[0].tolist()
    bar = {"color": "#7b8db3"}
    top = {
        "type": "bar",
        "x": centres,
        "y": hist_tm,
        "width": 1 / _HIST_BINS,
        "marker": bar,
        "name": "TM histogram",
        "showlegend": False,
        "xaxis": "x",
        "yaxis": "y2",
        "hovertemplate": "TM %{x:.3f}: %{y} pairs<extra></extra>",
    }
    right = {
        "type": "bar",
        "y": centres,
        "x": hist_tg,
        "width": 1 / _HIST_BINS,
        "marker": bar,
        "orientation": "h",
        "name": "TG histogram",
        "showlegend": False,
        "xaxis": "x2",
        "yaxis": "y",
        "hovertemplate": "TG %{y:.3f}: %{x} pairs<extra></extra>",
    }
    diagonal = {
        "type": "scatter",
        "mode": "lines",
        "x": [0, 1],
        "y": [0, 1],
        "line": {"color": "#555", "dash": "dash", "width": 1},
        "name": "CM = 0 (TM = TG)",
        "hoverinfo": "skip",
        "xaxis": "x",
        "yaxis": "y",
    }
    label = f"sample of {len(rows):,} pairs" if sampled else f"{len(rows):,} pairs"
    points = {
        "type": "scattergl" if webgl else "scatter",
        "mode": "markers",
        "name": label,
        "x": num_list(mem["tm"].iloc[rows]),
        "y": num_list(mem["tg"].iloc[rows]),
        "marker": {
            "size": 4 if len(rows) > 5000 else 6 if len(rows) > 500 else 8,
            "opacity": 0.6 if len(rows) > 5000 else 0.85,
            "line": {"width": 0},
        },
        "hoverinfo": "text",
        "xaxis": "x",
        "yaxis": "y",
    }
    ann = {"showarrow": False, "font": {"color": "#888", "size": 12}, "xref": "x", "yref": "y"}
    axis = {"range": [-0.02, 1.02], "zeroline": False, "gridcolor": "#eee"}
    x_title, y_title = CHECKPOINT_AXIS_TITLES if one_checkpoint else AXIS_TITLES
    layout = {
        "margin": {"l": 60, "r": 20, "t": 34, "b": 50},
        "hovermode": "closest",
        "dragmode": "zoom",
        "bargap": 0.05,
        "plot_bgcolor": "white",
        "legend": {
            "x": 0.85,
            "y": 1,
            "xanchor": "left",
            "yanchor": "top",
            "font": {"size": 11},
            "bgcolor": "rgba(255,255,255,0.8)",
        },
        "xaxis": {
            **axis,
            "domain": [0, 0.82],
            "anchor": "y",
            "title": {"text": x_title},
        },
        "yaxis": {
            **axis,
            "domain": [0, 0.82],
            "anchor": "x",
            "title": {"text": y_title},
        },
        "xaxis2": {
            "domain": [0.84, 1],
            "anchor": "y",
            "showgrid": False,
            "title": {"text": "pairs"},
        },
        "yaxis2": {
            "domain": [0.84, 1],
            "anchor": "x",
            "showgrid": False,
            "title": {"text": "pairs"},
        },
        "annotations": [
            {**ann, "x": 0.98, "y": 0.03, "xanchor": "right", "text": "memorized"},
            {
                **ann,
                "x": 0.9,
                "y": 0.99,
                "xanchor": "right",
                "yanchor": "top",
                "text": "learned and generalized",
            },
            {**ann, "x": 0.07, "y": 0.03, "xanchor": "left", "text": "not learned"},
        ],
    }
    selected = {
        "type": "scatter",
        "mode": "markers",
        "x": [],
        "y": [],
        "name": "selected pair",
        "marker": {"symbol": "circle-open", "size": 18, "color": "#111", "line": {"width": 2}},
        "showlegend": False,
        "hoverinfo": "skip",
        "xaxis": "x",
        "yaxis": "y",
    }
    return {"data": [density, top, right, diagonal, points, selected], "layout": layout}
