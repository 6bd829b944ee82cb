"""Read preference files into plain records, remembering each record's line or row."""

from __future__ import annotations

import ast
import csv
import gzip
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rmlens._errors import InputError
from rmlens.data._schema import describe, native

JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")
JSON_SUFFIXES = (".json", ".json.gz")
CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")
KNOWN_SUFFIXES = JSONL_SUFFIXES + JSON_SUFFIXES + CSV_SUFFIXES + PARQUET_SUFFIXES
HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
HF_MARKERS = ("dataset_dict.json", "dataset_info.json", "state.json")
CSV_SEPARATORS = ",;\t|"  # what a CSV header is sniffed for, the first of equals winning


@dataclass
class Records:
    """Records read from one source, with the 1-based line or row number of each."""

    rows: list[dict[str, Any]]
    name: str
    unit: str = "row"
    locs: list[int] = field(default_factory=list)
    seen: int = -1
    _fields: list[str] | None = field(default=None, repr=False)

    def where(self, i: int) -> str:
        return f"{self.name} {self.unit} {self.locs[i]}"

    @property
    def fields(self) -> list[str]:
        """All field names, in first-seen order (cached; ``renamed()`` after editing rows)."""
        if self._fields is None:
            seen: dict[str, None] = {}
            for row in self.rows:
                seen.update(dict.fromkeys(row))
            self._fields = list(seen)
        return self._fields

    def renamed(self) -> None:
        self._fields = None


Report = Callable[[str], None]


def read_records(
    source: Any,
    *,
    split: str | None = None,
    report: Report,
    text_fields: Iterable[str] = (),
    list_fields: Iterable[str] = (),
    sep: str | None = None,
) -> Records:
    """Read ``source`` into records.

    ``source`` is a path (JSONL, JSON, CSV/TSV, Parquet, optionally gzipped; a folder written
    by ``datasets.save_to_disk``; a folder of Parquet files), a Hugging Face hub name, a
    DataFrame, a ``datasets.Dataset``/``DatasetDict``, or a list of dicts. Problems with single
    records go to ``report``; a source that cannot be read at all raises InputError.
    ``text_fields`` are read from CSV as strings, an empty cell as "" (ids keep leading
    zeros, "NA" stays text); ``list_fields`` hold JSON lists inside CSV cells. ``sep`` is a
    CSV file's separator (default: read from its header).
    """
    if isinstance(source, pd.DataFrame):
        rows = [{k: native(v) for k, v in r.items()} for r in source.to_dict("records")]
        return _finish(Records(rows, "<DataFrame>"))
    if type(source).__module__.split(".")[0] == "datasets":
        return _finish(_from_hf(source, "<Dataset>", split))
    if isinstance(source, (list, tuple)):
        rows = []
        for i, row in enumerate(source):
            if not isinstance(row, Mapping):
                raise InputError(f"<records> row {i + 1}: expected a dict, got {describe(row)}")
            rows.append(dict(row))
        return _finish(Records(rows, "<records>"))
    if not isinstance(source, (str, os.PathLike)):
        raise InputError(
            f"cannot read preference data from a {type(source).__name__}: pass a file path, "
            "a hub name, a DataFrame, a datasets.Dataset or a list of dicts"
        )
    path = Path(source)
    name = str(source)
    if path.is_dir():
        return _finish(_read_folder(path, name, split))
    if path.exists():
        return _finish(_read_file(path, name, report, set(text_fields), set(list_fields), sep))
    if _suffix(path) in KNOWN_SUFFIXES or not HUB_NAME.match(name):
        raise InputError(f"{name}: no such file or folder")
    return _finish(_read_hub(name, split))


def _finish(records: Records) -> Records:
    if not records.locs:
        records.locs = list(range(1, len(records.rows) + 1))
    return records


def _suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if len(suffixes) == 2 and suffixes[1] == ".gz":
        return "".join(suffixes)
    return suffixes[-1] if suffixes else ""


