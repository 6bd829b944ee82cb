"""``rmlens evaluate``: a thin command over :func:`rmlens.evaluation.evaluate`."""

from __future__ import annotations

from pathlib import Path

import typer

from rmlens import InputError
from rmlens.backbones import FORMATS
from rmlens.cli._common import (
    DATA_HELP,
    RM_HELP,
    drop_invalid_option,
    load_table,
    map_option,
    sep_option,
)
from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters
from rmlens.cli._talk import echo_json
from rmlens.evaluation import EvaluateConfig

EVALUATE = sections(EvaluateConfig)
# its own name: evaluate often writes into the audit it evaluates, whose config.toml stays
EVALUATE_TOML = "evaluate.toml"


def evaluate(
    ctx: typer.Context,
    rm: str = typer.Option(..., "--rm", help=RM_HELP),
    data: Path = typer.Option(..., "--data", help=DATA_HELP),
    out: Path = typer.Option(..., "--out", help="Folder for metrics.json, probes, plots."),
    column_map: list[str] = map_option(),
    sep: str | None = sep_option(),
    drop_invalid: bool = drop_invalid_option(),
    as_json: bool = typer.Option(False, "--json", help="Print metrics.json to stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    **options,
) -> None:
    """Accuracy, calibration, reward distribution and shortcut probes of an RM on pairs.

    Writes OUT/metrics.json, probes.parquet, scores.parquet, reliability.png, rewards.png
    and probes.png, and prints a short table. With --calibrate length every metric and probe
    is of the length-calibrated reward r - f(characters), f a LOWESS fit of reward on length
    over all responses (Huang et al. 2024); metrics.json's posthoc_calibration block and the
    table give accuracy and Spearman(reward, length) before and after, and length.png shows f.
    """
    from rmlens.evaluation import evaluate as run_evaluation
    from rmlens.evaluation import resolve_probes

    config = resolve(ctx, EVALUATE, options)
    try:
        resolve_probes(config.probes)
    except ValueError as err:
        raise InputError(f"--probes: {err}") from err
    pairs = load_table(data, column_map, sep=sep, drop_invalid=drop_invalid)
    metrics = run_evaluation(pairs, config, rm=rm, out=out, quiet=quiet)
    if not quiet:  # the result carries its warnings; the command says them
        from rmlens.progress import stderr

        for warning in metrics["warnings"]:
            stderr.print(f"warning: {warning}")
    resolved = metrics["config"].get("format")  # chat, raw or pair, as the RM scored
    save_config(config.replace(format=resolved) if resolved in FORMATS else config,
                out / EVALUATE_TOML)  # fmt: skip
    if as_json:
        echo_json(metrics)
    else:
        print_table(metrics, out)


def register(app: typer.Typer) -> None:
    """Add the ``evaluate`` command to ``app``."""
    app.command("evaluate")(with_parameters(evaluate, config_parameters(EVALUATE)))


def _fmt(x) -> str:
    if isinstance(x, int):
        return str(x)
    return "nan" if x is None or x != x else f"{x:.3f}"


def print_table(metrics: dict, out: Path) -> None:
    """The short summary on stdout: headline metrics, then probe flip rates (probe names
    whole: the metric names wrap instead)."""
    from rich.markup import escape
    from rich.table import Table

    from rmlens.cli._talk import Console, keep_whole

    console = Console()
    posthoc = metrics.get("posthoc_calibration")
    title = f"RM evaluation: {metrics['n_pairs']} pairs"
    crossed = metrics.get("cross_fitted")
    if crossed:
        title += (f", cross-fitted (each scored only by the runs that held it out: "
                  f"{crossed['runs_per_pair']:.1f} runs per pair)")
    if posthoc:
        title += f", {posthoc['method']}-calibrated (LOWESS frac {posthoc['frac']:g})"
    head = Table(title=title)
    head.add_column("metric")
    head.add_column("value", justify="right")
    first = "held-out accuracy (cross-fitted)" if crossed else "accuracy"
    rows = [(first, metrics["accuracy"]), ("ECE", metrics["ece"]),
            ("Brier", metrics["brier"]), ("log-loss", metrics["log_loss"])]  # fmt: skip
    if posthoc:
        rows += [
            ("accuracy before calibration", posthoc["accuracy_before"]),
            ("Spearman(reward, length) before", posthoc["corr_before"]),
            ("Spearman(reward, length) after", posthoc["corr_after"]),
            ("pairs flipped by calibration", posthoc["flipped"]),
        ]
    if "margin_spearman" in metrics:
        rows.append(("Spearman(margin, human)", metrics["margin_spearman"]["rho"]))
    if "temperature" in metrics:
        t = metrics["temperature"]
        rows += [("temperature", t["temperature"]), ("ECE after T", t["ece_after"])]
    if crossed and "in_train" in metrics:
        rows.append(("in-sample accuracy (runs trained on the pair)",
                     metrics["in_train"]["accuracy"]))  # fmt: skip
    elif not crossed:
        for split in ("in_train", "held_out"):
            if split in metrics:
                rows.append((f"accuracy ({split})", metrics[split]["accuracy"]))
    if "ensemble" in metrics:
        e = metrics["ensemble"]
        rows += [
            ("members", e["n_members"]),
            ("disagreement AUROC", e["disagreement_auroc"]),
        ]
    if "rewardbench" in metrics:  # only when the data holds RewardBench's own subsets
        rb = metrics["rewardbench"]
        n = rb.get("n_sections", 4)
        rows.append(("RewardBench score" + (f" ({n} of 4 sections)" if n < 4 else ""),
                     rb["score"]))  # fmt: skip
    for name, value in rows:
        head.add_row(name, _fmt(value))
    keep_whole(head, "value")
    console.print(head)
    if metrics["probes"]:
        probes = Table(title="Shortcut probes (edit one side; flip = sign(r+ - r-) changes)")
        for col in ("probe", "side", "mean shift", "flip rate", "n"):  # a long name folds
            probes.add_column(col, justify="left" if col in ("probe", "side") else "right",
                              overflow="fold")
        for row in metrics["probes"]:
            probes.add_row(
                escape(row["probe"]), row["side"], _fmt(row["mean_shift"]),
                _fmt(row["flip_rate"]), str(row["n"]),
            )  # fmt: skip
        keep_whole(probes, "mean shift", "flip rate", "n")  # the probe's name narrows first
        console.print(probes)
    for warning in metrics["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}")
    if crossed and crossed["left_out"]["count"]:
        console.print(f"note: {crossed['left_out']['count']} pairs left out: no run held them "
                      "out")  # fmt: skip
    written = [*metrics.get("files", ["metrics.json"]), EVALUATE_TOML]
    console.print(f"results in {out}/ ({', '.join(written)})")
