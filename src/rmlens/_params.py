"""Declarative parameter checks and config dataclasses, worded alike everywhere (STYLE.md 3, 6).

The bottom layer: every config of every package checks itself with :func:`check_params` and
inherits :class:`Config`, so ``check()`` returns ``self``, unknown keys and type mismatches
fail the same way, and the command line can name the option the user typed
(:class:`ParamError` carries the field name).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import fields
from typing import Any

from rmlens._errors import InputError


class ParamError(InputError):
    """A parameter outside what is allowed: names the parameter, its owner, allowed and got.

    ``str(err)`` reads ``The 'runs' parameter of AuditConfig must be an int > 0. Got 0.``;
    :meth:`for_option` words the same fact for the command line (``--runs must be ...``).
    """

    def __init__(self, param: str, owner: str, allowed: str, value: Any):
        self.param, self.owner, self.allowed, self.value = param, owner, allowed, value
        super().__init__(f"The '{param}' parameter of {owner} must be {allowed}. Got {value!r}.")

    def for_option(self, flag: str) -> str:
        return f"{flag} must be {self.allowed}, got {_shown(self.value)}"


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def check_params(obj: Any, constraints: dict[str, Any]) -> None:
    """Raise :class:`ParamError` for the first field of ``obj`` that breaks its rule.

    ``constraints`` maps a field name to a tuple of allowed values or to a
    ``(predicate, description)`` pair.
    """
    owner = type(obj).__name__
    for name, rule in constraints.items():
        value = getattr(obj, name)
        if isinstance(rule, tuple) and len(rule) == 2 and callable(rule[0]):
            ok, allowed = rule[0](value), rule[1]
        else:
            ok = any(value is v or (type(value) is type(v) and value == v) for v in rule)
            allowed = "one of " + ", ".join(repr(v) for v in rule)
        if not ok:
            raise ParamError(name, owner, allowed, value)


def positive_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def non_negative_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def non_negative(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0


def positive(x: Any) -> bool:
    return non_negative(x) and x > 0


def unit_interval(x: Any) -> bool:
    """In [0, 1)."""
    return non_negative(x) and x < 1


def config_dict(obj: Any) -> dict[str, Any]:
    """The fields of a dataclass, nested configs as dicts."""
    return dataclasses.asdict(obj)


def _accepts(hint: Any, value: Any) -> bool:
    """Whether ``value`` fits the type hint (int fits float; bool fits only bool)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(h, value) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (list, tuple):
        return isinstance(value, (list, tuple))
    if origin is dict:
        return isinstance(value, dict)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


class Config:
    """Mixin for config dataclasses: ``check``, ``to_dict``, ``from_dict``, ``replace``.

    Subclasses declare ``_constraints`` (see :func:`check_params`) and may override
    :meth:`_check_more` for rules across fields. Nested config fields are checked too.
    """

    _constraints: typing.ClassVar[dict[str, Any]] = {}

    def check(self):
        """Raise :class:`ParamError` naming the first bad field; return ``self``."""
        check_params(self, self._constraints)
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Config):
                value.check()
        self._check_more()
        return self

    def _check_more(self) -> None:
        """Rules across fields; raise :class:`ParamError`."""

    def to_dict(self) -> dict[str, Any]:
        return config_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        """Build from a (possibly nested) dict; unknown keys and wrong types fail (STYLE.md 6)."""
        owner = cls.__name__
        if not isinstance(data, dict):
            raise InputError(f"{owner} must be a table of settings, got {type(data).__name__}")
        hints = typing.get_type_hints(cls)
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise InputError(
                f"unknown {owner} setting(s): {', '.join(unknown)} "
                f"(known: {', '.join(sorted(known))})"
            )
        values = {}
        for name, value in data.items():
            hint = hints[name]
            if isinstance(hint, type) and issubclass(hint, Config):
                values[name] = value if isinstance(value, hint) else hint.from_dict(value)
            elif not _accepts(hint, value):
                raise ParamError(name, owner, f"of type {_hint_name(hint)}", value)
            else:
                values[name] = float(value) if hint is float and type(value) is int else value
        return cls(**values)

    def replace(self, **changes):
        """A copy with ``changes`` applied (validated like :meth:`from_dict`)."""
        return type(self).from_dict({**self.to_dict(), **changes})


def _hint_name(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_hint_name(h) for h in typing.get_args(hint))
    return "None" if hint is type(None) else getattr(hint, "__name__", str(hint))
