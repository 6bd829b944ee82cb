"""``rmlens overoptimize DIR [DIR ...] --candidates FILE --out DIR``: a thin command over
:func:`rmlens.comparison.overoptimize`."""

from __future__ import annotations

from pathlib import Path

import typer

from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters
from rmlens.comparison._config import OveroptimizeConfig

OVEROPTIMIZE = sections(OveroptimizeConfig)


def _interval(row, name: str, digits: int = 2) -> str:
    value, lo, hi = (getattr(row, f, float("nan")) for f in (name, f"{name}_lo", f"{name}_hi"))
    text = f"{value:.{digits}f}"
    if lo == lo and hi == hi:  # not NaN
        text += f" [{lo:.{digits}f}, {hi:.{digits}f}]"
    return text


def print_overoptimization(found, out: Path) -> None:
    """One row per RM: its summary figures with intervals; then the audit-hacking
    correlations across runs, the notes and where the files are."""
    from rich.markup import escape
    from rich.table import Table

    from rmlens.cli._talk import Console

    console = Console()
    n_max = int(found.curves["n"].max())
    table = Table(title=escape(f"Best-of-n against the gold reward, n up to {n_max}: value "
                               "[bootstrap interval over runs and prompts]"))  # fmt: skip
    for column in ("RM", f"gold at n={n_max}", "peak n", "drop from peak", "area to oracle",
                   "Spearman(proxy, gold)"):  # fmt: skip
        table.add_column(column)
    picks = Table(title=escape(f"What the best-of-{n_max} picks are (mean, or share)"))
    shares = [c for c in found.summary.columns if c.endswith("_at_max_n") and c != "gold_at_max_n"]
    for column in ("RM", *(c.removesuffix("_at_max_n") for c in shares)):
        picks.add_column(column)
    for row in found.summary.itertuples():
        if row.kind == "runs":
            table.add_section()
            picks.add_section()
        table.add_row(escape(row.rm), _interval(row, "gold_at_max_n"), str(row.peak_n),
                      _interval(row, "gold_drop"), _interval(row, "oracle_gap_area"),
                      _interval(row, "spearman"))  # fmt: skip
        picks.add_row(escape(row.rm), *(f"{getattr(row, c):.3g}" for c in shares))
    console.print(table)
    console.print(picks)
    for r in found.hacking["across_runs"]:
        if r["hacking_figure"] in ("oracle_gap_area", "gold_at_max_n") and r["n"]:
            console.print(f"across runs: Spearman({r['audit_figure']}, {r['hacking_figure']}) = "
                          f"{r['spearman']:+.3f} over {r['n']} runs", markup=False)  # fmt: skip
    for note in found.notes:
        console.print(f"note: {note}", markup=False)
    console.print(f"results in {out}/ ({', '.join(found.files)})", markup=False)


def overoptimize(
    ctx: typer.Context,
    dirs: list[Path] = typer.Argument(
        ..., metavar="DIR",
        help="Experiment directories of `rmlens memorize` (a folder holding audits stands "
        "for them, e.g. the directory of `rmlens mitigate`).",
    ),  # fmt: skip
    candidates: Path = typer.Option(
        ..., "--candidates",
        help="Candidate pool: prompt_id, prompt, response, gold per record (`rmlens data "
        "candidates` writes one).",
    ),  # fmt: skip
    out: Path = typer.Option(..., "--out", help="Folder for overoptimization.* (may be DIR)."),
    as_json: bool = typer.Option(
        False, "--json", help="Print overoptimization.json instead of tables."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    **options,
) -> None:
    """Best-of-n overoptimization: how the gold reward of the pick moves as each audit's RMs
    (every run, and ensembles of the runs: mean, min, mean - lambda var) choose among more
    candidates, against KL_bon = log n - (n-1)/n, with the oracle as the ceiling.

    Writes overoptimization.parquet, overoptimization_runs.parquet, overoptimization.json
    and overoptimization*.png into --out.
    """
    from rmlens.comparison import overoptimize as run

    config = resolve(ctx, OVEROPTIMIZE, options)
    found = run(dirs, candidates, config, out=out, quiet=quiet)
    save_config(config, out / "overoptimization.toml")
    found.files.append("overoptimization.toml")
    if as_json:
        typer.echo((out / "overoptimization.json").read_text(encoding="utf-8"))
        return
    print_overoptimization(found, out)


def register(app: typer.Typer) -> None:
    """Add ``rmlens overoptimize`` to the command line."""
    app.command("overoptimize")(with_parameters(overoptimize, config_parameters(OVEROPTIMIZE)))
