"""``rmlens memorize`` and ``rmlens demo``: the counterfactual memorization audit."""

from __future__ import annotations

from pathlib import Path

import typer

from rmlens._errors import InputError
from rmlens.cli._common import handle_errors, option
from rmlens.memorization import AuditConfig
from rmlens.rewards import HeadConfig, TrainConfig


@handle_errors
def memorize(
    data: Path = typer.Option(..., "--data", help="Pair file: JSONL(.gz), CSV, Parquet, HF dir."),
    out: Path = typer.Option(..., "--out", help="Experiment directory (resumed if it exists)."),
    model: str = option(AuditConfig, "model", "--model"),
    runs: int = option(AuditConfig, "runs", "--runs"),
    folds: int = option(AuditConfig, "folds", "--folds"),
    plan: str = option(AuditConfig, "plan", "--plan"),
    head: str = option(HeadConfig, "head", "--head"),
    group_by: str = option(AuditConfig, "group_by", "--group-by"),
    seed: int = option(AuditConfig, "seed", "--seed"),
    max_length: int = option(AuditConfig, "max_length", "--max-length"),
    epochs: int = option(HeadConfig, "epochs", "--epochs"),
    weight_decay: float = option(HeadConfig, "weight_decay", "--weight-decay"),
    use_margin: bool = option(HeadConfig, "use_margin", "--use-margin/--no-margin"),
    mode: str = option(AuditConfig, "mode", "--mode"),
    rm: str = option(TrainConfig, "rm", "--rm"),
    finetune: str = option(TrainConfig, "finetune", "--finetune"),
    backend: str = option(AuditConfig, "backend", "--backend"),
    address: str = option(AuditConfig, "address", "--address"),
    gpus_per_run: float = option(AuditConfig, "gpus_per_run", "--gpus-per-run"),
    cpus_per_run: float = option(AuditConfig, "cpus_per_run", "--cpus-per-run"),
    retries: int = option(AuditConfig, "retries", "--retries"),
    column_map: list[str] = typer.Option(None, "--map", help="Column mapping NEW=OLD (repeat)."),
    attribute: bool = typer.Option(False, "--attribute", help="Run `rmlens attribute` after."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    """Counterfactual memorization audit: TM, TG and CM of every pair over R grouped runs.

    A run that still fails after --retries is reported and the audit finishes without it
    (exit 0, with a warning and the failed runs in summary.json); when every run or 3 in a
    row fail, the error stops the audit (exit 1). Start the same command again to resume.
    """
    from rmlens.data import load_pairs, parse_column_map

    pairs = load_pairs(data, column_map=parse_column_map(column_map or []))
    head_cfg = HeadConfig(
        head=head, epochs=epochs, weight_decay=weight_decay, use_margin=use_margin, seed=seed
    )
    config = AuditConfig(
        model=model,
        runs=runs,
        folds=folds,
        plan=plan,
        group_by=group_by,
        seed=seed,
        max_length=max_length,
        head=head_cfg,
        mode=mode,
        train=TrainConfig(rm=rm, finetune=finetune, seed=seed),
        backend=backend,
        address=address,
        gpus_per_run=gpus_per_run,
        cpus_per_run=cpus_per_run,
        retries=retries,
    )
    try:
        config.check()
    except ValueError as err:
        raise InputError(str(err)) from err
    run_audit(pairs, config, out, attribute=attribute, report=report, quiet=quiet)


def run_audit(
    pairs, config: AuditConfig, out: Path, *, attribute: bool, report: bool, quiet: bool
) -> None:
    from rmlens.memorization import audit

    audit(pairs, config, out, quiet=quiet)
    if attribute:
        from rmlens.attribution import attribute as run_attribution

        run_attribution(out, quiet=quiet)
    if report:
        from rmlens.report import write_report

        write_report(out)
    print_summary(out)


def print_summary(out: Path) -> None:
    """The end-of-audit summary on stdout: category counts, thresholds, most memorized pairs."""
    import json

    from rich.console import Console
    from rich.table import Table

    summary = json.loads((out / "summary.json").read_text())
    config = json.loads((out / "config.json").read_text())
    console = Console()
    t = summary["thresholds"]
    counts = Table(
        title=f"Memorization audit: {summary['n_pairs']} pairs, "
        f"{summary['n_runs_finished']} runs, {config['group_note']}"
    )
    counts.add_column("category")
    counts.add_column("pairs", justify="right")
    counts.add_column("rule")
    rules = {
        "memorized": f"CM >= {t['cm_memorized']}",
        "generalized": f"TM, TG >= {t['learned']}, CM < {t['cm_memorized']}",
        "not_learned": f"TM, TG < {t['learned']}",
        "other": "the rest (e.g. TG > TM)",
        "undefined": "no in-runs or no out-runs (NaN)",
    }
    for name, n in summary["counts"].items():
        counts.add_row(name, str(n), rules[name])
    console.print(counts)
    mean = summary["mean"]
    console.print(f"mean TM {mean['tm']:.3f}  TG {mean['tg']:.3f}  CM {mean['cm']:.3f}")
    dropped = summary["dropped_truncation"]["count"]
    if dropped:
        console.print(f"{dropped} pairs dropped: chosen == rejected after truncation")
    top = Table(title="Most memorized pairs")
    for col in ("id", "tm", "tg", "cm"):
        top.add_column(col)
    for row in summary["most_memorized"][:5]:
        top.add_row(str(row["id"]), *(f"{row[k]:.3f}" for k in ("tm", "tg", "cm")))
    console.print(top)
    files = ["memorization.parquet", "memorization_map.png", "summary.json"]
    files += [name for name in ("attribution.parquet", "report.html") if (out / name).exists()]
    console.print(f"results in {out}/ ({', '.join(files)})")


@handle_errors
def demo(
    out: Path = typer.Option(Path("rmlens-demo"), "--out", help="Experiment directory."),
    pairs: int = typer.Option(1500, "--pairs", help="Synthetic pairs."),
    users: int = typer.Option(30, "--users", help="Synthetic users (the groups)."),
    runs: int = option(AuditConfig, "runs", "--runs"),
    model: str = option(AuditConfig, "model", "--model"),
    seed: int = option(AuditConfig, "seed", "--seed"),
    attribute: bool = typer.Option(
        True, "--attribute/--no-attribute", help="Explain TM/TG/CM with pair features."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    """Offline demo: synthetic pairs with planted mechanisms through the whole audit."""
    from rmlens.data import SynthConfig, synthesize

    data = synthesize(SynthConfig(n_pairs=pairs, n_users=users, seed=seed))
    config = AuditConfig(model=model, runs=runs, seed=seed, head=HeadConfig(head="mlp", seed=seed))
    run_audit(data, config, out, attribute=attribute, report=True, quiet=quiet)


def register(app: typer.Typer) -> None:
    app.command("memorize")(memorize)
    app.command("demo")(demo)
