"""Pieces every converter shares: checked field access, the tally of counts, pair helpers.

Light on purpose (standard library only at import): the command line imports every
converter to build ``rmlens data convert --help``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from rmlens._errors import InputError

TIES = ("drop", "keep")
TIES_HELP = (
    "Pairs whose two responses got the same score: drop them (counted in the report) or keep "
    "them with margin 0 (orientation then arbitrary)."
)
SHOWN_FIELDS = 12


def _describe(value: Any) -> str:
    # lazy: numpy, pandas load only when this runs (the command line imports this module)
    from rmlens.data._schema import describe

    return describe(value)


@dataclass
class Tally:
    """What a conversion read, wrote and left out; becomes the count report.

    ``dropped`` counts *pairs* not written, by reason; ``skipped`` counts other units left
    out (responses, turns, rows); ``notes`` counts facts worth knowing that changed no pair
    (model names not found by a join, tokens stripped).
    """

    records: int = 0
    layout: str | None = None
    dropped: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)
    advance: Callable[[int], None] = field(default=lambda n=1: None, repr=False)

    def drop(self, reason: str, n: int = 1) -> None:
        if n:
            self.dropped[reason] += n

    def each(self, sources: Iterable[Any]) -> Iterator[Record]:
        """Every record of every source, counted, as a :class:`Record`."""
        for records in sources:
            for i, row in enumerate(records.rows):
                self.records += 1
                self.advance(1)
                yield Record(row, records.where(i), records.locs[i])


class Record:
    """One source record with checked field access: errors name file, line, field, got."""

    def __init__(self, row: Mapping[str, Any], where: str, loc: int = 0) -> None:
        self.row, self.where, self.loc = row, where, loc

    def fail(self, name: str, expected: str, value: Any) -> InputError:
        return InputError(
            f"{self.where}: field {name!r} must be {expected}, got {_describe(value)}"
        )

    def missing(self, name: str, dataset: str) -> InputError:
        fields = list(self.row)
        shown = ", ".join(fields[:SHOWN_FIELDS]) + (" ..." if len(fields) > SHOWN_FIELDS else "")
        return InputError(
            f"{self.where}: missing field {name!r} of the {dataset} layout (fields here: {shown})"
        )

    def has(self, name: str) -> bool:
        return name in self.row

    def raw(self, name: str, dataset: str) -> Any:
        if name not in self.row:
            raise self.missing(name, dataset)
        return self.row[name]

    def get(self, name: str, kind: Kind, dataset: str, *, null: bool = False) -> Any:
        """The value of ``name`` parsed by ``kind``; None allowed only with ``null``."""
        value = self.raw(name, dataset)
        if is_missing(value):
            if null:
                return None
            raise self.fail(name, kind.expected, value)
        ok, parsed = kind.parse(value)
        if not ok:
            raise self.fail(name, kind.expected, value)
        return parsed

    def opt(self, name: str, kind: Kind, default: Any = None) -> Any:
        """Like :meth:`get` for a field that may be absent or null (then ``default``)."""
        value = self.row.get(name)
        if is_missing(value):
            return default
        ok, parsed = kind.parse(value)
        if not ok:
            raise self.fail(name, kind.expected, value)
        return parsed


def is_missing(value: Any) -> bool:
    """None, NaN and pandas' missing markers."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(value, float) or type(value).__name__ in ("float32", "float16"):
        return math.isnan(float(value))
    return False


@dataclass(frozen=True)
class Kind:
    """A field type: what to call it in errors and how to parse it."""

    expected: str
    parse: Callable[[Any], tuple[bool, Any]]


def _text(value: Any) -> tuple[bool, Any]:
    return isinstance(value, str), value


def _ident(value: Any) -> tuple[bool, Any]:
    if isinstance(value, bool):
        return False, None
    if isinstance(value, str):
        return bool(value.strip()), value
    if isinstance(value, int) or type(value).__name__.startswith(("int", "uint")):
        return True, str(int(value))
    if isinstance(value, float) and value.is_integer():
        return True, str(int(value))
    return False, None


def _integer(value: Any) -> tuple[bool, Any]:
    if isinstance(value, bool):
        return False, None
    if isinstance(value, str):
        try:
            return True, int(value.strip())
        except ValueError:
            return False, None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return False, None
    return (x.is_integer(), int(x)) if math.isfinite(x) else (False, None)


def _number(value: Any) -> tuple[bool, Any]:
    if isinstance(value, (bool, list, dict)):
        return False, None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return False, None
    return math.isfinite(x), x


_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _boolean(value: Any) -> tuple[bool, Any]:
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return True, bool(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return True, bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return True, value.strip().lower() in _TRUE
    return False, None


def _listed(value: Any) -> tuple[bool, Any]:
    if type(value).__name__ == "ndarray":
        value = value.tolist()
    return isinstance(value, (list, tuple)), list(value) if isinstance(
        value, (list, tuple)
    ) else None


def _mapping(value: Any) -> tuple[bool, Any]:
    return isinstance(value, Mapping), value


def _messages(value: Any) -> tuple[bool, Any]:
    ok, items = _listed(value)
    if not ok or not items:
        return False, None
    good = all(
        isinstance(m, Mapping)
        and isinstance(m.get("role"), str)
        and isinstance(m.get("content"), str)
        for m in items
    )
    return good, [{"role": m["role"], "content": m["content"]} for m in items] if good else None


TEXT = Kind("a string", _text)
IDENT = Kind("a non-empty string or an integer id", _ident)
INTEGER = Kind("an integer", _integer)
NUMBER = Kind("a finite number", _number)
BOOLEAN = Kind("a boolean (true/false)", _boolean)
LIST = Kind("a list", _listed)
MAPPING = Kind("an object (a dict of fields)", _mapping)
MESSAGES = Kind("a non-empty list of {role, content} chat messages", _messages)


def is_empty(text: str | None) -> bool:
    """An unusable response: null, empty or whitespace only."""
    return text is None or not text.strip()


def user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def assistant(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}