def _read_file(
    path: Path,
    name: str,
    report: Report,
    text_fields: set[str],
    list_fields: set[str],
    sep: str | None = None,
) -> Records:
    suffix = _suffix(path)
    if suffix in JSONL_SUFFIXES:
        records = _read_jsonl(path, name, report)
    elif suffix in JSON_SUFFIXES:
        records = _read_json(path, name, report)
    elif suffix in CSV_SUFFIXES:
        records = _read_csv(path, name, suffix, text_fields, list_fields, sep)
    elif suffix in PARQUET_SUFFIXES:
        records = _read_parquet(path, name)
    else:
        raise InputError(
            f"{name}: unknown file type {suffix or '(no suffix)'!r}; expected one of "
            + ", ".join(KNOWN_SUFFIXES)
        )
    if records.seen == 0 or (records.seen < 0 and not records.rows):
        raise InputError(f"{name}: empty file, no records found")
    return records


def _open_bytes(path: Path, name: str):
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _read_jsonl(path: Path, name: str, report: Report) -> Records:
    rows: list[dict[str, Any]] = []
    locs: list[int] = []
    bad = 0
    try:
        with _open_bytes(path, name) as f:
            for lineno, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    bad += 1
                    report(f"{name} line {lineno}: not valid UTF-8 text (byte {err.start + 1})")
                    continue
                try:
                    value = json.loads(text.lstrip("\ufeff").rstrip("\r\n"))
                except json.JSONDecodeError as err:
                    bad += 1
                    report(f"{name} line {lineno}: invalid JSON ({err.msg} at column {err.colno})")
                    continue
                if not isinstance(value, dict):
                    bad += 1
                    report(f"{name} line {lineno}: expected a JSON object, got {describe(value)}")
                    continue
                rows.append(value)
                locs.append(lineno)
    except (OSError, EOFError) as err:
        raise InputError(f"{name}: cannot read the file ({err})") from None
    return Records(rows, name, "line", locs, seen=len(rows) + bad)


def _read_json(path: Path, name: str, report: Report) -> Records:
    try:
        with _open_bytes(path, name) as f:
            text = f.read().decode("utf-8-sig")
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise InputError(f"{name}: cannot read the file ({err})") from None
    if not text.strip():
        raise InputError(f"{name}: empty file, no records found")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        if err.msg == "Extra data":
            return _read_jsonl(path, name, report)
        if not text[err.pos :].strip():
            raise InputError(f"{name}: invalid JSON (the file ends early: {err.msg})") from None
        raise InputError(
            f"{name} line {err.lineno}: invalid JSON ({err.msg} at column {err.colno})"
        ) from None
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        if {"chosen", "rejected"} <= set(data) or "responses" in data:
            data = [data]
        elif len(lists) == 1:
            data = lists[0]
    if not isinstance(data, list):
        raise InputError(f"{name}: expected a list of objects, got {describe(data)}")
    rows: list[dict[str, Any]] = []
    locs: list[int] = []
    for i, value in enumerate(data, 1):
        if isinstance(value, dict):
            rows.append(value)
            locs.append(i)
        else:
            report(f"{name} row {i}: expected a JSON object, got {describe(value)}")
    return Records(rows, name, "row", locs, seen=len(data))


def _read_csv(
    path: Path,
    name: str,
    suffix: str,
    text_fields: set[str],
    list_fields: set[str],
    sep: str | None = None,
) -> Records:
    given = sep is not None
    tsv = suffix.startswith(".tsv")
    sep = check_sep(sep) if given else ("\t" if tsv else _sniff_sep(path) or ",")
    try:
        header = pd.read_csv(path, sep=sep, nrows=0).columns
        dtype = {c: str for c in header if c in text_fields}
        empty = {c: [""] for c in header if c not in text_fields}
        frame = pd.read_csv(path, sep=sep, dtype=dtype, keep_default_na=False, na_values=empty)
    except pd.errors.EmptyDataError:
        raise InputError(f"{name}: empty file, no records found") from None
    except pd.errors.ParserError as err:
        raise InputError(_parse_failure(path, name, sep, given or tsv, err)) from None
    except (UnicodeDecodeError, OSError, ValueError) as err:
        raise InputError(f"{name}: not a readable CSV file ({err})".strip()) from None
    rows = []
    for row in frame.to_dict("records"):
        row = {k: native(v) for k, v in row.items()}
        for key, value in row.items():
            if not isinstance(value, str) or value[:1] != "[":
                continue
            if key in list_fields or (key in text_fields and value[:2] == "[{"):
                row[key] = _parse_cell(value)
        rows.append(row)
    return Records(rows, name, "row")


