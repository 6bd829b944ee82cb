"""``rmlens report DIR``: a thin command over :func:`rmlens.report.write_report`."""

from __future__ import annotations

from pathlib import Path

import typer

from rmlens.cli._common import handle_errors, option
from rmlens.report import ReportConfig


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to ``app``."""

    @app.command("report")
    @handle_errors
    def report(
        directory: Path = typer.Argument(
            ..., help="Experiment directory holding memorization.parquet."
        ),
        max_points: int = option(ReportConfig, "max_points", "--max-points"),
        top_k: int = option(ReportConfig, "top_k", "--top-k"),
        max_text_chars: int = option(ReportConfig, "max_text_chars", "--max-text-chars"),
        max_page_mb: float = option(ReportConfig, "max_page_mb", "--max-page-mb"),
        seed: int = option(ReportConfig, "seed", "--seed"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No warnings or status."),
    ) -> None:
        """Write DIR/report.html, one self-contained page of the audit in DIR.

        It opens offline and shows the map, the top pairs and whatever else DIR holds.

        The full table it links to is written beside it as DIR/memorization.csv.
        """
        from rich.console import Console

        from rmlens.report import write_report

        console = Console(stderr=True, quiet=quiet)
        with console.status("writing report.html"):
            config = ReportConfig(
                max_points=max_points,
                top_k=top_k,
                max_text_chars=max_text_chars,
                max_page_mb=max_page_mb,
                seed=seed,
            )
            path = write_report(directory, config, quiet=quiet)
        typer.echo(str(path))
