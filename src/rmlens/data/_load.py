"""Public loading API: ``load_pairs``, ``load_rankings``, ``validate_pairs``, ``find_problems``."""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmlens._errors import InputError, RmlensWarning
from rmlens._io import strict_json, write_atomic, write_bytes, write_parquet, write_text
from rmlens.data._layouts import (
    apply_column_map,
    detect_layout,
    expand_ranking,
    explicit_pair,
    implicit_pair,
    ranking,
    ranking_id,
)
from rmlens.data._loaders import Records, read_records
from rmlens.data._schema import LABEL_COLUMNS, TEXT_COLUMNS, native
from rmlens.data._validate import Problems, finish_pairs, pairs_frame

LOCATION = re.compile(r" (?:line|row) (\d+): ")


@dataclass
class Loaded:
    """Pairs (or rankings) read from a source, the layout found and the problems seen."""

    table: pd.DataFrame
    layout: str | None
    problems: list[str] = field(default_factory=list)
    name: str = ""


def _labeler(column_map: Mapping[str, str]):
    def label(name: str) -> str:
        return f"'{name}' (field {column_map[name]!r})" if name in column_map else f"'{name}'"

    return label


def _read(
    source: Any,
    column_map: Mapping[str, str] | None,
    split: str | None,
    report,
    sep: str | None = None,
) -> Records:
    column_map = dict(column_map or {})

    def raw(names):
        return {column_map.get(n, n) for n in names}

    records = read_records(
        source,
        split=split,
        report=report,
        text_fields=raw((*TEXT_COLUMNS, *LABEL_COLUMNS, "id", "ranking_id", "margin")),
        list_fields=raw(("responses", "ranks", "scores", "models")),
        sep=sep,
    )
    apply_column_map(records, column_map)
    return records


def read_pairs(
    source: Any,
    *,
    column_map: Mapping[str, str] | None = None,
    split: str | None = None,
    collect: bool = False,
    layout: str | None = None,
    sep: str | None = None,
    drop_invalid: bool = False,
) -> Loaded:
    """Read, map and check pairs; strict (raise at the first problem, leave out pairs whose
    chosen and rejected are the same text with a warning) unless ``collect`` (keep them,
    for ``data inspect`` to count) or ``drop_invalid`` (leave out the rows with problems
    too, the problems in ``Loaded.problems``)."""
    report = Problems(collect or drop_invalid)
    label = _labeler(column_map or {})
    records = _read(source, column_map, split, report, sep)
    if not records.rows:
        return Loaded(pairs_frame([], []), None, report.items, records.name)
    layout = layout or detect_layout(records)
    rows: list[dict[str, Any]] = []
    wheres: list[tuple[str, str]] = []
    broken: list[bool] = []
    seen_rankings: dict[str, str] = {}
    for i, row in enumerate(records.rows):
        where = records.where(i)
        loc = (records.name, f"{records.unit} {records.locs[i]}")
        if layout == "rankings":
            rank = ranking(row, where, report, label)
            rid = ranking_id(row, where, report, label) if rank is not None else None
            if rid is None:
                continue
            if rid in seen_rankings:
                report(f"{where}: duplicate id {rid!r}, first used on {seen_rankings[rid]}")
                continue
            seen_rankings[rid] = loc[1]
            pairs = expand_ranking(rank, rid)
            failed = False
        else:
            mapper = explicit_pair if layout == "explicit" else implicit_pair
            pair = mapper(row, where, report, label)
            pairs, failed = ([row], True) if pair is None else ([pair], False)
        rows.extend(pairs)
        wheres.extend([loc] * len(pairs))
        broken.extend([failed] * len(pairs))
    table = finish_pairs(
        rows,
        wheres,
        report,
        ids_given=layout == "rankings" or "id" in records.fields,
        margin_given=layout != "rankings" and "margin" in records.fields,
        broken=broken,
        label=label,
        drop_same_text=not collect,
    )
    return Loaded(table, layout, _by_location(report.items), records.name)


def dropped_rows(loaded: Loaded, shown: int = 5) -> dict | None:
    """The rows ``drop_invalid`` left out, as the pairs' record keeps them (``pairs.attrs``
    ``"dropped"``, written to an audit's summary): their count and the first ``shown``
    problems; None when none was. Warns once, naming them."""
    if not loaded.problems:
        return None
    first = loaded.problems[:shown]
    more = f"; ... ({len(loaded.problems) - shown} more)" if len(loaded.problems) > shown else ""
    warnings.warn(f"{loaded.name}: {len(loaded.problems)} row(s) left out (`drop_invalid`): "
                  + "; ".join(first) + more, RmlensWarning, stacklevel=3)  # fmt: skip
    return {"n": len(loaded.problems), "first": first, "source": loaded.name}


