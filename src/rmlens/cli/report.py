"""``rmlens report DIR``: a thin command over :func:`rmlens.report.write_report`."""

from __future__ import annotations

from pathlib import Path

import typer

from rmlens.cli._options import config_parameters, resolve, sections, with_parameters
from rmlens.report import ReportConfig

REPORT = sections(ReportConfig)


def report(
    ctx: typer.Context,
    directory: Path = typer.Argument(
        ..., metavar="DIR", help="Experiment directory holding memorization.parquet."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No warnings or status."),
    **options,
) -> None:
    """Write DIR/report.html, one self-contained page of the audit in DIR.

    It opens offline and shows the map, the top pairs and whatever else DIR holds. The full
    table it links to is written beside it as DIR/memorization.csv.
    """
    from rmlens.cli._talk import Console
    from rmlens.report import write_report

    config = resolve(ctx, REPORT, options)
    console = Console(stderr=True, quiet=quiet)
    with console.status("writing report.html"):
        path = write_report(directory, config, quiet=quiet)
    typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to ``app``."""
    app.command("report")(with_parameters(report, config_parameters(REPORT)))
