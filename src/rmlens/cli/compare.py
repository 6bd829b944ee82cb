"""``rmlens compare DIR [DIR ...] --out DIR``: a thin command over
:func:`rmlens.comparison.compare` and :func:`rmlens.report.write_compare_report`."""

from __future__ import annotations

from pathlib import Path

import typer

from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters
from rmlens.comparison._config import CompareConfig

COMPARE = sections(CompareConfig)


def _cell(row, warn: bool) -> str:
    from rich.markup import escape

    from rmlens.comparison._metrics import DIFFERENCES, figure_text

    text = escape(figure_text(row.value, row.lo, row.hi, row.n, row.few_pairs,
                              row.metric in DIFFERENCES))  # fmt: skip
    return f"[bold red]{text} ![/]" if warn else text


def print_comparison(result, out: Path) -> None:
    """The figures (one row per metric, one column per audit), the agreement beside its
    ceiling, the notes and where the files are."""
    from rich.markup import escape
    from rich.table import Table

    from rmlens.cli._talk import Console
    from rmlens.comparison import _metrics as M

    console = Console()
    labels = [a["label"] for a in result.audits]
    figures = result.figures
    table = Table(title=escape(f"{len(result.audits)} audits side by side: value [bootstrap "
                               "interval over runs]; ! near or below chance"))  # fmt: skip
    table.add_column("metric")
    for label in labels:
        table.add_column(escape(label), overflow="fold")
    metrics = sorted(figures.metric.unique(), key=lambda m: (M.order(m), m))
    family = None
    for metric in metrics:
        if M.family(metric) != family:
            family = M.family(metric)
            table.add_section()
        rows = figures[figures.metric == metric].set_index("audit")
        cells = []
        for label in labels:
            if label not in rows.index:
                cells.append("–")
                continue
            row = rows.loc[label]
            cells.append(_cell(row, bool(row.near_chance)))
        table.add_row(escape(M.label(metric)), *cells)
    console.print(table)
    agreement = result.agreement
    if len(agreement):
        agree = Table(title="Agreement between audits: Spearman over common pairs; ceiling = "
                            "sqrt(reliability_a x reliability_b)")  # fmt: skip
        for col in ("audits", "score", "Spearman", "ceiling", "rel. a", "rel. b", "pairs"):
            agree.add_column(col)
        for r in agreement.itertuples():
            flag = " [bold red]above ceiling[/]" if r.above_ceiling else ""
            agree.add_row(escape(f"{r.audit_a} vs {r.audit_b}"), r.score.upper(),
                          f"{r.spearman:.3f}{flag}", f"{r.ceiling:.3f}",
                          f"{r.reliability_a:.3f}", f"{r.reliability_b:.3f}", str(r.n))
        console.print(agree)
    for label, worst in result.details.get("worst_group", {}).items():
        console.print(f"worst group, {label}: {worst['qualified']} of {worst['groups']} groups of "
                      f"'{worst['column']}' have >= {worst['min_group_pairs']} held-out pairs",
                      markup=False)  # fmt: skip
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    console.print(f"results in {out}/ ({', '.join(result.files)})", markup=False)


def compare(
    ctx: typer.Context,
    dirs: list[Path] = typer.Argument(
        ..., metavar="DIR",
        help="Experiment directories of `rmlens memorize` (a folder holding audits stands "
        "for them).",
    ),  # fmt: skip
    out: Path = typer.Option(
        ..., "--out", help="Comparison directory (may be the audits' parent)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print compare.json instead of tables."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    **options,
) -> None:
    """Compare audits side by side: held-out and worst-group accuracy, counter-bias slices,
    memorization by margin, shortcut reliance and agreement across audits.

    Intervals are percentile bootstraps over each audit's runs. Writes compare.parquet,
    compare.json, compare_*.png and compare.html into --out.
    """
    from rmlens.comparison import compare as run_compare
    from rmlens.report import write_compare_report

    config = resolve(ctx, COMPARE, options)
    result = run_compare(dirs, config, out=out, quiet=quiet)
    save_config(config, out / "compare.toml")
    page = write_compare_report(out)
    result.files += ["compare.toml", page.name]
    if as_json:
        typer.echo((out / "compare.json").read_text(encoding="utf-8"))
        return
    print_comparison(result, out)


def register(app: typer.Typer) -> None:
    """Add ``rmlens compare`` to the command line."""
    app.command("compare")(with_parameters(compare, config_parameters(COMPARE)))
