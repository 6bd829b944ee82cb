"""``convert``: a public dataset in its native layout -> the canonical pair table + counts."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from rmlens import __version__
from rmlens._errors import InputError
from rmlens._io import write_json
from rmlens.data._load import save_pairs, validate_pairs
from rmlens.data._schema import CORE_COLUMNS
from rmlens.data.converters._common import Tally
from rmlens.data.converters._registry import Converter, get_converter
from rmlens.data.converters._source import read_sources
from rmlens.progress import progress_bar

OUTPUT_SUFFIXES = (".jsonl.gz", ".jsonl", ".json", ".csv", ".parquet")
MAX_LISTED_VALUES = 12
PROGRESS_FROM = 5000  # records; smaller conversions take well under a second


def convert(name: str, source: Any, *, split: str | None = None, **options: Any) -> pd.DataFrame:
    """Convert a public preference dataset to the canonical pair table (DESIGN.md section 1).

    Parameters
    ----------
    name : str
        The dataset: ``"prism"``, ``"community-alignment"``, ``"ultrafeedback"``,
        ``"helpsteer2"``, ``"chatbot-arena"`` or ``"shp"`` (see ``converter_names()``).
    source : str, Path, DataFrame, datasets.Dataset or list of dict
        A file or folder in the dataset's native layout, records already loaded, or a
        Hugging Face dataset id (needs the hub; offline this fails with one line saying so).
    split : str, optional
        Split of a ``datasets`` folder or hub dataset, or the file-name prefix of the files
        to read from a folder (default: the dataset's usual training split).
    **options
        The dataset's options (``rmlens data convert --help`` lists them), e.g.
        ``ties="keep"`` for PRISM or ``models_from="openbmb_ultrafeedback.jsonl"``.

    Returns
    -------
    pandas.DataFrame
        One row per pair: ``id``, ``prompt``, ``chosen``, ``rejected``, then ``user_id``,
        ``chosen_model``, ``rejected_model``, ``margin`` where the dataset has them, then the
        dataset's own ids, turn and sampling fields. ``attrs["convert_report"]`` holds the
        count report (records read, pairs written and dropped by reason, users, models,
        margins).

    Raises
    ------
    InputError
        Unknown dataset or option, unreadable source, or a record that does not follow the
        dataset's published layout (naming file, line, field, expected and found).

    Examples
    --------
    >>> rows = [{"question_id": "q1", "model_a": "m1", "model_b": "m2", "winner": "model_b",
    ...          "judge": "u1", "turn": 1,
    ...          "conversation_a": [{"role": "user", "content": "Hi"},
    ...                             {"role": "assistant", "content": "Hello!"}],
    ...          "conversation_b": [{"role": "user", "content": "Hi"},
    ...                             {"role": "assistant", "content": "Hey, how can I help?"}]}]
    >>> pairs = convert("chatbot-arena", rows)
    >>> pairs.loc[0, ["chosen_model", "rejected_model", "user_id"]].tolist()
    ['m2', 'm1', 'u1']
    >>> pairs.loc[0, "chosen"]
    [{'role': 'assistant', 'content': 'Hey, how can I help?'}]
    """
    pairs, report = convert_with_report(name, source, split=split, **options)
    pairs.attrs["convert_report"] = report
    return pairs


def convert_with_report(
    name: str, source: Any, *, split: str | None = None, quiet: bool = True, **options: Any
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`convert`, returning ``(pairs, report)``; ``quiet=False`` shows a progress bar."""
    converter = get_converter(name)
    opts = converter.options.from_dict(options).check()
    sources = read_sources(converter, source, split, opts)
    total = sum(len(r.rows) for r in sources)
    quiet = quiet or total < PROGRESS_FROM
    with progress_bar(f"converting {converter.name}", total=total, quiet=quiet) as advance:
        tally = Tally(advance=advance)
        rows = list(converter.pairs(sources, opts, tally))
    pairs = _frame(rows, tally, converter)
    report = _report(converter, source, split, opts, tally, pairs)
    return pairs, report


def _frame(rows: list[dict[str, Any]], tally: Tally, converter: Converter) -> pd.DataFrame:
    seen: Counter = Counter()
    for row in rows:
        seen[row["id"]] += 1
        if seen[row["id"]] > 1:
            row["id"] = f"{row['id']}-{seen[row['id']]}"
            tally.notes["repeated source ids, made unique with -2, -3, ..."] += 1
    fields: dict[str, None] = {}
    for row in rows:
        fields.update(dict.fromkeys(row))
    columns = [
        c for c in CORE_COLUMNS if c in fields or c in ("id", "prompt", "chosen", "rejected")
    ]
    columns += [c for c in fields if c not in columns]
    frame = pd.DataFrame.from_records(rows, columns=columns)
    # pairs with chosen == rejected stay: the converted file is the dataset, whole
    return validate_pairs(frame, source=f"<{converter.name} conversion>", drop_same_text=False)


def _stats(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return {
        "count": len(values),
        "min": min(values),
        "p25": q[0],
        "median": statistics.median(values),
        "p75": q[2],
        "max": max(values),
        "mean": statistics.fmean(values),
        "zero": sum(v == 0 for v in values),
    }


def _counts(counter: Counter) -> dict[str, int]:
    return {k: int(v) for k, v in sorted(counter.items()) if v}


def _report(
    converter: Converter,
    source: Any,
    split: str | None,
    opts: Any,
    tally: Tally,
    pairs: pd.DataFrame,
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "dataset": converter.name,
        "title": converter.title,
        "source": str(source) if isinstance(source, (str, Path)) else f"<{type(source).__name__}>",
        "split": split,
        "options": opts.to_dict(),
        "layout": tally.layout,
        "records_read": tally.records,
        "pairs_written": len(pairs),
        "pairs_dropped": sum(tally.dropped.values()),
        "dropped": _counts(tally.dropped),
        "skipped": _counts(tally.skipped),
        "notes": _counts(tally.notes),
        "users": None,
        "pairs_per_user": None,
        "models": None,
        "model_appearances": None,
        "margin": None,
        "group_by": converter.group_by,
        "columns": list(pairs.columns),
        "rmlens_version": __version__,
    }
    if "user_id" in pairs and pairs["user_id"].notna().any():
        per_user = pairs["user_id"].value_counts()
        report["users"] = int(per_user.size)
        report["pairs_per_user"] = {
            "min": int(per_user.min()),
            "median": float(per_user.median()),
            "max": int(per_user.max()),
        }
    names = [
        m
        for col in ("chosen_model", "rejected_model")
        if col in pairs
        for m in pairs[col].dropna().tolist()
    ]
    if names:
        counts = Counter(names)
        report["models"] = len(counts)
        report["model_appearances"] = dict(counts.most_common())
    if "margin" in pairs and pairs["margin"].notna().any():
        values = [float(v) for v in pairs["margin"].dropna()]
        report["margin"] = _stats(values)
        distinct = Counter(values)
        if len(distinct) <= MAX_LISTED_VALUES:
            report["margin"]["values"] = {f"{k:g}": n for k, n in sorted(distinct.items())}
    return report


def report_path(out: str | Path) -> Path:
    """Where the count report of a conversion written to ``out`` goes: ``NAME.report.json``."""
    out = Path(out)
    name = out.name
    for suffix in OUTPUT_SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return out.with_name(f"{name}.report.json")


def write_conversion(pairs: pd.DataFrame, report: dict[str, Any], out: str | Path) -> Path:
    """Write the pairs to ``out`` (by suffix) and the report beside them, both atomically.

    Returns
    -------
    Path
        The report's path (see :func:`report_path`).
    """
    out = Path(out)
    if not out.name.lower().endswith(OUTPUT_SUFFIXES):
        raise InputError(
            f"`out` {out}: unknown output type; use .jsonl, .jsonl.gz, .json, .csv or .parquet"
        )
    save_pairs(pairs, out)
    path = report_path(out)
    write_json({**report, "output": str(out)}, path)
    return path
