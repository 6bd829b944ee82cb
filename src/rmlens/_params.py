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
    :meth:`for_option` words the same fact for the command line (``--runs must be ...``): the
    command line's one error path calls it with the flag of ``param`` (``rmlens.cli._talk``),
    as it rewrites every other backticked parameter name into its flag.
    """

    def __init__(
        self, param: str, owner: str, allowed: str, value: Any, *, message: str | None = None
    ):
        self.param, self.owner, self.allowed, self.value = param, owner, allowed, value
        super().__init__(
            message or f"The '{param}' parameter of {owner} must be {allowed}. Got {value!r}."
        )

    def for_option(self, flag: str) -> str:
        return f"{flag} must be {self.allowed}, got {_shown(self.value)}"


class ParamConflict(ParamError):
    """A nested config sets a field that its owner sets too, to another value.

    ``param``/``value`` are the owner's field (the one that is used), ``other``/``other_value``
    the nested one, as a dotted path (``train.max_length``).
    """

    def __init__(self, param: str, owner: str, value: Any, other: str, other_value: Any):
        self.other, self.other_value = other, other_value
        super().__init__(
            param,
            owner,
            f"equal to {other}={other_value!r} or {other} left at its default",
            value,
            message=(
                f"{other}={other_value!r} conflicts with {param}={value!r} of {owner}; "
                f"set {param} on the {_owner_word(owner)} (its value is the one used)"
            ),
        )

    def for_option(self, flag: str) -> str:
        return (
            f"{flag} {_shown(self.value)} conflicts with {self.other}={self.other_value!r}; "
            f"set it once, with {flag}"
        )


def _owner_word(owner: str) -> str:
    word = owner.removesuffix("Config").lower()
    return word or owner


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ",".join(value)
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
    """The fields of a dataclass, nested configs as dicts and tuples as lists: the same value
    that JSON gives back, so a saved config compares equal to the live one."""
    return dataclasses.asdict(obj, dict_factory=lambda items: {k: _listed(v) for k, v in items})


def _listed(value: Any) -> Any:
    return [_listed(v) for v in value] if isinstance(value, tuple) else value


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
        if not isinstance(value, (list, tuple)):
            return False
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return len(args) != 1 or all(_accepts(args[0], v) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _coerce(hint: Any, value: Any) -> Any:
    """int -> float for a float field; a list -> tuple for a tuple field (JSON has no tuples)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        for h in typing.get_args(hint):
            if h is not type(None) and _accepts(h, value):
                return _coerce(h, value)
        return value
    if hint is float and type(value) is int:
        return float(value)
    if typing.get_origin(hint) is tuple and isinstance(value, list):
        return tuple(value)
    if typing.get_origin(hint) is list and isinstance(value, tuple):
        return list(value)
    return value


def _config_type(hint: Any) -> type | None:
    """The Config class a field holds (``HeadConfig`` or ``HeadConfig | None``), else None."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (
        typing.Union, types.UnionType
    ) else (hint,)
    for h in options:
        if isinstance(h, type) and issubclass(h, Config):
            return h
    return None


def flat_dict(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"head": {"epochs": 40}}`` -> ``{"head.epochs": 40}``; tuples become lists (as JSON)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update(flat_dict(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = list(value) if isinstance(value, tuple) else value
    return flat


def dict_changes(saved: dict[str, Any], now: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(dotted name, saved value, value now)`` of every setting that differs, in order.

    A setting missing on one side shows as ``None`` there.
    """
    old, new = flat_dict(saved), flat_dict(now)
    names = list(new) + [k for k in old if k not in new]
    return [(k, old.get(k), new.get(k)) for k in names if old.get(k) != new.get(k)]


@dataclasses.dataclass(frozen=True)
class Nested:
    """A config held in a field of another config, declared once on the holder (``_nested``).

    Both the holder's checks and the command line read it: the command line offers the
    nested config's fields as options, except ``shared`` and ``owned``.

    Parameters
    ----------
    when : (str, value) or None, default=None
        The holder's field and value under which this config is used (``("mode",
        "frozen")``); None: always.
    shared : tuple of str, default=()
        Fields the holder has too and sets for it: the holder's value is used, and the nested
        one must be its default or equal to it (:class:`ParamConflict` otherwise).
    owned : tuple of str, default=()
        Other fields the holder sets itself or never reads.
    """

    when: tuple[str, Any] | None = None
    shared: tuple[str, ...] = ()
    owned: tuple[str, ...] = ()

    @property
    def not_options(self) -> tuple[str, ...]:
        """The fields that the holder's command does not offer as options."""
        return self.shared + self.owned


