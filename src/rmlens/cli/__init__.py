"""The ``rmlens`` command line: a Typer app, one module per command (DESIGN.md section 6)."""

from rmlens.cli._app import app, entrypoint, main

__all__ = ["app", "entrypoint", "main"]
