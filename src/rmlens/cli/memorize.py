"""``rmlens memorize`` and ``rmlens demo``: the counterfactual memorization audit."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from rmlens import InputError
from rmlens.cli._common import DATA_HELP, drop_invalid_option, load_table, map_option, sep_option
from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters
from rmlens.data import SynthConfig
from rmlens.memorization import AuditConfig

AUDIT = sections(AuditConfig)


def memorize(
    ctx: typer.Context,
    data: Path = typer.Option(..., "--data", help=DATA_HELP),
    out: Path = typer.Option(..., "--out", help="Experiment directory (resumed if it exists)."),
    column_map: list[str] = map_option(),
    sep: str | None = sep_option(),
    drop_invalid: bool = drop_invalid_option(),
    attribute: bool = typer.Option(
        False, "--attribute/--no-attribute", help="Run `rmlens attribute` after the audit."
    ),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    rm: Path | None = typer.Option(
        None, "--rm",
        help="Audit this RM from its one training run instead of training R runs. A folder: "
        "written by `rmlens train` (explicit; LoRA or full) or `rmlens export`; a TRL "
        "RewardTrainer output, merged or its LoRA adapter saved unmerged (adapter_config."
        "json: the cheaper reading); or any AutoModelForSequenceClassification model. --data "
        "must be the pairs it was trained on; each group's removal is a Gauss-Newton step "
        "through its adapters and head (every weight of a merged or full RM).",
    ),  # fmt: skip
    checkpoint_damping: float | None = typer.Option(
        None, "--checkpoint-damping", min=0.0,
        help="With --rm: the Gauss-Newton step's damping, a multiple of tr(G)/min(q, n) "
        "(default: calibrated on the RM's own evaluation split or --eval-data, else the "
        "benchmark's value).",
    ),  # fmt: skip
    eval_data: Path | None = typer.Option(
        None, "--eval-data",
        help="With --rm: pairs the RM never saw (same layout as --data). The Gauss-Newton "
        "step's damping is calibrated on them, as on an rmlens RM's evaluation split, and "
        "their accuracy is its held-out standing; without them an RM from elsewhere gets the "
        "benchmark's damping and CM is uncalibrated.",
    ),  # fmt: skip
    check_runs: int = typer.Option(
        0, "--check-runs", min=0,
        help="With --rm: measure the audit's standing on this data. K (2 or more) paired "
        "fine-tuned runs in the RM's own regime (its training record; for an RM from "
        "elsewhere, the fine-tuning options given, on its adapter's base or --model) are "
        "audited into OUT/check, and the audit states how far one-checkpoint CM follows "
        "them, with intervals. Costs about K trainings of the RM plus K readings.",
    ),  # fmt: skip
    checkpoint_blocks: int | None = typer.Option(
        None, "--checkpoint-blocks", min=1,
        help="With --rm: read the gradients through the linear layers of the RM's last K "
        "blocks and its head only, a cheaper reading of a full or merged RM (default: every "
        "trained weight).",
    ),  # fmt: skip
    **options,
) -> None:
    """Counterfactual memorization audit: TM, TG and CM of every pair over R grouped runs.

    With --target-reliability, whole repeats of the plan are added (from --runs, up to
    --max-runs) until CM's split-half reliability reaches the target; a line after the
    reliability table says whether it did, and why the audit stopped.

    A run that still fails after --retries is reported and the audit finishes without it
    (exit 0, with a warning and the failed runs in summary.json); when every run or
    --abort-after runs in a row fail, the error stops the audit (exit 1). Start the same
    command again to resume.

    Head options (--head, --epochs, --lr, ...) apply to --mode frozen; fine-tuning options
    (--rm-kind, --finetune, --lora-r, --beta, --bf16, ...) to --mode finetune; a shared
    option such as --epochs goes to the mode chosen. With --rm, the RM's own training
    settings hold and only the grouping and output options apply; the fine-tuning options
    set the regime of --check-runs for an RM trained elsewhere.
    """
    # an RM's audit fine-tunes (its check runs): --epochs, --lr, ... are training's
    config = resolve(ctx, AUDIT, options, preset={"mode": "finetune"} if rm else None)
    pairs = load_table(data, column_map, sep=sep, drop_invalid=drop_invalid)
    if eval_data is not None and rm is None:
        raise InputError("--eval-data goes with --rm: an audit of R runs holds pairs out itself")
    if check_runs and rm is None:
        raise InputError("--check-runs goes with --rm: an audit of R runs measures its own "
                         "reliability")  # fmt: skip
    if check_runs == 1:
        raise InputError("--check-runs: 1; expected 0 (none) or 2 or more (CM's reliability, "
                         "which the agreement is corrected by, needs two runs)")  # fmt: skip
    evals = None if eval_data is None else load_table(eval_data, column_map, sep=sep,
                                                      drop_invalid=drop_invalid)  # fmt: skip
    run_audit(pairs, config, out, attribute=attribute, report=report, quiet=quiet, rm=rm,
              damping=checkpoint_damping, blocks=checkpoint_blocks, eval_pairs=evals,
              check_runs=check_runs)  # fmt: skip
    if rm is None:
        save_config(config, out / "config.toml", sections=AUDIT)


def run_audit(
    pairs, config: AuditConfig, out: Path, *, attribute: bool, report: bool, quiet: bool,
    rm: Path | None = None, damping: float | None = None, blocks: int | None = None,
    eval_pairs=None, check_runs: int = 0,
) -> None:
    from rmlens.attribution import objective_bias
    from rmlens.memorization import audit

    if rm is not None:
        from rmlens.memorization import audit_rm

        audit_rm(pairs, rm, config, out=out, device=config.train.device, quiet=quiet,
                 damping=damping, blocks=blocks, eval_data=eval_pairs,
                 check_runs=check_runs)  # fmt: skip
    else:
        trainer_config = config.head if config.mode == "frozen" else config.train
        audit(pairs, config, out=out, bias=objective_bias(pairs, trainer_config), quiet=quiet)
    if attribute:
        from rmlens.attribution import attribute as run_attribution

        run_attribution(out, quiet=quiet)
    if report:
        from rmlens.report import write_report

        write_report(out)
    print_summary(out)


def print_summary(out: Path) -> None:
    """The end-of-audit summary on stdout: the RMs' quality first, the audit's sentences (those
    of the report, :func:`rmlens.memorization.audit_sentences`), the warnings' codes (their
    text went to stderr), category counts and rules, CM's significance, the most memorized
    pairs; last, where the results are."""
    import json

    from rmlens.cli._talk import Console
    from rmlens.memorization import audit_sentences, plan_validation

    summary = json.loads((out / "summary.json").read_text())
    config = json.loads((out / "config.json").read_text())
    plan = None
    if (out / "plan.parquet").is_file():
        import pandas as pd

        plan = pd.read_parquet(out / "plan.parquet")
    said = audit_sentences(summary, plan_validation(plan))
    console = Console()
    if summary.get("rm_quality"):
        console.print(quality_table(summary["rm_quality"]))
    say(console, said.standing, said.regime, said.membership, said.shortcut, said.estimator,
        said.mode, said.checkpoint)  # fmt: skip
    if "dedupe" in said.outcome:
        how = summary["dedupe"]["how"]
        console.print(f"Dedupe (`dedupe` {how}): {said.outcome['dedupe'][1]}", markup=False)
    say(console, said.exactness, said.damping)
    print_reliability(console, summary, said, (config.get("audit") or {}).get("max_runs"))
    if said.warnings:
        codes = ", ".join(code for code, _ in said.warnings)
        console.print(f"{len(said.warnings)} warning(s) on stderr and in summary.json: {codes}",
                      markup=False)  # fmt: skip
    console.print(counts_table(summary, config["group_note"]))
    label, scores = said.outcome["mean"]
    console.print(f"{label}: {scores}", markup=False)
    say(console, said.significant, *said.links)
    if summary["dropped_truncation"]["count"]:
        console.print(": ".join(said.outcome["dropped_truncation"]), markup=False)
    print_most_memorized(console, summary)
    files = ["memorization.parquet", "memorization_map.png", "summary.json"]
    files += [name for name in ("attribution.parquet", "report.html") if (out / name).exists()]
    console.print(f"results in {out}/ ({', '.join(files)})")


def say(console, *sentences) -> None:
    """Print each of the audit's sentences that it has (None: not this audit's), as written."""
    for sentence in sentences:
        if sentence is not None:
            console.print(str(sentence), markup=False)


def print_reliability(console, summary: dict, said, max_runs: int | None) -> None:
    """CM's split-half reliability: the table from 2 runs on, then its notes (below 2 runs,
    why there is none); then how a target reliability stands, or the flags that would reach
    0.8."""
    reliability = summary.get("reliability")
    measured = bool(reliability) and (reliability.get("n_runs") or 0) >= 2
    if measured:
        console.print(reliability_table(reliability))
    if reliability:
        say(console, *(said.reliability_notes
                       or ([] if measured else ["Reliability: fewer than 2 runs."])))  # fmt: skip
    if "target_reliability" in said.outcome:
        console.print(f"Run until reliable: {said.outcome['target_reliability'][1]}",
                      markup=False)  # fmt: skip
    elif reliability:
        more = more_runs_line(reliability, max_runs)
        if more:
            console.print(more, markup=False)


def counts_table(summary: dict, group_note: str):
    """The pairs in each category, with the rule that puts them there."""
    from rich.table import Table

    counts = Table(
        title=f"Memorization audit: {summary['n_pairs']} pairs, "
        f"{summary['n_runs_finished']} run{'' if summary['n_runs_finished'] == 1 else 's'}, "
        f"{group_note}"
    )
    counts.add_column("category (first rule that holds)")
    counts.add_column("pairs", justify="right")
    counts.add_column("rule")
    rules = summary.get("category_rules") or {}
    for name in summary.get("category_order") or summary["counts"]:
        counts.add_row(name, str(summary["counts"].get(name, 0)), rules.get(name, ""))
    return counts


SHOWN = 5  # pairs in the console's most memorized table (summary.json lists more)
RELIABLE = 0.8  # the reliability summary.json's runs_for_0_8 aims at

def more_runs_line(reliability: dict, max_runs: int | None) -> str | None:
    """Where CM's reliability is below ``RELIABLE`` and the prophecy formula gives the runs
    that reach it (``runs_for_0_8``), the flags that run them: ``--target-reliability`` on the
    same directory (its runs kept; with ``--max-runs`` when the default cap is too low), or
    ``--runs`` into a new one."""
    need = (reliability.get("cm") or {}).get("runs_for_0_8")
    runs = reliability.get("n_runs") or 0
    if not isinstance(need, int) or need <= runs:
        return None
    cap = f" --max-runs {need}" if isinstance(max_runs, int) and need > max_runs else ""
    return (f"CM's ranking would reach reliability {RELIABLE} at about {need} runs (now {runs}): "
            f"start the same command again with --target-reliability {RELIABLE}{cap} (it keeps "
            f"the finished runs and adds whole repeats), or use --runs {need} with a new --out")


def print_most_memorized(console, summary: dict) -> None:
    """The most memorized pairs (category memorized, highest CM first), with whether another
    group judged them the other way; then the largest CM among the other pairs, labelled as
    such; then the duplicates and conflicts across groups."""
    from rmlens.memorization import audit_sentences, memorized_note

    rows = summary["most_memorized"][:SHOWN]
    n_memorized = (summary.get("counts") or {}).get("memorized", len(rows))
    conflicts = summary.get("memorized_conflicts") or {}
    show = bool(conflicts.get("conflicts"))  # the conflict column, where the data have any
    if rows:
        table = pair_rows_table("Most memorized pairs (category memorized, highest CM first)",
                                rows, category=False, conflict=show)  # fmt: skip
        if n_memorized < SHOWN:
            table.caption = memorized_note(n_memorized)
        console.print(table)
    else:
        none = summary.get("categories_withheld") or memorized_note(0)
        console.print(f"Most memorized pairs: {none}")
    rest = summary.get("largest_cm_not_memorized") or []
    if rest:
        title = ("Largest CM (no category: withheld)" if summary.get("categories_withheld")
                 else "Largest CM among pairs not categorized memorized")  # fmt: skip
        console.print(pair_rows_table(title, rest[:3], category=True, conflict=show))
    said = audit_sentences(summary)
    say(console, said.conflicts)
    dup = summary.get("duplicates") or {}
    if dup.get("pairs_repeated_across_groups") or dup.get("conflicts_across_groups"):
        console.print(
            f"Across groups ({dup['group_by']}): {dup['pairs_repeated_across_groups']} pairs "
            f"repeated, {dup['conflicts_across_groups']} judged the other way, "
            f"{dup['texts']['in_several_groups']} of {dup['texts']['unique']} responses under "
            "several groups",
            markup=False,
        )
    say(console, said.duplicates)


def pair_rows_table(title: str, rows: list[dict], *, category: bool, conflict: bool):
    """id, TM, TG, CM (and category, conflict) of summary.json pair records."""
    from rich.markup import escape
    from rich.table import Table

    from rmlens.cli._talk import keep_whole

    table = Table(title=title, min_width=len(title) + 2)  # the title on one line
    columns = ["id", "TM", "TG", "CM"] + (["category"] if category else [])
    for col in columns + (["conflict"] if conflict else []):
        table.add_column(col, justify="right" if col in ("TM", "TG", "CM") else "left",
                         overflow="fold")  # an id too long for its column folds, kept whole
    for row in rows:
        cells = [escape(str(row["id"])), *(f"{row[k]:.3f}" for k in ("tm", "tg", "cm"))]
        if category:
            cells.append(str(row.get("category", "")).replace("_", " "))
        if conflict:
            cells.append({True: "yes", False: "no"}.get(row.get("conflict"), "-"))
        table.add_row(*cells)
    keep_whole(table, "TM", "TG", "CM", "conflict")  # the id and category narrow first
    return table


def reliability_table(reliability: dict):
    """Split-half reliability of TM, TG, CM: the halves' Spearman, Spearman-Brown to the
    runs used, and the runs that 0.8 would need (prophecy formula)."""
    from rich.table import Table

    from rmlens._io import number  # lazy: numpy and pandas load when a table is drawn
    from rmlens.cli._talk import keep_whole
    from rmlens.memorization import audit_sentences

    n = reliability.get("n_splits", 0)
    table = Table(
        title=f"Reliability of the pairs' ranking: {reliability.get('n_runs', 0)} runs "
        + ("split run by run (paired)" if reliability.get("split") == "runs" else
           f"in {reliability.get('n_repeats', 0)} whole repeats")
        + f", mean +- std over {n} splits"
    )
    for col in ("score", "split-half", "Spearman-Brown", "runs for 0.8"):
        table.add_column(col, justify="left" if col == "score" else "right")
    for score in ("tm", "tg", "cm"):
        part = reliability.get(score) or {}
        need = part.get("runs_for_0_8")
        table.add_row(
            score.upper(),
            f"{number(part.get('split_half')):.2f} +- "
            f"{number(part.get('split_half_std')):.2f}",
            f"{number(part.get('spearman_brown')):.2f} +- "
            f"{number(part.get('spearman_brown_std')):.2f}",
            str(need) if need else "-",
        )
    keep_whole(table, "split-half", "Spearman-Brown")  # "mean +- std" on one line
    said = audit_sentences({"reliability": reliability})
    if said.reliability:  # what the figures say (the report's caption; its notes follow)
        table.caption = str(said.reliability)
    return table


def quality_table(quality: dict):
    """The RMs' accuracy and log-loss on the pairs they trained on and those they did not (how
    the runs were regularized or stopped is the audit's ``regime`` sentence)."""
    from rich.table import Table

    # lazy: numpy loads when a table is drawn, not for --help
    from rmlens._io import number
    from rmlens.memorization import accuracy_interval

    n_runs = len(quality.get("runs", []))
    table = Table(title="Reward model: 1 run" if n_runs == 1 else
                  f"Reward models: {n_runs} runs, mean +- std over runs")  # fmt: skip
    table.add_column("pairs")
    table.add_column("accuracy", justify="right")
    table.add_column("log-loss", justify="right")
    names = {
        "in_train": "trained on (in)",
        "validation": "validation (neither)",
        "held_out": "held out (out)",
    }
    for split, name in names.items():
        part = quality.get(split)
        if not part or math.isnan(number(part["accuracy"]["mean"])):
            continue  # no such pairs (a one-checkpoint audit holds none out)
        cells = [f"{number(part[m]['mean']):.3f}"
                 + ("" if n_runs == 1 else f" +- {number(part[m]['std']):.3f}")
                 for m in ("accuracy", "log_loss")]  # fmt: skip
        interval = accuracy_interval(quality, split)
        if interval is not None:
            cells[0] += f" [{interval[0]:.2f}, {interval[1]:.2f}]"
            name += f", {quality['runs'][0][split]['n']} pairs"
        table.add_row(name, *cells)
    from rmlens.cli._talk import keep_whole

    keep_whole(table, "accuracy", "log-loss")  # "mean +- std" on one line
    table.caption = f"chance: accuracy {quality.get('chance_accuracy', 0.5)}, log-loss 0.693"
    if n_runs == 1:
        table.caption += "; accuracy [95% Wilson interval over the pairs]"
    return table


