"""What the command line says: the library's parameter names as flags, its warnings and notes
as ``warning:``/``note:`` lines, its status lines bare on stderr (silenced by ``--quiet``),
each text once per command.

The library names a parameter in backticks (```out` holds an audit of other data``);
:func:`in_flags` rewrites each backticked name that is a parameter of the invoked command into
that parameter's first long option (``--out holds ...``), and :func:`error_text` words a
:class:`~rmlens._params.ParamError` with :meth:`~rmlens._params.ParamError.for_option` the same
way, so an error, a warning and a status line name the flag the user typed.
"""

from __future__ import annotations

import logging
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import typer
from rich.console import Console as _RichConsole

from rmlens import RmlensNote, RmlensWarning

try:  # typer >= 0.26 ships its own copy of click, with its own context stack
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover
    from click import get_current_context

_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_.]*)`")
_FLAGS: ContextVar[dict[str, str] | None] = ContextVar("flags", default=None)


def command_flags(root: Any, argv: Sequence[str]) -> dict[str, str]:
    """``{parameter name: long option}`` of the command that ``argv`` invokes.

    ``root`` is the click group of the app; ``argv`` is walked through its (nested) groups to
    the command named, whose options map a parameter such as ``n_pairs`` to ``--n-pairs``, or
    to the alias typed in ``argv`` (``--pairs``).
    """
    node = root
    for token in argv:
        commands = getattr(node, "commands", None)
        if commands is None:
            break
        if token in commands:
            node = commands[token]
    flags = {}
    for param in getattr(node, "params", []):
        long = [o for o in getattr(param, "opts", []) if o.startswith("--")]
        if param.name and long:
            typed = [o for o in long if any(t == o or t.startswith(o + "=") for t in argv)]
            flags[param.name] = (typed or long)[0]
    return flags


def in_flags(text: str, flags: dict[str, str]) -> str:
    """``text`` with each backticked parameter name of ``flags`` written as its flag."""
    return _NAME.sub(lambda m: flags.get(m.group(1), m.group(0)), text)


def error_text(err: Exception, flags: dict[str, str]) -> str:
    """The one line that ``error:`` prefixes: a parameter error names the flag."""
    from rmlens._params import ParamError

    if isinstance(err, ParamError) and err.param in flags:
        return in_flags(err.for_option(flags[err.param]), flags)
    return in_flags(str(err), flags)


class _Status(logging.Handler):
    """Status lines of the ``rmlens`` logger, bare on the stderr of the moment (a progress bar
    may have redirected it), unless the running command got ``--quiet``; a line already said
    in ``said`` (the same words for each audit of ``rmlens mitigate``) is not said again."""

    def __init__(self, flags: dict[str, str], said: set[str] | None = None):
        super().__init__(logging.INFO)
        self.flags = flags
        self.said = set() if said is None else said

    def emit(self, record: logging.LogRecord) -> None:
        ctx = get_current_context(silent=True)
        if ctx is not None and ctx.params.get("quiet"):
            return
        try:
            text = in_flags(record.getMessage(), self.flags)
            if text not in self.said:
                self.said.add(text)
                print(text, file=sys.stderr)
        except Exception:  # pragma: no cover - as logging.StreamHandler does
            self.handleError(record)


class Console(_RichConsole):
    """A rich console that writes the library's backticked parameter names as the running
    command's flags, in text and in a table's title and caption (the summaries a command
    prints quote the library's notes)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        flags = _FLAGS.get() or {}
        shown = []
        for obj in objects:
            if isinstance(obj, str):
                obj = in_flags(obj, flags)
            else:
                for part in ("title", "caption"):
                    if isinstance(getattr(obj, part, None), str):
                        setattr(obj, part, in_flags(getattr(obj, part), flags))
            shown.append(obj)
        super().print(*shown, **kwargs)


def echo_json(obj: Any) -> None:
    """Print ``obj`` on stdout as a command's ``--json`` output, the one way every command
    writes it: indented by 2, keys in their order, a value JSON has no type for (a path, a
    numpy integer) as its ``str``; NaN as ``null``, so strict readers (jq) parse it
    (:func:`rmlens._io.strict_json`)."""
    from rmlens._io import strict_json  # lazy: numpy and pandas load only when it prints

    typer.echo(strict_json(obj, indent=2))


def text_width(cell: Any) -> int:
    """The widest line of a table cell as it prints: a string's markup read, a
    :class:`~rich.text.Text`'s plain text (0 for any other renderable)."""
    from rich.cells import cell_len
    from rich.errors import MarkupError
    from rich.text import Text

    if isinstance(cell, str):
        try:
            cell = Text.from_markup(cell)
        except MarkupError:
            cell = Text(cell)
    if not isinstance(cell, Text):
        return 0
    return max((cell_len(line) for line in cell.plain.splitlines()), default=0)


def table_width(widths: Sequence[int]) -> int:
    """The width of a rich table (default box, one space of padding each side) whose columns
    hold ``widths`` characters: what a layout needs to print without wrapping a line."""
    return sum(widths) + 3 * len(widths) + 1


def keep_whole(table: Any, *headers: str) -> None:
    """Fix the columns of ``table`` headed ``headers`` at the width of their widest line,
    header included, so that rich narrows the other columns (leave one that may wrap: names
    with ``overflow="fold"``, prose) and never breaks a line of theirs: ``0.83 +- 0.01`` stays
    on one line. On a console too narrow for even that, their lines fold (every character
    kept) rather than end in an ellipsis. Call it after the rows are added."""
    for column in table.columns:
        if column.header in headers:
            column.width = max(text_width(c) for c in [column.header, *column.cells])
            column.overflow = "fold"


@contextmanager
def talking(flags: dict[str, str]) -> Iterator[None]:
    """For one command: library warnings as ``warning:``/``note:`` lines and status lines on
    stderr, each text once (what several audits of one command say alike is said once)."""
    logger = logging.getLogger("rmlens")
    said: set[str] = set()
    handler, level = _Status(flags, said), logger.level
    with warnings.catch_warnings():
        warnings.simplefilter("always", RmlensWarning)  # no registry: `said` dedupes per command
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if not issubclass(category, RmlensWarning):
                return shown(message, category, filename, lineno, file, line)
            word = "note" if issubclass(category, RmlensNote) else "warning"
            text = f"{word}: {in_flags(str(message), flags)}"
            if text not in said:
                said.add(text)
                print(text, file=sys.stderr)

        warnings.showwarning = show
        token = _FLAGS.set(flags)
        logger.addHandler(handler)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        try:
            yield
        finally:
            _FLAGS.reset(token)
            logger.removeHandler(handler)
            logger.setLevel(level)
