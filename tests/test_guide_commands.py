"""The guides' ``rmlens`` command lines parse as the command line would take them: every
flag exists on its command and takes the values given (the pages are built strictly by
``test_docs``; this checks what a reader copies)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer

DOCS = Path(__file__).resolve().parents[1] / "docs" / "guide"


def command_lines(page: Path) -> list[str]:
    """The ``rmlens ...`` lines of a page's code blocks, continuation lines joined and
    comments cut."""
    text = page.read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [ln.split("  #")[0].strip() for ln in text.splitlines()]
    return [ln for ln in lines if ln.startswith("rmlens ")]


@pytest.mark.parametrize("page", ["trl.rst"])
def test_every_command_of_the_guide_parses(page):
    from rmlens.cli._app import app

    root = typer.main.get_command(app)
    found = command_lines(DOCS / page)
    assert found, f"{page}: no rmlens command found"
    for line in found:
        words = shlex.split(line)[1:]
        node, args = root, words
        while args and hasattr(node, "commands") and args[0] in node.commands:
            node, args = node.commands[args[0]], args[1:]
        node.make_context(f"rmlens {words[0]}", list(args))  # raises on an unknown flag
        assert re.match(r"^(memorize|train|export|evaluate|sweep)$", words[0]), line
