"""``rmlens compare DIR [DIR ...] --out DIR``: a thin command over
:func:`rmlens.comparison.compare` and :func:`rmlens.report.write_compare_report`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters
from rmlens.comparison import CompareConfig

COMPARE = sections(CompareConfig)


_PAD = 3  # a table column's padding (one space each side) and its right border
_METRIC_MIN = 20  # the metric column of the side-by-side table wraps its words down to this
NO_VALUE = "\u2013"  # a figure missing, or on too few pairs to be judged (the page's dash)


def _cells(result) -> dict[tuple[str, str], tuple[str, bool]]:
    """``(audit, metric) -> (value [lo, hi], flagged)``: each figure as the tables show it; a
    figure on fewer pairs than ``min_group_pairs`` (``few_pairs``, greyed on the page) as an
    en dash: over a pair or two its value says nothing."""
    from rmlens.comparison.metrics import DIFFERENCES, figure_text

    return {(r.audit, r.metric): (NO_VALUE if r.few_pairs else figure_text(
                r.value, r.lo, r.hi, r.n, False, r.metric in DIFFERENCES), bool(r.near_chance))
            for r in result.figures.itertuples()}  # fmt: skip


def _cell(cell: tuple[str, bool] | None) -> str:
    """A figure's markup: red with a ``!`` when flagged, an en dash when missing."""
    from rich.markup import escape

    if cell is None:
        return NO_VALUE
    text, warn = cell
    return f"[bold red]{escape(text)} ![/]" if warn else escape(text)


def _width(cell: tuple[str, bool] | None) -> int:
    return 1 if cell is None else len(cell[0]) + 2 * cell[1]  # " !" after a flagged one


def _word(text: str) -> int:
    """The longest word of a header, the narrowest it wraps to."""
    return max(map(len, text.split()), default=1)


def _side_by_side(console, labels, metrics, cells, caption: str) -> None:
    """One row per metric, one column per audit, sections by family (few audits)."""
    from rich.markup import escape
    from rich.table import Table

    from rmlens.comparison import metrics as M

    table = Table(title=escape(caption))
    table.add_column("metric")
    for label in labels:
        width = max([_word(label)] + [_width(cells.get((label, m))) for m in metrics])
        table.add_column(escape(label), width=width)  # fixed: only the metric column wraps
    family = None
    for metric in metrics:
        if M.family(metric) != family:
            family = M.family(metric)
            table.add_section()
        table.add_row(escape(M.label(metric)), *[_cell(cells.get((a, metric))) for a in labels])
    console.print(table)