def check_sep(sep: str) -> str:
    """A CSV separator as typed (``;``, ``\\t`` or ``tab`` for a tab) as one character."""
    named = {"\\t": "\t", "tab": "\t", "semicolon": ";", "comma": ",", "pipe": "|"}
    sep = named.get(sep.lower(), sep) if isinstance(sep, str) else sep
    if not isinstance(sep, str) or len(sep) != 1 or sep in '"\r\n':
        raise InputError(f"`sep` must be one character, such as ';' or '\\t', got {sep!r}")
    return sep


def _header(path: Path) -> str:
    """The file's first line (at most 64 KiB), as text; "" when unreadable."""
    try:
        with _open_bytes(path, str(path)) as f:
            return f.readline(1 << 16).decode("utf-8-sig", errors="replace")
    except (OSError, EOFError):
        return ""


def _sniff_sep(path: Path) -> str | None:
    """The separator that splits the header into the most columns (",", ";", tab or "|"),
    None when none splits it: headers are short names, rarely holding a separator."""
    header = _header(path).rstrip("\r\n")
    try:
        widths = {d: len(next(csv.reader([header], delimiter=d), [])) for d in CSV_SEPARATORS}
    except csv.Error:
        return None
    best = max(widths, key=lambda d: widths[d])  # the first of equals: "," before the rest
    return best if widths[best] > 1 else None


def _parse_failure(path: Path, name: str, sep: str, chosen: bool, err: Exception) -> str:
    """One line for a CSV that pandas could not parse, with the separator to try."""
    why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    why = why.removeprefix("Error tokenizing data. C error: ")
    if chosen:
        return f"{name}: could not parse as CSV separated by {sep!r} ({why})"
    if sep != ",":
        return (f"{name}: could not parse as CSV separated by {sep!r}, the separator read from "
                f"its header ({why}); if that is not its separator, pass `sep`")  # fmt: skip
    header = _header(path)
    others = [d for d in CSV_SEPARATORS if d != ","]
    guess = max(others, key=header.count) if any(header.count(d) for d in others) else ";"
    return (f"{name}: could not parse as CSV ({why}); if the file is not comma-separated, "
            f"pass `sep` {guess!r}")  # fmt: skip


def _parse_cell(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        pass

    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value


def _read_parquet(path: Path, name: str) -> Records:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as err:
        raise InputError(f"{name}: not a readable Parquet file ({err})") from None
    if table.num_rows == 0:
        raise InputError(f"{name}: empty file, no rows")
    return Records(table.to_pylist(), name, "row")


def _read_folder(path: Path, name: str, split: str | None) -> Records:
    if any((path / m).exists() for m in HF_MARKERS):
        try:
            import datasets

            data = datasets.load_from_disk(str(path))
        except Exception as err:  # datasets raises many types for a bad folder
            raise InputError(f"{name}: cannot load this datasets folder ({err})") from None
        return _from_hf(data, name, split)
    if any(path.glob("*.parquet")):
        return _read_parquet(path, name)
    raise InputError(
        f"{name}: a folder, but neither a `datasets` save_to_disk folder (no {HF_MARKERS[0]} "
        "or dataset_info.json) nor a folder of .parquet files"
    )


def _read_hub(name: str, split: str | None) -> Records:
    try:
        import datasets

        data = datasets.load_dataset(name, split=split or "train")
    except Exception as err:  # offline, missing, gated: datasets raises many types
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise InputError(
            f"{name}: no such file or folder here, and loading it from the Hugging Face hub "
            f"failed ({type(err).__name__}: {first[:200]}); pass a local file or folder, "
            "or retry with network access"
        ) from None
    return _from_hf(data, f"{name} [{split or 'train'}]", None)


def _from_hf(data: Any, name: str, split: str | None) -> Records:
    if _is_dataset_dict(data):
        splits = list(data.keys())
        chosen = split or "train"
        if chosen not in splits:
            how = f"split {split!r} not found" if split else "no 'train' split"
            raise InputError(f"{name}: {how}; available splits: {', '.join(splits)} (use split=)")
        data, name = data[chosen], f"{name} [{chosen}]"
    elif split is not None:
        raise InputError(f"{name}: split {split!r} given, but this is a single Dataset")
    if len(data) == 0:
        raise InputError(f"{name}: empty dataset, no rows")
    rows = data.to_list() if hasattr(data, "to_list") else [dict(r) for r in data]
    return Records(rows, name)


def _is_dataset_dict(data: Any) -> bool:
    return isinstance(data, dict) or type(data).__name__ == "IterableDatasetDict"
