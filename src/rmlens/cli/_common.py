"""Shared pieces of the command line: error handling and options taken from config dataclasses."""

from __future__ import annotations

import functools
import inspect
import sys
import typing
from dataclasses import MISSING, fields
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
            if err.errno in (28, 13, 30):  # ENOSPC, EACCES, EROFS
                raise fail(f"{err.filename or ''}: {err.strerror}") from None
            raise

    return wrapper


def option(config_cls: type, name: str, *flags: str, **kwargs: Any) -> Any:
    """A Typer option whose default and help come from a config dataclass field."""
    f = {f.name: f for f in fields(config_cls)}[name]
    default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
    return typer.Option(default, *flags, help=f.metadata.get("help", ""), **kwargs)


_NEGATIVE = {"use_margin": "--no-margin"}


def config_parameters(
    config_cls: type, *, skip: tuple[str, ...] = (), defaults=None, panel: str | None = None
) -> list[inspect.Parameter]:
    """Typer parameters for the fields of a config dataclass: ``lora_r`` -> ``--lora-r``.

    Defaults come from the dataclass, or from the instance ``defaults`` when given.
    """
    hints = typing.get_type_hints(config_cls)
    params = []
    for f in fields(config_cls):
        if f.name in skip or f.name.startswith("_"):
            continue
        flag = "--" + f.name.replace("_", "-")
        if hints[f.name] is bool:
            flag = f"{flag}/{_NEGATIVE.get(f.name, '--no-' + f.name.replace('_', '-'))}"
        if defaults is not None:
            default = getattr(defaults, f.name)
        else:
            default = f.default if f.default is not MISSING else f.default_factory()
        option = typer.Option(default, flag, help=f.metadata.get("help", ""), rich_help_panel=panel)
        params.append(
            inspect.Parameter(
                f.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=hints[f.name]
            )
        )
    return params


def with_parameters(func, extra: list[inspect.Parameter]):
    """Give ``func(**kwargs)`` a signature: its own parameters, then ``extra``."""
    own = [
        p
        for p in inspect.signature(func).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    func.__signature__ = inspect.Signature(own + extra)
    return func


def build_config(config_cls: type, values: dict, **fixed):
    names = {f.name for f in fields(config_cls)}
    config = config_cls(**{k: v for k, v in values.items() if k in names}, **fixed)
    try:
        config.check()
    except ValueError as err:
        raise InputError(str(err)) from err
    return config


def load_table(path: Path, column_map: list[str] | None, *, rankings: bool = False):
    from rmlens.data import load_pairs, load_rankings, parse_column_map

    mapping = parse_column_map(column_map or [])
    return (load_rankings if rankings else load_pairs)(path, column_map=mapping)
