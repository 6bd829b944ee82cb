"""Safe HTML building blocks: every value that came from data is escaped here."""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rmlens._display import ROUNDING_NOISE, fmt, snippet  # noqa: F401 (imported from here too)
from rmlens._io import jsonable as clean  # noqa: F401 (JSON-ready values: one sanitizer)

if TYPE_CHECKING:
    from rmlens.memorization import Sentence

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def esc(value: Any) -> str:
    """HTML-escape ``str(value)``, quotes included (safe in text and in attributes)."""
    return html.escape(str(value), quote=True)


def plotly_text(value: Any) -> str:
    """Escape a string that Plotly renders as pseudo-HTML (titles, tick labels, hover text)."""
    return html.escape(str(value), quote=False)


def json_for_script(obj: Any) -> str:
    """Serialise ``obj`` for a ``<script type="application/json">`` block.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e`` and ``\\u0026``, so no data can
    close the script element; ``JSON.parse`` restores them. NaN and infinities must have
    been turned into ``None`` before (see :func:`rmlens._io.jsonable`).
    """
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def num_list(values: Iterable[Any], digits: int = 4) -> list[float | None]:
    """Rounded floats for plotting, with ``None`` where a value is missing or not finite."""
    arr = pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").to_numpy(float)
    arr = np.round(arr, digits)
    return [float(v) if math.isfinite(v) else None for v in arr]


# columns that hold counts: shown as integers when every value is whole, even when a missing
# value or a Parquet writer made them float
_COUNT_COLUMN = re.compile(r"(n|n_\w+|\w+_n|pairs|count|\w+_count|runs|members)")


def whole_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its float count columns (``n``, ``n_in``, ``pairs``, ...) as integers
    (missing values kept) when every value is whole; other columns as they are."""
    out = frame
    for column in frame.columns:
        values = frame[column]
        if not (_COUNT_COLUMN.fullmatch(str(column)) and pd.api.types.is_float_dtype(values)):
            continue
        finite = values.dropna().to_numpy(float)
        if not np.isfinite(finite).all() or np.any(np.mod(finite, 1) != 0):
            continue
        if out is frame:
            out = frame.copy()
        out[column] = pd.Series(
            [None if pd.isna(v) else int(v) for v in values], index=frame.index, dtype=object
        )
    return out


def table(
    frame: pd.DataFrame,
    *,
    headers: Mapping[str, str] | None = None,
    row_attrs: list[dict[str, str]] | None = None,
    classes: str = "",
    caption: str | None = None,
    cell_classes: Mapping[str, str] | None = None,
) -> str:
    """An escaped HTML table of ``frame`` (cells through :func:`fmt`).

    ``cell_classes`` maps a column name to the CSS class of its cells.
    """
    headers = headers or {}
    cls = cell_classes or {}
    frame = whole_counts(frame)
    td = [f'<td class="{esc(cls[str(c)])}">' if str(c) in cls else "<td>" for c in frame.columns]
    head = "".join(f"<th>{esc(headers.get(str(c), c))}</th>" for c in frame.columns)
    rows = []
    for i, record in enumerate(frame.itertuples(index=False, name=None)):
        attrs = ""
        if row_attrs is not None and row_attrs[i]:
            attrs = "".join(f' {esc(k)}="{esc(v)}"' for k, v in row_attrs[i].items())
        cells = "".join(f"{t}{esc(fmt(v))}</td>" for t, v in zip(td, record))
        rows.append(f"<tr{attrs}>{cells}</tr>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return (
        f'<div class="table-wrap"><table class="{esc(classes)}">{cap}'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dicts as ``("a.b.c", value)`` rows; lists of scalars stay one value."""
    if isinstance(obj, Mapping):
        rows: list[tuple[str, Any]] = []
        for key, value in obj.items():
            rows.extend(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return rows
    return [(prefix, obj)]


def key_value_table(obj: Mapping[str, Any], *, max_rows: int = 200) -> str:
    """A two-column table of a flattened mapping."""
    rows = flatten(obj)[:max_rows]
    frame = pd.DataFrame(rows, columns=["key", "value"])
    frame["value"] = [fmt(v, 4) for v in frame["value"]]
    return table(frame, classes="kv")


def humanise(key: Any) -> str:
    """A JSON key as words: underscores to spaces, a nested key's dots to colons."""
    return str(key).replace("_", " ").replace(".", ": ")


def readable_rows(obj: Mapping[str, Any], source: str) -> list[tuple[str, str]]:
    """(label, value) rows of a JSON object that has no table of its own: scalars (nested
    objects flattened) under :func:`humanise`, integers as integers; a list of scalars joined,
    a list of objects only counted (``source`` names the file that holds them); never a
    JSON dump."""
    rows = []
    for key, value in flatten(obj):
        if isinstance(value, (list, tuple)):
            if value and all(v is None or isinstance(v, (str, int, float)) for v in value):
                rows.append((humanise(key), snippet(", ".join(fmt(v) for v in value), 300)))
            elif value:
                entries = "entry" if len(value) == 1 else "entries"
                rows.append((humanise(key), f"{len(value):,} {entries} (in {source})"))
        elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
            rows.append((humanise(key), f"{int(value):,}" if abs(value) < 1e15 else fmt(value)))
        elif value is None or isinstance(value, (str, int, float, bool, np.generic)):
            rows.append((humanise(key), fmt(value, 4)))
    return rows


def card(label: str, value: str, note: str = "") -> str:
    """A small summary card (all three strings are escaped here)."""
    extra = f'<div class="card-note">{esc(note)}</div>' if note else ""
    return (
        f'<div class="card"><div class="card-label">{esc(label)}</div>'
        f'<div class="card-value">{esc(value)}</div>{extra}</div>'
    )


def prose(text: Any) -> str:
    """``esc(text)`` with each backticked parameter name (how the library names one) as code."""
    return re.sub(r"`([A-Za-z_][A-Za-z0-9_.]*)`", r"<code>\1</code>", esc(text))


def interval_text(row: Mapping[str, Any] | None, name: str) -> str:
    """``row[name]`` with its ``[name_lo, name_hi]`` interval when both are there; an en dash
    when the value is missing."""
    if not row or row.get(name) is None:
        return "\u2013"
    lo, hi = row.get(f"{name}_lo"), row.get(f"{name}_hi")
    return fmt(row[name]) + (f" [{fmt(lo)}, {fmt(hi)}]" if lo is not None and hi is not None
                             else "")  # fmt: skip


def words(said: Sentence) -> str:
    """A summary sentence as HTML: its fixed words as written, its values through
    :func:`prose` (escaped, parameter names as code)."""
    return said.words.format(**{name: prose(value) for name, value in said.values.items()})


def warning_box(message: str) -> str:
    return f'<p class="warning">{prose(message)}</p>'


def note(said: Sentence, kind: str = "note") -> str:
    """A summary sentence as a paragraph of class ``kind`` ("note", "warning")."""
    return f'<p class="{kind}">{words(said)}</p>'


def figure_div(div_id: str, height: int) -> str:
    """Placeholder for a Plotly figure that the page script draws from the JSON block."""
    return f'<div class="plot" id="{esc(div_id)}" style="height:{int(height)}px"></div>'
