"""``rmlens generalize``: explicit vs implicit RMs in distribution and under shifts."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import typer

from rmlens import InputError
from rmlens.cli._common import DATA_HELP, drop_invalid_option, load_table, map_option, sep_option
from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters
from rmlens.cli._talk import echo_json
from rmlens.generalization import GeneralizeConfig

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
    drop_invalid: bool = drop_invalid_option(),
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
    load = partial(load_table, column_map=column_map, sep=sep, drop_invalid=drop_invalid)
    pairs = None if data is None else load(data)
    shifted = None if shift_data is None else load(shift_data)
    table = run(pairs, config, out=out, shift_pairs=shifted, quiet=quiet)
    save_config(config, out / "config.toml")
    if as_json:
        echo_json(table.to_dict("records"))
        return
    _print(table, out)


def _print(table, out: Path) -> None:
    """One row per split: its name whole where the console allows (the figures' headers on two
    lines if that makes room; else the name folds, every character kept), the figures never
    wrapped."""
    from rich.markup import escape
    from rich.table import Table

    from rmlens.cli._talk import Console, keep_whole, table_width

    console = Console()
    wide = table.pivot(index="split", columns="rm")
    rows = []
    for split in dict.fromkeys(table.split):
        row = wide.loc[split]
        rows.append([
            str(split),
            str(int(row[("n", "explicit")])),
            *(f"{row[(m, rm)]:.3f}" for m in ("accuracy", "norm_margin")
              for rm in ("explicit", "implicit")),
        ])  # fmt: skip
    figures = ["n", "EX acc", "IM acc", "EX margin", "IM margin"]
    widths = [max(len(r[0]) for r in rows)] + [
        max([len(head)] + [len(r[i]) for r in rows]) for i, head in enumerate(figures, 1)]
    if table_width(widths) > console.width:  # "EX" over "margin": room for the names
        figures = [head.replace(" ", "\n") for head in figures]
    view = Table(title="EX-RM vs IM-RM: accuracy (ties 1/2) and |r+ - r-| / std(r)")
    view.add_column("split", overflow="fold")  # the column that narrows
    for col in figures:
        view.add_column(col, justify="right")
    for cells in rows:
        view.add_row(escape(cells[0]), *cells[1:])
    keep_whole(view, *figures)
    console.print(view)
    console.print(f"results in {out}/ (generalization.parquet, generalization.png, rms/)")


def register(app: typer.Typer) -> None:
    """Add ``generalize`` to the ``rmlens`` app."""
    app.command("generalize")(with_parameters(generalize, config_parameters(GENERALIZE)))