def _by_family(console, labels, metrics, cells, caption: str) -> None:
    """One row per audit, one column per metric: a table per family of metrics, split into
    as many tables as it takes for each figure to fit on one line (many audits)."""
    from itertools import groupby

    from rich.markup import escape
    from rich.table import Table

    from rmlens.comparison import metrics as M

    head, key = caption.split(": ", 1)
    console.print(f"{head}: one row per audit, a table per family of figures\n{key}",
                  markup=False)  # fmt: skip
    audit_w = min(max(map(len, labels)), max(12, console.width // 3))
    room = console.width - 1 - (audit_w + _PAD)
    for family, members in groupby(metrics, M.family):
        chunks: list[list[tuple[str, int]]] = [[]]
        for metric in members:
            w = max([_word(M.label(metric))] + [_width(cells.get((a, metric))) for a in labels])
            if chunks[-1] and sum(c + _PAD for _, c in chunks[-1]) + w + _PAD > room:
                chunks.append([])
            chunks[-1].append((metric, w))
        for i, chunk in enumerate(chunks, 1):
            part = f" ({i} of {len(chunks)})" if len(chunks) > 1 else ""
            table = Table(title=escape(M.FAMILIES.get(family, family) + part))
            table.add_column("audit", width=audit_w, overflow="fold")
            for metric, w in chunk:
                table.add_column(escape(M.label(metric)), width=w)
            for label in labels:
                table.add_row(escape(label), *[_cell(cells.get((label, m))) for m, _ in chunk])
            console.print(table)


def print_comparison(result, out: Path) -> None:
    """The full tables (what ``--verbose`` adds): the figures, the agreement beside its
    ceiling, the worst groups and the notes.

    The figures are one row per metric and one column per audit when the audits fit the
    console side by side; otherwise one row per audit and one column per metric, in a table
    per family of metrics (split further to fit), so no figure wraps. A figure on fewer pairs
    than ``min_group_pairs`` is an en dash, as missing ones are.
    """
    from rich.markup import escape
    from rich.table import Table

    from rmlens.cli._talk import Console, keep_whole
    from rmlens.comparison import metrics as M

    console = Console()
    labels = [a["label"] for a in result.audits]
    metrics = sorted(result.figures.metric.unique(), key=lambda m: (M.order(m), m))
    cells = _cells(result)
    caption = (f"{len(result.audits)} audits side by side: value [bootstrap interval over "
               "runs]; ! near or below chance")  # fmt: skip
    if result.figures.few_pairs.any():
        least = _min_pairs(comparison_record(result, out))
        caption += f"; {NO_VALUE} none, or on fewer than {least} pairs (min_group_pairs)"
    columns = [max([_word(a)] + [_width(cells.get((a, m))) for m in metrics]) for a in labels]
    if 1 + _METRIC_MIN + _PAD + sum(w + _PAD for w in columns) <= console.width:
        _side_by_side(console, labels, metrics, cells, caption)
    else:
        _by_family(console, labels, metrics, cells, caption)
    agreement = result.agreement
    if len(agreement):
        agree = Table(title="Agreement between audits: Spearman over common pairs; ceiling = "
                            "sqrt(reliability_a x reliability_b)")  # fmt: skip
        for col in ("audits", "score", "Spearman", "ceiling", "rel. a", "rel. b", "pairs"):
            agree.add_column(col, overflow="fold")  # the audits' labels narrow, never cut
        for r in agreement.itertuples():
            flag = " [bold red]above ceiling[/]" if r.above_ceiling else ""
            agree.add_row(escape(f"{r.audit_a} vs {r.audit_b}"), r.score.upper(),
                          f"{r.spearman:.3f}{flag}", f"{r.ceiling:.3f}",
                          f"{r.reliability_a:.3f}", f"{r.reliability_b:.3f}", str(r.n))
        keep_whole(agree, "score", "ceiling", "rel. a", "rel. b", "pairs")
        console.print(agree)
    for label, worst in result.details.get("worst_group", {}).items():
        console.print(f"worst group, {label}: {worst['qualified']} of {worst['groups']} groups of "
                      f"'{worst['column']}' have >= {worst['min_group_pairs']} held-out pairs",
                      markup=False)  # fmt: skip
    for note in result.notes:
        console.print(f"note: {note}", markup=False)


def _min_pairs(record: dict) -> int:
    """The pairs a figure needs to be judged: the comparison's ``min_group_pairs``."""
    least = (record.get("config") or {}).get("min_group_pairs")
    return int(least) if isinstance(least, (int, float)) else CompareConfig().min_group_pairs


def comparison_record(result, out: Path) -> dict:
    """What the page reads: ``out/compare.json``; for a result never written there, the same
    fields (audits, figures, details) from ``result`` itself."""
    path = Path(out) / "compare.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    from rmlens._io import jsonable

    return jsonable({"audits": result.audits, "figures": result.figures.to_dict("records"),
                     "details": result.details})  # fmt: skip


ANSWER = "Which objective, at what cost"  # the words that open the page's answer


def answer_lines(record: dict, oo: dict | None = None) -> list[str]:
    """The answer that opens ``compare.html`` (:func:`rmlens.report.comparison_answer`, the
    structure the page renders too), one rich-markup line per headline figure, the audits
    it names in bold; empty where the page has no answer."""
    from rich.markup import escape

    from rmlens.report import comparison_answer

    return ["".join(f"[bold]{escape(text)}[/]" if named else escape(text)
                    for text, named in item) for item in comparison_answer(record, oo)]  # fmt: skip


def print_answer(result, out: Path, *, verbose: bool = False) -> None:
    """The console's last lines: the audits compared, how many warnings the comparison gave,
    which objective at what cost (the page's answer, :func:`answer_lines`), where the full
    tables are and the files written."""
    from rmlens.cli._talk import Console
    from rmlens.report import read_overoptimization

    console = Console()
    record = comparison_record(result, out)
    written = (Path(out) / "compare.json").is_file()  # else: a result never written
    oo = read_overoptimization(Path(out), record) if written else None  # best-of-n curves
    audits = record.get("audits") or []
    plain = [a for a in audits if not a.get("reference")]
    named = ", ".join(str(a.get("label")) + (" (reference)" if a.get("reference") else "")
                      for a in audits)  # fmt: skip
    console.print(f"{len(audits)} audits compared: {named}", markup=False)
    if result.warnings:
        console.print(f"{len(result.warnings)} warning(s) of the comparison on stderr and in "
                      "compare.json", markup=False)  # fmt: skip
    lines = answer_lines(record, oo)
    if lines:
        console.print(f"{ANSWER}:", markup=False)
        for line in lines:
            console.print(f"- {line}")
    elif len(plain) < 2:
        console.print(f"{ANSWER}: one audit (reference rows aside), nothing to choose between",
                      markup=False)  # fmt: skip
    else:
        console.print(f"{ANSWER}: no headline figure has a value on enough pairs for two "
                      "audits", markup=False)  # fmt: skip
    where = (f"full tables: {out / 'compare.parquet'}, {out / 'compare.json'}; the page: "
             f"{out / 'compare.html'}")  # fmt: skip
    console.print(where + ("" if verbose else " (--verbose prints the tables here)"),
                  markup=False)  # fmt: skip
    console.print(f"results in {out}/ ({', '.join(result.files)})", markup=False)


VERBOSE_HELP = ("Print the full tables too (every figure of every audit, the agreement between "
                "audits, worst groups, notes) before the answer.")  # fmt: skip


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
    verbose: bool = typer.Option(False, "--verbose", help=VERBOSE_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    **options,
) -> None:
    """Compare audits side by side: held-out and worst-group accuracy, counter-bias slices,
    memorization by margin, shortcut reliance and agreement across audits.

    Intervals are percentile bootstraps over each audit's runs. Writes compare.parquet,
    compare.json, compare_*.png and compare.html into --out. Prints the warnings, then which
    objective is best at what cost (the answer that opens compare.html) and where the files
    are; --verbose prints the full tables before them.
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
    if verbose:
        print_comparison(result, out)
    print_answer(result, out, verbose=verbose)


def register(app: typer.Typer) -> None:
    """Add ``rmlens compare`` to the command line."""
    app.command("compare")(with_parameters(compare, config_parameters(COMPARE)))
