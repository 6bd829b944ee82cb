"""Shared pieces of the command line: help texts, the column map, the CSV separator, loading
the pairs."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer

from rmlens import InputError

DATA_HELP = (
    "Pairs: JSONL (.gz too), JSON, CSV/TSV, Parquet, a Hugging Face datasets folder or hub name."
)


RM_HELP = (
    "Reward model: an rmlens RM folder (rmlens train, an ensemble folder too), an experiment "
    "directory of `rmlens memorize` (its runs form an ensemble), an RM preset, or a "
    "sequence-classification model (local path or hub id)."
)


def map_option() -> Any:
    return typer.Option(
        None, "--map", metavar="NEW=OLD", help="Rename a column of the data (repeat)."
    )


SEP_HELP = (
    "Separator of a CSV data file: one character such as ';', '|' or '\\t' (tab). Default: "
    "read from the file's header."
)
def sep_option() -> Any:
    return typer.Option(None, "--sep", metavar="CHAR", help=SEP_HELP)


ROW_PROBLEM = re.compile(r" (?:line|row) \d+: ")  # an error about one row of the data


def drop_invalid_option() -> Any:
    return typer.Option(
        False, "--drop-invalid",
        help="Leave out the rows of the data that fail a check (a whitespace-only response, "
        "a bad id or margin), counted in a warning and in the outputs, instead of stopping "
        "at the first.",
    )  # fmt: skip


def load_table(path: Path, column_map: list[str] | None, *, rankings: bool = False,
               sep: str | None = None, drop_invalid: bool = False):  # fmt: skip
    from rmlens.data import load_pairs, load_rankings

    mapping = parse_column_map(column_map or [])
    if rankings:
        if drop_invalid:
            raise InputError("--drop-invalid applies to pairs, not to rankings (--loss "
                             "plackett-luce): fix or remove the rows the error names")
        return load_rankings(path, column_map=mapping, sep=sep)
    try:
        return load_pairs(path, column_map=mapping, sep=sep, drop_invalid=drop_invalid)
    except InputError as err:
        if not ROW_PROBLEM.search(str(err)):
            raise
        raise InputError(f"{err} (--drop-invalid leaves out the rows that fail, counted)") from None


def parse_column_map(items: Iterable[str] | None) -> dict[str, str]:
    """Parse ``NEW=OLD`` strings into a column map.

    Parameters
    ----------
    items : list of str
        For example ``["user_id=annotator_id", "prompt=question"]``.

    Returns
    -------
    dict of str to str
        ``{new_name: old_name}``, e.g. ``{"user_id": "annotator_id"}``.

    Raises
    ------
    InputError
        When an item is not of the form ``NEW=OLD`` or a new name is given twice.
    """
    mapping: dict[str, str] = {}
    for item in items or []:
        new, sep, old = item.partition("=")
        new, old = new.strip(), old.strip()
        if not sep or not new or not old:
            raise InputError(f"`column_map` {item!r}: expected NEW=OLD, e.g. user_id=annotator_id")
        if new in mapping:
            raise InputError(
                f"`column_map` {item!r}: {new!r} is already mapped from {mapping[new]!r}"
            )
        mapping[new] = old
    return mapping
