"""``rmlens export RM --out DIR``: a thin command over :func:`rmlens.hub.export_rm`."""

from __future__ import annotations

from pathlib import Path

import typer

from rmlens.cli._options import config_parameters, resolve, sections, with_parameters
from rmlens.rewards import ExportConfig

EXPORT = sections(ExportConfig)


def export(
    ctx: typer.Context,
    rm: Path = typer.Argument(
        ..., metavar="RM", help="An rmlens RM folder (rmlens train) or an audit's directory."
    ),
    out: Path = typer.Option(..., "--out", help="Folder to write the Hugging Face model into."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No status lines."),
    **options,
) -> None:
    """Write RM as a standard Hugging Face model folder with a model card.

    An explicit RM on a causal LM becomes an AutoModelForSequenceClassification (LoRA
    merged, the head in the `score` layer) that transformers, TRL and RewardBench load; an
    implicit RM exports its policy as a causal LM. The rewards are checked against rmlens's
    on probe pairs before the command returns.
    """
    from rmlens.hub import export_rm

    config = resolve(ctx, EXPORT, options)
    result = export_rm(rm, out, run=config.run)
    say_exported(result, quiet)


def say_exported(result, quiet: bool) -> None:
    """One line on what was written and how closely it scores as rmlens does."""
    if quiet:
        return
    what = ("AutoModelForSequenceClassification" if result.kind == "sequence_classification"
            else "AutoModelForCausalLM (the implicit RM's policy)")  # fmt: skip
    line = f"{what} written to {result.path}/ with README.md (format {result.format})"
    if result.kind == "sequence_classification":
        line += f"; max |difference| from rmlens's rewards on probe pairs {result.max_abs_diff:.1e}"
        if result.offset:
            line += f", offset {result.offset:.4g} recorded (the score layer has no bias)"
    typer.echo(line)


def register(app: typer.Typer) -> None:
    """Add the ``export`` command to ``app``."""
    app.command("export")(with_parameters(export, config_parameters(EXPORT)))
