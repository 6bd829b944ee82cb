"""``rmlens data convert``: a public preference dataset -> rmlens pairs, with a count report.

The options come from the converters' option dataclasses (one flag per field name across
all datasets); a flag that the chosen dataset does not take is refused (exit 2).
"""

import inspect
import json
import sys
import typing
from collections import Counter
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Annotated, Any

import typer

from rmlens._errors import InputError
from rmlens.cli._common import handle_errors

MODELS_SHOWN = 6


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _option_parameters() -> list[inspect.Parameter]:
    """One Typer option per option field of every converter, default None (= not typed)."""
    from rmlens.data.converters._registry import converters

    owners: dict[str, list[tuple[str, type, Any]]] = {}
    for name, conv in converters().items():
        for f in fields(conv.options):
            owners.setdefault(f.name, []).append((name, conv.options, f))
    params = []
    for key, where in owners.items():
        helps = Counter(f.metadata.get("help", "") for _, _, f in where)
        defaults = {repr(f.default) for _, _, f in where if f.default is not MISSING}
        hint = typing.get_type_hints(where[0][1])[key]
        base = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
        default = where[0][2].default
        shown = f" Default: {default}." if len(defaults) == 1 and default is not None else ""
        datasets = ", ".join(n for n, _, _ in where)
        option = typer.Option(
            None,
            _flag(key),
            help=f"{helps.most_common(1)[0][0]}{shown} [{datasets}]",
            show_default=False,
            rich_help_panel="Dataset options",
        )
        params.append(
            inspect.Parameter(
                key, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=base | None
            )
        )
    return params


def _help() -> str:
    from rmlens.data.converters._registry import converters

    lines = [
        "Convert a public preference dataset to rmlens pairs (id, prompt, chosen, rejected, "
        "user_id, chosen_model, rejected_model, margin where the dataset has them, plus its "
        "turn, sampling field and own ids). SOURCE is a file or folder in the dataset's "
        "native layout, or a Hugging Face dataset id (needs the hub). Writes FILE, and the "
        "count report NAME.report.json beside it (records read, pairs written and dropped by "
        "reason, users, models, margins), and prints the counts. Ties are dropped unless "
        "--ties keep (margin 0); empty responses are dropped and counted.",
    ]
    for name, conv in converters().items():
        lines.append(f"{name} ({conv.hub_id_for(conv.options())}): {conv.rules}")
    return "\n\n".join(lines)


def _with_parameters(func, extra: list[inspect.Parameter]):
    own = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in inspect.signature(func, eval_str=True).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    func.__signature__ = inspect.Signature(own + extra)
    return func


def _options_for(converter: Any, given: dict[str, Any]) -> dict[str, Any]:
    """The typed options, checked against the chosen dataset; errors name the flag."""
    from rmlens._params import ParamError

    own = [f.name for f in fields(converter.options)]
    for name in given:
        if name not in own:
            takes = ", ".join(_flag(n) for n in own) or "no dataset options"
            raise InputError(
                f"{_flag(name)} does not apply to --from {converter.name} (it takes {takes})"
            )
    try:
        converter.options(**given).check()
    except ParamError as err:
        raise InputError(err.for_option(_flag(err.param))) from None
    return given


def _fmt(stats: dict[str, Any] | None) -> str:
    if not stats:
        return "- (no margin)"
    text = "  ".join(f"{k} {stats[k]:.4g}" for k in ("min", "p25", "median", "p75", "max", "mean"))
    if stats.get("zero"):
        text += f"  ({stats['zero']} ties at 0)"
    if "values" in stats:
        text += "\nvalues: " + ", ".join(f"{k}: {n}" for k, n in stats["values"].items())
    return text


def render(report: dict[str, Any]) -> None:
    """The count report as a table on stdout."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"{report['title']}: {report['pairs_written']} pairs written"))
    table.add_column("count")
    table.add_column("value", overflow="fold")
    table.add_row("source", escape(str(report["source"])))
    table.add_row("layout", escape(str(report["layout"])))
    table.add_row("records read", str(report["records_read"]))
    table.add_row("pairs written", str(report["pairs_written"]))
    table.add_row("pairs dropped", str(report["pairs_dropped"]))
    for part in ("dropped", "skipped", "notes"):
        for reason, n in report[part].items():
            table.add_row(
                f"  {part}" if part != "dropped" else "  dropped", f"{n}  {escape(reason)}"
            )
    if report["users"] is not None:
        per = report["pairs_per_user"]
        table.add_row(
            "users",
            f"{report['users']} (pairs per user: min {per['min']}, "
            f"median {per['median']:g}, max {per['max']})",
        )
    else:
        table.add_row("users", "- (no user ids)")
    if report["models"]:
        top = list(report["model_appearances"].items())[:MODELS_SHOWN]
        more = " ..." if report["models"] > MODELS_SHOWN else ""
        table.add_row(
            "models", escape(f"{report['models']}: " + ", ".join(f"{m} {n}" for m, n in top) + more)
        )
    else:
        table.add_row("models", "- (no model names)")
    table.add_row("margin", _fmt(report["margin"]))
    group = report["group_by"]
    table.add_row("group audits by", group or "prompt (the audit's default without users)")
    Console().print(table)


def register(data_app: typer.Typer) -> None:
    """Add ``convert`` to the ``rmlens data`` command group."""
    from rmlens.data.converters._registry import converter_names

    names = ", ".join(converter_names())

    @handle_errors
    def convert(
        source: Annotated[
            str,
            typer.Argument(
                help="File or folder in the dataset's native layout, or a Hugging Face dataset id."
            ),
        ],
        dataset: Annotated[str, typer.Option("--from", help=f"The dataset: {names}.")],
        out: Annotated[
            Path,
            typer.Option(
                "--out",
                help="Output: .jsonl(.gz), .json, .csv or .parquet; the report goes beside it.",
            ),
        ],
        split: Annotated[
            str | None,
            typer.Option(
                "--split",
                help="Split of a hub dataset or datasets folder, or the prefix of the "
                "files to read from a folder (default: the dataset's training split).",
            ),
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print the report as JSON instead of a table.")
        ] = False,
        quiet: Annotated[
            bool, typer.Option("--quiet", "-q", help="No progress bar or status line.")
        ] = False,
        **options: Any,
    ) -> None:
        from rmlens.data.converters import convert_with_report, get_converter, write_conversion

        converter = get_converter(dataset)
        given = _options_for(converter, {k: v for k, v in options.items() if v is not None})
        pairs, report = convert_with_report(
            converter.name, source, split=split, quiet=quiet, **given
        )
        path = write_conversion(pairs, report, out)
        if as_json:
            typer.echo(json.dumps({**report, "output": str(out)}, indent=2, default=str))
        else:
            render(report)
        if not quiet:
            group = (
                f" --group-by {report['group_by']}"
                if report["group_by"] not in (None, "user_id")
                else ""
            )
            print(
                f"wrote {len(pairs)} pairs to {out} and the report to {path}; audit them "
                f"with: rmlens memorize --data {out} --out DIR{group}",
                file=sys.stderr,
            )

    convert.__doc__ = _help()
    short = "Convert PRISM, Community Alignment, UltraFeedback, HelpSteer2, Chatbot Arena or SHP."
    command = data_app.command("convert", help=_help(), short_help=short)
    command(_with_parameters(convert, _option_parameters()))
