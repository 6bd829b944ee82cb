"""Shared pieces of the command line: error handling and options taken from config dataclasses."""

from __future__ import annotations

import errno
import functools
import sys
from pathlib import Path
from typing import Any

import typer

from rmlens._errors import InputError


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on stderr and return the Exit to raise."""
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(code)


def handle_errors(func):
    """Bad input -> one line on stderr and exit code 2 (DESIGN.md section 6)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except InputError as err:
            raise fail(str(err)) from None
        except OSError as err:
            if err.errno in (errno.ENOSPC, errno.EACCES, errno.EROFS):
                raise fail(f"{err.filename or ''}: cannot write ({err.strerror})") from None
            raise

    return wrapper


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


def load_table(path: Path, column_map: list[str] | None, *, rankings: bool = False):
    from rmlens.data import load_pairs, load_rankings, parse_column_map

    mapping = parse_column_map(column_map or [])
    return (load_rankings if rankings else load_pairs)(path, column_map=mapping)