class Config:
    """Mixin for config dataclasses: ``check``, ``to_dict``, ``from_dict``, ``replace``.

    Subclasses declare ``_constraints`` (see :func:`check_params`) and may override
    :meth:`_check_more` for rules across fields. Nested config fields are checked too; a
    config that holds others declares them in ``_nested`` (``{"head": Nested(...)}``).
    """

    _constraints: typing.ClassVar[dict[str, Any]] = {}
    _nested: typing.ClassVar[dict[str, Nested]] = {}
    _renamed: typing.ClassVar[dict[str, str]] = {}  # a field's old name -> its name now

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

    def _check_shared(self) -> None:
        """The ``shared`` fields of every nested config (``_nested``): the nested value must
        be its default or equal to ``self``'s (which is the one used), never silently lost."""
        for nested, spec in self._nested.items():
            self._check_shared_of(nested, spec.shared)

    def _check_shared_of(self, nested: str, names: tuple[str, ...]) -> None:
        inner = getattr(self, nested)
        defaults = {f.name: f for f in fields(inner)}
        for name in names:
            value, theirs = getattr(self, name), getattr(inner, name)
            if theirs != value and theirs != _default(defaults[name]):
                raise ParamConflict(name, type(self).__name__, value, f"{nested}.{name}", theirs)

    def to_dict(self) -> dict[str, Any]:
        return config_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        """Build from a (possibly nested) dict; unknown keys and wrong types fail (STYLE.md 6).

        A nested config (``{"head": {"epochs": 10}}``) is built by its own class; missing keys
        keep the field's default config. The result is not checked: call :meth:`check`.
        """
        owner = cls.__name__
        if not isinstance(data, dict):
            raise InputError(f"{owner} must be a table of settings, got {type(data).__name__}")
        data = cls.upgrade(data)
        hints = typing.get_type_hints(cls)
        known = {f.name: f for f in fields(cls) if f.init}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise InputError(
                f"unknown {owner} setting(s): {', '.join(unknown)} "
                f"(known: {', '.join(sorted(known))})"
            )
        values = {}
        for name, value in data.items():
            hint = hints[name]
            nested = _config_type(hint)
            if nested is not None and isinstance(value, nested):
                values[name] = value
            elif nested is not None and isinstance(value, dict):
                base = _default(known[name])  # a partial table updates the field's default
                start = base.to_dict() if isinstance(base, nested) else {}
                values[name] = nested.from_dict({**start, **value})
            elif not _accepts(hint, value):
                raise ParamError(name, owner, f"of type {_hint_name(hint)}", value)
            else:
                values[name] = _coerce(hint, value)
        return cls(**values)

    @classmethod
    def upgrade(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Saved settings with each field saved under an old name (``_renamed``) under its
        name now, nested configs too; so records and TOML files written before a rename
        still load, and resume, as they were."""
        if not isinstance(data, dict):
            return data
        out = {}
        for key, value in data.items():
            new = cls._renamed.get(key)
            out[new if new and new not in data else key] = value
        hints = typing.get_type_hints(cls)
        for name, value in out.items():
            nested = _config_type(hints[name]) if name in hints else None
            if nested is not None and isinstance(value, dict):
                out[name] = nested.upgrade(value)
        return out

    def replace(self, **changes):
        """A copy with ``changes`` applied (validated like :meth:`from_dict`).

        A dict given for a nested config updates it: ``replace(head={"epochs": 3})`` keeps
        the head's other settings.
        """
        merged = self.to_dict()
        for name, value in changes.items():
            current = getattr(self, name, None)
            if isinstance(current, Config) and isinstance(value, dict):
                value = {**current.to_dict(), **value}
            merged[name] = value
        return type(self).from_dict(merged)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _hint_name(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_hint_name(h) for h in typing.get_args(hint))
    if typing.get_origin(hint) is not None:
        return str(hint)  # list[str], tuple[str, ...]
    return "None" if hint is type(None) else getattr(hint, "__name__", str(hint))
