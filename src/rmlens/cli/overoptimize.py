"""``rmlens overoptimize DIR [DIR ...] --candidates FILE --out DIR``: a thin command over
:func:`rmlens.comparison.overoptimize`."""

from __future__ import annotations

from pathlib import Path

import typer

from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters
from rmlens.comparison import OveroptimizeConfig

OVEROPTIMIZE = sections(OveroptimizeConfig)


def _interval(row, name: str, digits: int = 2, sep: str = " ") -> str:
    """``value [lo, hi]``; ``sep`` "\\n" puts the interval on a line of its own."""
    value, lo, hi = (getattr(row, f, float("nan")) for f in (name, f"{name}_lo", f"{name}_hi"))
    text = f"{value:.{digits}f}"
    if lo == lo and hi == hi:  # not NaN
        text += f"{sep}[{lo:.{digits}f}, {hi:.{digits}f}]"
    return text


_HEADS = {"gold_at_max_n": "gold at n={n}", "peak_n": "peak n", "gold_drop": "drop from peak",
          "oracle_gap_area": "area to oracle", "spearman": "Spearman(proxy, gold)"}


def _cell(row, key: str, sep: str) -> str:
    return str(row.peak_n) if key == "peak_n" else _interval(row, key, sep=sep)


def _layout(found, heads: dict, width: int) -> tuple[str, dict, list[list[str]]]:
    """How the summary's figures fit ``width``: ``(sep, widths, tables)``. Each ``value
    [lo, hi]`` on a line, else its interval on a line under it; the headers whole, else
    wrapped between words; in one table, else in as few as it takes (the RM column, its
    words wrapping, in each)."""
    from rmlens.cli._talk import table_width, text_width

    rows = list(found.summary.itertuples())
    rm_full = max(len(str(row.rm)) for row in rows)
    rm_word = max(len(word) for row in rows for word in str(row.rm).split())
    for sep, whole, rm_w in ((" ", True, rm_full), (" ", False, rm_full), (" ", False, rm_word),
                             ("\n", False, rm_full), ("\n", False, rm_word)):  # fmt: skip
        widths = {k: max([text_width(_cell(row, k, sep)) for row in rows]
                         + [len(h) if whole else max(map(len, h.split()))])
                  for k, h in heads.items()}  # fmt: skip
        if table_width([rm_w, *widths.values()]) <= width:
            return sep, widths, [list(heads)]
    tables: list[list[str]] = [[]]
    for key in heads:
        if tables[-1] and table_width([rm_word, *(widths[k] for k in tables[-1] + [key])]) > width:
            tables.append([])
        tables[-1].append(key)
    return sep, widths, tables


def print_overoptimization(found, out: Path) -> None:
    """One row per RM: its summary figures with intervals, never broken inside one (where
    the console is narrow the interval goes under its value, the figures into more tables);
    then the audit-hacking correlations across runs, the notes and where the files are."""
    from rich.markup import escape
    from rich.table import Table

    from rmlens.cli._talk import Console

    console = Console()
    n_max = int(found.curves["n"].max())
    heads = {k: h.format(n=n_max) for k, h in _HEADS.items()}
    sep, widths, tables = _layout(found, heads, console.width)
    for i, keys in enumerate(tables, 1):
        part = f" ({i} of {len(tables)})" if len(tables) > 1 else ""
        table = Table(title=escape(f"Best-of-n against the gold reward, n up to {n_max}: value "
                                   f"[bootstrap interval over runs and prompts]{part}"))
        table.add_column("RM", overflow="fold")  # the column that narrows: its words wrap
        for key in keys:
            table.add_column(heads[key], width=widths[key], overflow="fold")
        for row in found.summary.itertuples():
            if row.kind == "runs":
                table.add_section()
            table.add_row(escape(row.rm), *(_cell(row, key, sep) for key in keys))
        console.print(table)
    picks = Table(title=escape(f"What the best-of-{n_max} picks are (mean, or share)"))
    shares = [c for c in found.summary.columns if c.endswith("_at_max_n") and c != "gold_at_max_n"]
    for column in ("RM", *(c.removesuffix("_at_max_n") for c in shares)):
        picks.add_column(column, overflow="fold")
    for row in found.summary.itertuples():
        if row.kind == "runs":
            picks.add_section()
        picks.add_row(escape(row.rm), *(f"{getattr(row, c):.3g}" for c in shares))
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
