"""The tables of the most and least memorized pairs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._html import fmt, prose, snippet, table
from ._base import Section


def _est(value: Any) -> str:
    value = float(value) if value is not None else float("nan")
    return f"{value:.3f}" if np.isfinite(value) else "n/a"


def pair_table_section(
    mem: pd.DataFrame,
    positions: dict[int, int],
    *,
    section_id: str,
    title: str,
    by: str,
    ascending: bool,
    top_k: int,
    note: str,
) -> Section:
    """Top pairs by one estimate; rows that are on the map open their details on click."""
    values = pd.to_numeric(mem[by], errors="coerce")
    order = values.dropna().sort_values(ascending=ascending, kind="stable").index[:top_k]
    rows = [mem.index.get_loc(i) for i in order]
    part = mem.iloc[rows]
    frame = pd.DataFrame({"#": np.arange(1, len(rows) + 1), "id": part["id"].astype(str)})
    for name in ("cm", "tm", "tg"):
        lo, hi = f"{name}_lo", f"{name}_hi"
        if lo in part.columns and hi in part.columns:
            frame[name.upper()] = [
                f"{_est(v)}\n[{_est(a)}, {_est(b)}]"
                for v, a, b in zip(part[name], part[lo], part[hi])
            ]
        else:
            frame[name.upper()] = [_est(v) for v in part[name]]
    if {"n_in", "n_out"} <= set(part.columns):
        frame["in / out"] = [f"{fmt(a)} / {fmt(b)}" for a, b in zip(part.n_in, part.n_out)]
    if "group" in part.columns:
        frame["group"] = [snippet(v, 30) for v in part["group"]]
    for column in ("prompt", "chosen", "rejected"):
        if column in part.columns:
            frame[column] = [snippet(v, 160) for v in part[column]]
    attrs = [
        {"data-point": str(positions[r]), "tabindex": "0", "title": "show details"}
        if r in positions
        else {}
        for r in rows
    ]
    classes = {
        "#": "nowrap",
        "id": "id",
        "CM": "est",
        "TM": "est",
        "TG": "est",
        "in / out": "nowrap",
        "group": "nowrap",
        "prompt": "text",
        "chosen": "text",
        "rejected": "text",
    }
    body = f'<p class="note">{prose(note)}</p>' + table(
        frame, row_attrs=attrs, classes="pairs", cell_classes=classes
    )
    return Section(section_id, title, body)