def _by_location(problems: list[str]) -> list[str]:
    """Problems in file order (a stable sort on the line or row number each one names)."""

    def key(message: str) -> int:
        found = LOCATION.search(message)
        return int(found.group(1)) if found else 0

    return sorted(problems, key=key)


def load_pairs(
    source: Any,
    *,
    column_map: Mapping[str, str] | None = None,
    split: str | None = None,
    sep: str | None = None,
    drop_invalid: bool = False,
) -> pd.DataFrame:
    """Load preference pairs into the canonical pair table (DESIGN.md section 1).

    Parameters
    ----------
    source : str, Path, DataFrame, datasets.Dataset, DatasetDict or list of dict
        A JSONL, JSON, CSV/TSV or Parquet file (``.gz`` for the text formats), a folder
        written by ``datasets.save_to_disk``, or a Hugging Face hub name (tried only when no
        such file exists; needs network access).
    column_map : dict of str to str, optional
        ``{canonical_name: name_in_source}``, applied before the layout is detected, e.g.
        ``{"user_id": "annotator_id"}``.
    split : str, optional
        Split of a ``DatasetDict`` or hub dataset; default ``"train"``.
    sep : str, optional
        Separator of a CSV file (one character; ``"\\t"`` or ``"tab"`` for a tab). Default:
        read from the file's header (``,``, ``;``, tab or ``|``); ``.tsv`` files use tabs.
    drop_invalid : bool, default=False
        Leave out the rows that fail a check (a whitespace-only response, a bad id or
        margin, a line that is not JSON) instead of refusing the file: they are counted in
        a warning, with the first few problems, and in ``pairs.attrs["dropped"]``, which an
        audit writes to its summary. Pairs whose chosen and rejected are the same text are
        left out and recorded there whatever this flag (``same_text``: their count).

    Returns
    -------
    pandas.DataFrame
        One row per pair: ``id``, ``prompt``, ``chosen``, ``rejected`` (strings, or message
        lists for conversational data), then ``user_id``, ``chosen_model``,
        ``rejected_model``, ``margin`` when present, then every other field. Rankings expand
        to all strictly ordered pairs with ``margin`` = score or rank gap and ``ranking_id``.

    Raises
    ------
    InputError
        At the first problem, naming the file, line or row, field, expected and found
        (unless ``drop_invalid``).

    Warns
    -----
    RmlensWarning
        When pairs whose chosen and rejected are the same text (no preference) are left out:
        one line naming the pair, or counting them with their lines or rows; with
        ``drop_invalid``, when rows that fail a check are.

    Examples
    --------
    >>> pairs = load_pairs([{"prompt": "2+2?", "chosen": "4", "rejected": "5"}])
    >>> pairs.loc[0, "chosen"], len(pairs.loc[0, "id"])
    ('4', 16)
    """
    loaded = read_pairs(source, column_map=column_map, split=split, sep=sep,
                        drop_invalid=drop_invalid)  # fmt: skip
    dropped = dropped_rows(loaded) if drop_invalid else None
    same = loaded.table.attrs.pop("same_text", [])
    if same:  # left out whatever the flag (already warned): recorded beside the others
        dropped = dropped or {"n": 0, "first": [], "source": loaded.name}
        dropped.update(n=dropped["n"] + len(same), same_text=len(same),
                       first=(dropped["first"] + same)[:5])  # fmt: skip
    if dropped:
        loaded.table.attrs["dropped"] = dropped
    return loaded.table


def load_rankings(
    source: Any,
    *,
    column_map: Mapping[str, str] | None = None,
    split: str | None = None,
    sep: str | None = None,
) -> pd.DataFrame:
    """Load rankings whole, for Plackett-Luce.

    Parameters
    ----------
    source, column_map, split, sep
        As in :func:`load_pairs`; the source must hold ``prompt``, ``responses`` and
        ``ranks`` (1 = best) or ``scores`` (higher = better).

    Returns
    -------
    pandas.DataFrame
        One row per ranking: ``ranking_id``, ``prompt``, ``responses`` (list),
        ``scores`` (list of float, higher = better; from ranks as ``max_rank + 1 - rank``),
        ``ranks`` (list, 1 = best), ``models`` when given, then other fields.
    """
    report = Problems(collect=False)
    label = _labeler(column_map or {})
    records = _read(source, column_map, split, report, sep)
    if detect_layout(records) != "rankings":
        raise InputError(
            f"{records.name}: not a rankings file: expected fields prompt, responses and ranks "
            f"or scores (fields: {', '.join(records.fields)})"
        )
    rows, seen = [], {}
    for i, row in enumerate(records.rows):
        where = records.where(i)
        rank = ranking(row, where, report, label)
        rid = ranking_id(row, where, report, label)
        if rid in seen:
            report(f"{where}: duplicate id {rid!r}, first used on {seen[rid]}")
        seen[rid] = f"{records.unit} {records.locs[i]}"
        rows.append({"ranking_id": rid, **rank})
    first = ["ranking_id", "prompt", "responses", "scores", "ranks"]
    columns = first + [c for c in pd.DataFrame.from_records(rows).columns if c not in first]
    return pd.DataFrame.from_records(rows, columns=columns)


