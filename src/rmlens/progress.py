"""Progress bars on stderr (rich), silenced by ``quiet``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

stderr = Console(stderr=True)


@contextmanager
def progress_bar(label: str, *, total: int, quiet: bool = False) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; shows a bar with an ETA unless ``quiet``."""
    if quiet or total == 0:
        yield lambda n=1: None
        return
    columns = (
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=stderr, transient=False) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n=1: bar.advance(task, n)


log = logging.getLogger("rmlens")


def status(message: str) -> None:
    """Say what a step is doing (``rmlens`` logger, level INFO).

    Silent in a Python session unless logging is configured; the command line shows it on
    stderr unless ``--quiet``.
    """
    log.info(message)
