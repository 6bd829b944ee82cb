"""``rmlens generalize``: explicit vs implicit RMs in distribution and under shifts."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rmlens._errors import InputError
from rmlens.cli._common import (
    build_config,
    config_parameters,
    handle_errors,
    load_table,
    with_parameters,
)
from rmlens.generalization import GeneralizeConfig
from rmlens.generalization._config import default_train
from rmlens.rewards import TrainConfig

_TRAIN_SKIP = ("rm", "ensemble", "loss", "save_steps")


@handle_errors
def generalize(
    data: Path = typer.Option(None, "--data", help="Pair file (omit with --task persona)."),
    out: Path = typer.Option(..., "--out", help="Output directory (finished RMs are reused)."),
    shift_data: Path = typer.Option(
        None, "--shift-data", help="Pairs rewritten with the same meaning and other tokens."
    ),
    column_map: list[str] = typer.Option(None, "--map", help="Column mapping NEW=OLD (repeat)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
    **options,
) -> None:
    """Train an explicit and an implicit RM on the same data and backbone; compare them in
    distribution, under token-level shifts and under a domain shift."""
    from rmlens.generalization import generalize as run

    train = build_config(TrainConfig, options)
    config = build_config(GeneralizeConfig, options, train=train)
    if (data is None) == (config.task is None):
        raise InputError("give exactly one of --data FILE and --task persona")
    pairs = None if data is None else load_table(data, column_map)
    shifted = None if shift_data is None else load_table(shift_data, column_map)
    table = run(pairs, config, out, shift_pairs=shifted, quiet=quiet)
    if as_json:
        typer.echo(json.dumps(table.to_dict("records"), default=float))
        return
    _print(table, out)


def _print(table, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

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
    params = config_parameters(GeneralizeConfig, skip=("train",), panel="Data and shifts")
    params += config_parameters(
        TrainConfig, skip=_TRAIN_SKIP, defaults=default_train(), panel="Training (both RMs)"
    )
    app.command("generalize")(with_parameters(generalize, params))
