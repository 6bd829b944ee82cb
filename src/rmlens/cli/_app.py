"""The ``rmlens`` app: explicit registration of one module per command, the one exit-code path.

Help is plain click formatting (``rich_markup_mode=None``): paragraphs rewrap to the
terminal and flags show no type. Command modules import only config dataclasses at the
top, so ``rmlens --help`` loads neither torch nor pandas.
"""

from __future__ import annotations

import errno
import sys
import traceback

import click
import typer

from rmlens import InputError, __version__
from rmlens.cli import (
    attribute,
    compare,
    data,
    evaluate,
    export,
    generalize,
    memorize,
    mitigate,
    overoptimize,
    report,
    sae,
    sweep,
    train,
)
from rmlens.cli._talk import command_flags, error_text, talking

# an output that cannot be written: bad input (another --out), not a bug
_UNWRITABLE = (errno.ENOSPC, errno.EACCES, errno.EROFS)
_EXIT: tuple[type, ...] = (click.exceptions.Exit, typer.Exit)
_USAGE: tuple[type, ...] = (click.ClickException,)
_ABORT: tuple[type, ...] = (click.Abort, KeyboardInterrupt)
try:  # typer >= 0.26 ships its own copy of click, with its own exception classes
    from typer._click import exceptions as _vendored

    _USAGE += (_vendored.ClickException,)
    _ABORT += tuple(getattr(_vendored, n) for n in ("Abort",) if hasattr(_vendored, n))
except ImportError:  # pragma: no cover
    pass

app = typer.Typer(
    name="rmlens",
    help="Train reward models on preference data and audit what they learn.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rmlens {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Train reward models on preference data and audit what they learn."""


for _module in (
    memorize, data, attribute, sae, report, sweep, evaluate, train, export, generalize,
    compare, mitigate, overoptimize,
):  # fmt: skip
    _module.register(app)


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv``; return the exit code (0 ok, 2 bad input, 1 internal).

    The one place that turns what the library raises into words and exit codes; for the
    command's duration it also shows the library's warnings, notes and status lines
    (:func:`rmlens.cli._talk.talking`), each naming flags, not parameters.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    command = typer.main.get_command(app)
    flags = command_flags(command, argv)
    try:
        with talking(flags):
            code = command.main(args=argv, prog_name="rmlens", standalone_mode=False)
    except _EXIT as err:
        return err.exit_code
    except _USAGE as err:
        err.show()
        return 2
    except InputError as err:
        return _error(error_text(err, flags))
    except OSError as err:
        if err.errno not in _UNWRITABLE:
            return _internal()
        return _error(f"{err.filename or ''}: cannot write ({err.strerror})")
    except _ABORT:
        print("aborted", file=sys.stderr)
        return 1
    except Exception:
        return _internal()
    return code if isinstance(code, int) else 0


def _error(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _internal() -> int:
    traceback.print_exc()
    return _error("internal error (the traceback above); please report it", 1)


def entrypoint() -> None:
    sys.exit(main(sys.argv[1:]))
