"""Declarative parameter checks, worded alike everywhere (STYLE.md 3)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def check_params(obj: Any, constraints: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming parameter, owner, what is allowed and what was given.

    ``constraints`` maps a field name to a tuple of allowed values or to a
    ``(predicate, description)`` pair.
    """
    owner = type(obj).__name__
    for name, rule in constraints.items():
        value = getattr(obj, name)
        if isinstance(rule, tuple) and len(rule) == 2 and callable(rule[0]):
            ok, allowed = rule[0](value), rule[1]
        else:
            ok, allowed = value in rule, "one of " + ", ".join(repr(v) for v in rule)
        if not ok:
            raise ValueError(f"The '{name}' parameter of {owner} must be {allowed}. Got {value!r}.")


def config_dict(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def positive_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def non_negative(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0


def positive(x: Any) -> bool:
    return non_negative(x) and x > 0
