"""``rmlens generalize``: explicit vs implicit RMs in distribution and under shifts."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rmlens._errors import InputError
from rmlens.cli._common import DATA_HELP, load_table, map_option, sep_option
from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters
from rmlens.generalization._config import GeneralizeConfig

GENERALIZE = sections(GeneralizeConfig)


def generalize(
    ctx: typer.Context,
    data: Path = typer.Option(None, "--data", help=DATA_HELP + " Omit with --task persona."),
    out: Path = typer.Option(..., "--out", help="Output directory (finished RMs are reused)."),
    shift_data: Path = typer.Option(
        None, "--shift-data", help="Pairs rewritten with the same meaning and other tokens."
    ),
    column_map: list[str] = map_option(),
    sep: str | None = sep_option(),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
    **options,
) -> None:
    """Train an explicit and an implicit RM on the same data and backbone, and compare them.

    Both are compared in distribution, under token-level shifts and under a domain shift.
    """
    from rmlens.generalization import generalize as run

    config = resolve(ctx, GENERALIZE, options)
    if (data is None) == (config.task is None):
        raise InputError("give exactly one of --data FILE and --task persona")
    pairs = None if data is None else load_table(data, column_map, sep=sep)
    shifted = None if shift_data is None else load_table(shift_data, column_map, sep=sep)
    table = run(pairs, config, out=out, shift_pairs=shifted, quiet=quiet)
    save_config(config, out / "config.toml")
    if as_json:
        typer.echo(json.dumps(table.to_dict("records"), default=float))
        return
    _print(table, out)


def _print(table, out: Path) -> None:
    from rich.table import Table

    from rmlens.cli._talk import Console

    view = Table(title="EX-RM vs IM-RM: accuracy (ties 1/2) and |r+ - r-| / std(r)")
    view.add_column("split", no_wrap=True, min_width=max(len(s) for s in table.split))
    for col in ("n", "EX acc", "IM acc", "EX margin", "IM margin"):
        view.add_column(col, justify="right", no_wrap=True)
    wide = table.pivot(index="split", columns="rm")
    for split in dict.fromkeys(table.split):
        row = wide.loc[split]
        view.add_row(
            split,
            str(int(row[("n", "explicit")])),
            *(
                f"{row[(m, rm)]:.3f}"
                for m in ("accuracy", "norm_margin")
                for rm in ("explicit", "implicit")
            ),
        )
    console = Console(width=max(100, Console().width))
    console.print(view)
    console.print(f"results in {out}/ (generalization.parquet, generalization.png, rms/)")


def register(app: typer.Typer) -> None:
    """Add ``generalize`` to the ``rmlens`` app."""
    app.command("generalize")(with_parameters(generalize, config_parameters(GENERALIZE)))
