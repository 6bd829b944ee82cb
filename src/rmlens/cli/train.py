"""``rmlens train`` and ``rmlens score``: thin commands over :mod:`rmlens.rewards`.

The options of ``train`` are generated from the fields of ``TrainConfig`` (names, types,
defaults and help), so the command line and the Python API cannot drift apart.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rmlens import InputError
from rmlens.cli._common import (
    DATA_HELP,
    RM_HELP,
    drop_invalid_option,
    load_table,
    map_option,
    sep_option,
)
from rmlens.cli._options import (
    config_beside,
    config_parameters,
    resolve,
    save_config,
    sections,
    with_parameters,
)
from rmlens.cli._talk import echo_json
from rmlens.rewards import ScoreConfig, TrainConfig

# read by an audit's runs only (`rmlens memorize --mode finetune`), never by training one RM:
# the paired counterfactuals' estimator and the blocks it reads
NOT_READ = ("influence", "influence_blocks")
TRAIN = sections(TrainConfig, skip=NOT_READ)
SCORE = sections(ScoreConfig)


def train(
    ctx: typer.Context,
    data: Path = typer.Option(
        ...,
        "--data",
        help="Pairs (JSONL(.gz), CSV, Parquet, HF dir); rankings with --loss plackett-luce.",
    ),
    out: Path = typer.Option(..., "--out", help="RM folder (an interrupted run resumes)."),
    eval_data: Path = typer.Option(
        None, "--eval-data", help="Pairs evaluated each epoch, in place of --eval-fraction's split."
    ),
    column_map: list[str] = map_option(),
    sep: str | None = sep_option(),
    drop_invalid: bool = drop_invalid_option(),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    as_json: bool = typer.Option(False, "--json", help="Print the last epoch's metrics as JSON."),
    export: Path = typer.Option(
        None, "--export", help="Also write the RM as a standard Hugging Face model folder here."
    ),
    **options,
) -> None:
    """Fine-tune a reward model (explicit or implicit; LoRA or full) into a folder."""
    from rmlens.attribution import objective_bias
    from rmlens.hub import train as run_training

    config = resolve(ctx, TRAIN, options)
    if export is not None and config.ensemble > 1:
        raise InputError("--export takes one RM, not an ensemble: train, then export a member "
                         "with `rmlens export OUT --run 000 --out DIR`")
    rankings = config.loss == "plackett-luce"
    pairs = load_table(data, column_map, rankings=rankings, sep=sep, drop_invalid=drop_invalid)
    evals = None if eval_data is None else load_table(
        eval_data, column_map, rankings=rankings, sep=sep, drop_invalid=drop_invalid
    )
    bias = objective_bias(pairs, config)
    run_training(pairs, config, out=out, eval_data=evals, bias=bias, quiet=quiet)
    save_config(config, out / "config.toml")
    if export is not None:
        from rmlens.cli.export import say_exported
        from rmlens.hub import export_rm

        say_exported(export_rm(out, export), quiet or as_json)
    history = json.loads((out / "history.json").read_text())
    last = history[-1] if config.ensemble == 1 else [h[-1] for h in history]
    if as_json:
        echo_json({"out": str(out), "metrics": last})
        return
    for i, record in enumerate(last if isinstance(last, list) else [last]):
        name = f"member {i}: " if config.ensemble > 1 else ""
        shown = {k: v for k, v in record.items() if k.endswith(("loss", "accuracy", "margin"))}
        typer.echo(name + "  ".join(f"{k} {v:.4f}" for k, v in shown.items()))
    typer.echo(f"reward model saved in {out}/ (score with: rmlens score --rm {out} --data ...)")


def score(
    ctx: typer.Context,
    rm: str = typer.Option(..., "--rm", help=RM_HELP),
    data: Path = typer.Option(..., "--data", help=DATA_HELP),
    out: Path = typer.Option(..., "--out", help="Output pair table (.parquet, .jsonl, .csv)."),
    column_map: list[str] = map_option(),
    sep: str | None = sep_option(),
    drop_invalid: bool = drop_invalid_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    **options,
) -> None:
    """Score every pair: add r_chosen and r_rejected to the pair table."""
    import numpy as np

    from rmlens.backbones import FORMATS, warn_truncation
    from rmlens.data import save_pairs
    from rmlens.hub import load_rm, use_format
    from rmlens.stats import pairwise_accuracy

    config = resolve(ctx, SCORE, options)
    pairs = load_table(data, column_map, sep=sep, drop_invalid=drop_invalid)
    try:
        model = load_rm(
            rm,
            device=config.device,
            score_index=config.score_index,
            trust_remote_code=config.trust_remote_code,
            precision=config.precision,
        )
    except InputError as err:
        raise InputError(f"--rm {err}") from None
    use_format(model, config.format, config.max_length)
    truncation = model.truncation(pairs)
    warn_truncation(truncation, len(pairs))
    r_c, r_r = model.score_pairs(pairs)
    table = pairs.assign(r_chosen=np.asarray(r_c, float), r_rejected=np.asarray(r_r, float))
    save_pairs(table, out)
    chosen = model.format in FORMATS and model.format != "auto"  # chat, raw or pair
    resolved = config.replace(format=model.format) if chosen else config
    if truncation is not None:  # the length it scored with, beside the format
        resolved = resolved.replace(max_length=truncation["max_length"])
    save_config(resolved, config_beside(out))  # the format as resolved
    summary = {
        "out": str(out),
        "n_pairs": len(table),
        "accuracy": pairwise_accuracy(r_c, r_r),
        "margin": float(np.mean(r_c - r_r)),
        "format": model.format,
        "truncation": truncation,
    }
    if as_json:
        echo_json(summary)
    else:
        typer.echo(
            f"{len(table)} pairs scored: accuracy {summary['accuracy']:.4f} (ties 1/2), "
            f"mean margin {summary['margin']:.4f} -> {out}"
        )


def register(app: typer.Typer) -> None:
    """Add ``train`` and ``score`` to the ``rmlens`` app."""
    app.command("train")(with_parameters(train, config_parameters(TRAIN)))
    app.command("score")(with_parameters(score, config_parameters(SCORE)))
