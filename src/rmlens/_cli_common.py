"""Shared pieces of the command line: error handling and options taken from config dataclasses."""

from __future__ import annotations

import functools
import sys
from dataclasses import MISSING, fields
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
            if err.errno in (28, 13, 30):  # ENOSPC, EACCES, EROFS
                raise fail(f"{err.filename or ''}: {err.strerror}") from None
            raise

    return wrapper


def option(config_cls: type, name: str, *flags: str, **kwargs: Any) -> Any:
    """A Typer option whose default and help come from a config dataclass field."""
    f = {f.name: f for f in fields(config_cls)}[name]
    default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
    return typer.Option(default, *flags, help=f.metadata.get("help", ""), **kwargs)
