"""Checks of single values and of the canonical pair table, worded for the user."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from rmlens._errors import InputError, RmlensWarning
from rmlens.data._schema import (
    CORE_COLUMNS,
    LABEL_COLUMNS,
    TEXT_COLUMNS,
    derive_id,
    describe,
    id_text,
    is_null,
    to_text,
)

TEXT_EXPECTED = "a non-empty string or a list of chat messages"


class Problems:
    """Raise InputError at the first problem (strict) or collect them all (``collect=True``)."""

    def __init__(self, collect: bool = False) -> None:
        self.collect = collect
        self.items: list[str] = []

    def __call__(self, message: str) -> None:
        if not self.collect:
            raise InputError(message)
        self.items.append(message)


Label = Callable[[str], str]


def quote(field: str) -> str:
    return f"'{field}'"


def text_problem(value: Any) -> str | None:
    """None when ``value`` is usable prompt or response text, else 'must be ..., got ...'."""
    if isinstance(value, str):
        return None if value.strip() else f"must be a non-empty string, got {describe(value)}"
    if isinstance(value, (list, tuple)):
        if not value:
            return f"must be {TEXT_EXPECTED}, got an empty list"
        for k, message in enumerate(value, 1):
            if not isinstance(message, Mapping):
                return f"must be {TEXT_EXPECTED}; message {k} is {describe(message)}"
            for key in ("role", "content"):
                if not isinstance(message.get(key), str):
                    got = describe(message.get(key)) if key in message else "nothing"
                    return f"must be {TEXT_EXPECTED}; message {k} needs a string {key!r}, got {got}"
        if not any(m["content"].strip() for m in value):
            return f"must be {TEXT_EXPECTED}, got messages with no text"
        return None
    return f"must be {TEXT_EXPECTED}, got {describe(value)}"


def number_problem(value: Any, *, minimum: float | None = None) -> tuple[float | None, str | None]:
    """Parse a finite number (numeric strings allowed): ``(value, None)`` or ``(None, problem)``."""
    want = "a number" if minimum is None else f"a number >= {minimum:g}"
    if isinstance(value, bool) or is_null(value) or isinstance(value, (Mapping, list, tuple)):
        return None, f"must be {want}, got {describe(value)}"
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None, f"must be {want}, got {describe(value)}"
    if math.isnan(x) or math.isinf(x):
        return None, f"must be {want}, got {x}"
    if minimum is not None and x < minimum:
        return None, f"must be {want}, got {describe(value)}"
    return x, None


def label_text(value: Any) -> tuple[str | None, bool]:
    """A user/model label as a string; ``(None, True)`` for missing, ``(None, False)`` for bad."""
    if type(value) is str:
        return (value, True) if value.strip() else (None, True)
    if is_null(value) or (isinstance(value, str) and not value.strip()):
        return None, True
    text = id_text(value)
    return text, text is not None


def finish_pairs(
    rows: Sequence[dict[str, Any]],
    wheres: Sequence[tuple[str, str]],
    report: Callable[[str], None],
    *,
    ids_given: bool,
    margin_given: bool = False,
    broken: Sequence[bool] | None = None,
    label: Label = quote,
    drop_same_text: bool = False,
) -> pd.DataFrame:
    """Check ids, labels and margins of mapped pairs and build the canonical table.

    ``wheres[i]`` is ``(file name, "line 3")`` for row ``i``. Ids are converted to strings or
    derived (sha1 of prompt, chosen and rejected; a repeated pair gets ``-2``, ``-3``, ...).
    With ``ids_given`` (or ``margin_given``) every row needs an ``id`` (or ``margin``).
    Rows marked ``broken`` (their texts already failed) are checked but never kept; rows
    with problems are reported and left out. With ``drop_same_text``, pairs whose chosen and
    rejected are the same text (they carry no preference) are left out too, with one
    :class:`~rmlens._errors.RmlensWarning` naming them (:func:`warn_same_text`).
    """
    seen: dict[str, str] = {}
    derived: dict[str, int] = {}
    kept: list[dict[str, Any]] = []
    same: list[tuple[str, str, Any]] = []  # (file name, "line 8", id) of each pair left out
    for k, (row, (name, loc)) in enumerate(zip(rows, wheres)):
        where = f"{name} {loc}"
        errors = []
        row = dict(row)
        if ids_given:
            row["id"] = _given_id(row, where, seen, errors, label)
        elif broken is None or not broken[k]:
            base = derive_id(row["prompt"], row["chosen"], row["rejected"])
            derived[base] = derived.get(base, 0) + 1
            row["id"] = base if derived[base] == 1 else f"{base}-{derived[base]}"
        for field in LABEL_COLUMNS:
            if field in row:
                raw = row[field]
                row[field], ok = label_text(raw)
                if not ok:
                    errors.append(
                        f"{where}: {label(field)} must be a string or a number, got {describe(raw)}"
                    )
        if "margin" in row:
            row["margin"], problem = number_problem(row["margin"], minimum=0)
            if problem:
                errors.append(f"{where}: {label('margin')} {problem}")
        elif margin_given:
            errors.append(f"{where}: missing required field {label('margin')}")
        for error in errors:
            report(error)
        if row.get("id") is not None:
            seen.setdefault(row["id"], loc)
        if errors or (broken is not None and broken[k]):
            continue
        if drop_same_text and same_text(row["chosen"], row["rejected"]):
            same.append((name, loc, row.get("id")))
        else:
            kept.append(row)
    if same and not kept and not any(broken or ()):
        name = same[0][0]
        raise InputError(f"{name}: every one of its {len(same)} pairs has chosen and rejected "
                         "the same text (no preference): no pair is left; check the "
                         "columns mapped to chosen and rejected (--map)")  # fmt: skip
    warn_same_text(same)
    frame = pairs_frame(kept, [r for k, r in enumerate(rows) if broken is None or not broken[k]])
    if same:  # a record of them for an audit's summary (``load_pairs``: ``dropped``)
        frame.attrs["same_text"] = [f"{name} {loc} (id {ident}): chosen and rejected are the "
                                    "same text" for name, loc, ident in same]  # fmt: skip
    return frame


def same_text(chosen: Any, rejected: Any) -> bool:
    """Whether a pair's two responses are the same text (up to surrounding whitespace)."""
    return to_text(chosen).strip() == to_text(rejected).strip()


