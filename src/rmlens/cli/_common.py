"""Shared pieces of the command line: help texts, the column map, the CSV separator, loading
the pairs."""

from __future__ import annotations

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


def load_table(path: Path, column_map: list[str] | None, *, rankings: bool = False,
               sep: str | None = None):  # fmt: skip
    from rmlens.data import load_pairs, load_rankings

    mapping = parse_column_map(column_map or [])
    return (load_rankings if rankings else load_pairs)(path, column_map=mapping, sep=sep)


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