def validate_pairs(
    frame: pd.DataFrame, *, source: str = "<table>", drop_same_text: bool = True
) -> pd.DataFrame:
    """Check a table that already has the canonical columns; return it normalized.

    Parameters
    ----------
    frame : pandas.DataFrame
        Needs ``prompt``, ``chosen`` and ``rejected``; ``id`` is derived when absent.
    source : str, default="<table>"
        Name used in error messages (``"<table> row 3: ..."``, rows counted from 1).
    drop_same_text : bool, default=True
        Leave out pairs whose chosen and rejected are the same text, with a warning (as
        :func:`load_pairs`); False keeps them.

    Returns
    -------
    pandas.DataFrame
        String ids, float margins, canonical column order.

    Raises
    ------
    InputError
        At the first problem.
    """
    records = Records(
        [{k: native(v) for k, v in r.items()} for r in frame.to_dict("records")], source
    )
    records.locs = list(range(1, len(records.rows) + 1))
    if records.rows and not {"prompt", "chosen", "rejected"} <= set(frame.columns):
        missing = [c for c in ("prompt", "chosen", "rejected") if c not in frame.columns]
        raise InputError(f"{source}: missing required column(s) {', '.join(map(repr, missing))}")
    report = Problems(collect=False)
    rows, wheres = [], []
    for i, row in enumerate(records.rows):
        pair = explicit_pair(row, records.where(i), report)
        rows.append(pair)
        wheres.append((records.name, f"row {records.locs[i]}"))
    fields = records.fields
    return finish_pairs(
        rows,
        wheres,
        report,
        ids_given="id" in fields,
        margin_given="margin" in fields,
        drop_same_text=drop_same_text,
    )


def find_problems(
    source: Any,
    *,
    column_map: Mapping[str, str] | None = None,
    split: str | None = None,
    sep: str | None = None,
) -> list[str]:
    """All problems of a preference source, one message each, instead of stopping at the first.

    Parameters
    ----------
    source, column_map, split, sep
        As in :func:`load_pairs`.

    Returns
    -------
    list of str
        Messages like ``"prefs.jsonl line 17: 'chosen' must be a non-empty string, got null"``;
        empty when the source loads cleanly.

    Raises
    ------
    InputError
        When the source cannot be read at all (missing, empty, unknown layout).
    """
    return read_pairs(source, column_map=column_map, split=split, collect=True,
                      sep=sep).problems  # fmt: skip


def save_pairs(pairs: pd.DataFrame, path: str | Path) -> Path:
    """Write a pair table atomically, by suffix: ``.jsonl`` (``.gz``), ``.json``, ``.csv``,
    ``.parquet``.

    Parameters
    ----------
    pairs : pandas.DataFrame
        Any table; message lists are kept as JSON lists (JSON, Parquet) or JSON text (CSV).
    path : str or Path
        Target file.

    Returns
    -------
    Path
        The written path.
    """
    path = Path(path)
    name = path.name.lower()
    records = [{k: native(v) for k, v in r.items()} for r in pairs.to_dict("records")]
    if name.endswith((".jsonl", ".jsonl.gz")):
        text = "".join(strict_json(r, ensure_ascii=False) + "\n" for r in records)
        if name.endswith(".gz"):
            import gzip

            return write_bytes(gzip.compress(text.encode("utf-8"), mtime=0), path)
        return write_text(text, path)
    if name.endswith(".json"):
        return write_text(strict_json(records, ensure_ascii=False, indent=1), path)
    if name.endswith(".parquet"):
        return write_parquet(pairs, path)
    if name.endswith(".csv"):
        flat = pairs.copy()
        for column in flat.columns:
            nested = flat[column].map(lambda v: isinstance(v, (list, dict, np.ndarray)))
            if nested.any():
                flat[column] = [
                    strict_json(v, ensure_ascii=False) if is_nested else v
                    for v, is_nested in zip(flat[column], nested)
                ]
        return write_atomic(path, lambda tmp: flat.to_csv(tmp, index=False))
    raise InputError(f"{path}: unknown output type; use .jsonl, .jsonl.gz, .json, .csv or .parquet")