def warn_same_text(same: Sequence[tuple[str, str, Any]], shown: int = 10) -> None:
    """One warning for the pairs left out because chosen and rejected are the same text.

    ``same`` holds ``(file name, "line 8", id)`` of each. One pair is named with its place and
    id, several are counted with their first ``shown`` lines or rows.
    """
    if not same:
        return
    name, loc, ident = same[0]
    if len(same) == 1:
        message = (f"{name} {loc} (id {ident}): chosen and rejected are the same text: "
                   "left out")  # fmt: skip
    else:
        places = list(dict.fromkeys(where for _, where, _ in same))  # a ranking gives several
        unit = places[0].split(" ")[0]
        numbers = [p.split(" ", 1)[-1] for p in places[:shown]]
        more = f", ... ({len(places) - shown} more)" if len(places) > shown else ""
        message = (f"{name}: {len(same)} pairs whose chosen and rejected are the same text "
                   f"left out ({unit}s {', '.join(numbers)}{more})")  # fmt: skip
    warnings.warn(message, RmlensWarning, stacklevel=4)


def _given_id(
    row: dict[str, Any], where: str, seen: dict[str, str], errors: list[str], label: Label
) -> str | None:
    if "id" not in row:
        errors.append(f"{where}: missing required field {label('id')}")
        return None
    ident = id_text(row["id"])
    if ident is None:
        errors.append(
            f"{where}: {label('id')} must be a non-empty string or a number, "
            f"got {describe(row['id'])}"
        )
    elif ident in seen:
        errors.append(f"{where}: duplicate id {ident!r}, first used on {seen[ident]}")
        return None
    return ident


def pairs_frame(kept: list[dict[str, Any]], all_rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The canonical column order: core columns first, then extras as first seen."""
    fields: dict[str, None] = {}
    for row in all_rows:
        fields.update(dict.fromkeys(row))
    columns = [c for c in CORE_COLUMNS if c in fields or c in ("id", *TEXT_COLUMNS)]
    columns += [c for c in fields if c not in CORE_COLUMNS]
    frame = pd.DataFrame.from_records(kept, columns=columns) if kept else pd.DataFrame(
        {c: pd.Series(dtype="float64" if c == "margin" else object) for c in columns}
    )
    if "margin" in frame:
        frame["margin"] = frame["margin"].astype("float64")
    return frame
