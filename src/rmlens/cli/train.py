"""``rmlens train`` and ``rmlens score``: thin commands over :mod:`rmlens.rewards`.

The options of ``train`` are generated from the fields of ``TrainConfig`` (names, types,
defaults and help), so the command line and the Python API cannot drift apart.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rmlens.cli._common import (
    build_config,
    config_parameters,
    handle_errors,
    load_table,
    with_parameters,
)
from rmlens.rewards import TrainConfig


@handle_errors
def train(
    data: Path = typer.Option(
        ...,
        "--data",
        help="Pairs (JSONL(.gz), CSV, Parquet, HF dir); rankings with --loss plackett-luce.",
    ),
    out: Path = typer.Option(..., "--out", help="RM folder (an interrupted run resumes)."),
    eval_data: Path = typer.Option(None, "--eval-data", help="Pairs evaluated each epoch."),
    column_map: list[str] = typer.Option(None, "--map", help="Column mapping NEW=OLD (repeat)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    as_json: bool = typer.Option(False, "--json", help="Print the last epoch's metrics as JSON."),
    **options,
) -> None:
    """Fine-tune a reward model (explicit or implicit; LoRA or full) into a folder."""
    from rmlens.rewards import train_rm

    config = build_config(TrainConfig, options)
    rankings = config.loss == "plackett-luce"
    pairs = load_table(data, column_map, rankings=rankings)
    evals = None if eval_data is None else load_table(eval_data, column_map, rankings=rankings)
    train_rm(pairs, config, out, eval_data=evals, quiet=quiet)
    history = json.loads((out / "history.json").read_text())
    last = history[-1] if config.ensemble == 1 else [h[-1] for h in history]
    if as_json:
        typer.echo(json.dumps({"out": str(out), "metrics": last}, default=str))
        return
    for i, record in enumerate(last if isinstance(last, list) else [last]):
        name = f"member {i}: " if config.ensemble > 1 else ""
        shown = {k: v for k, v in record.items() if k.endswith(("loss", "accuracy", "margin"))}
        typer.echo(name + "  ".join(f"{k} {v:.4f}" for k, v in shown.items()))
    typer.echo(f"reward model saved in {out}/ (score with: rmlens score --rm {out} --data ...)")


@handle_errors
def score(
    rm: Path = typer.Option(
        ...,
        "--rm",
        help="RM folder (rmlens train, audit runs) or an HF sequence-classification model.",
    ),
    data: Path = typer.Option(..., "--data", help="Pair file to score."),
    out: Path = typer.Option(..., "--out", help="Output pair table (.parquet, .jsonl, .csv)."),
    column_map: list[str] = typer.Option(None, "--map", help="Column mapping NEW=OLD (repeat)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:1, mps."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Score every pair: add r_chosen and r_rejected to the pair table."""
    import numpy as np

    from rmlens.data import save_pairs
    from rmlens.rewards import load_rm, pairwise_accuracy

    pairs = load_table(data, column_map)
    model = load_rm(rm, device=device)
    r_c, r_r = model.score_pairs(pairs)
    table = pairs.assign(r_chosen=np.asarray(r_c, float), r_rejected=np.asarray(r_r, float))
    save_pairs(table, out)
    summary = {
        "out": str(out),
        "n_pairs": len(table),
        "accuracy": pairwise_accuracy(r_c, r_r),
        "margin": float(np.mean(r_c - r_r)),
    }
    if as_json:
        typer.echo(json.dumps(summary))
    else:
        typer.echo(
            f"{len(table)} pairs scored: accuracy {summary['accuracy']:.4f} (ties 1/2), "
            f"mean margin {summary['margin']:.4f} -> {out}"
        )


def register(app: typer.Typer) -> None:
    """Add ``train`` and ``score`` to the ``rmlens`` app."""
    params = config_parameters(TrainConfig, panel="Reward model and training")
    app.command("train")(with_parameters(train, params))
    app.command("score")(score)