DEMO = AUDIT
# the demo's data: those of `rmlens data synth`, smaller, drawn with the audit's seed
DEMO_DATA = sections(SynthConfig, defaults=SynthConfig(n_pairs=1500, n_users=30), skip=("seed",))


def demo(
    ctx: typer.Context,
    out: Path = typer.Option(Path("rmlens-demo"), "--out", help="Experiment directory."),
    attribute: bool = typer.Option(
        True, "--attribute/--no-attribute", help="Explain TM/TG/CM with pair features."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    **options,
) -> None:
    """Offline demo: synthetic pairs with planted mechanisms through the whole audit.

    The data options (--n-pairs, --n-users, the mechanism shares) are those of `rmlens data
    synth` and go in the [synth] table of a --config file; the data take the audit's --seed.
    """
    from rmlens.data import synthesize

    config = resolve(ctx, DEMO, options, ignore=("synth",))
    synth = resolve(ctx, DEMO_DATA, options, table="synth").replace(seed=config.seed)
    run_audit(synthesize(synth), config, out, attribute=attribute, report=True, quiet=quiet)
    save_config(config, out / "config.toml", sections=DEMO, synth=synth)


def register(app: typer.Typer) -> None:
    app.command("memorize")(with_parameters(memorize, config_parameters(AUDIT)))
    app.command("demo")(with_parameters(demo, config_parameters(DEMO + DEMO_DATA)))
