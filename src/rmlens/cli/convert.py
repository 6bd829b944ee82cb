"""``rmlens data convert``: a public preference dataset -> rmlens pairs, with a count report.

The options come from the converters' option dataclasses (one flag per field name across
all datasets); a flag that the chosen dataset does not take is refused (exit 2).
"""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rmlens import InputError
from rmlens.cli._options import (
    CONFIG_FILE,
    Section,
    config_beside,
    config_parameters,
    flag,
    read_toml,
    resolve,
    save_config,
    typed_flags,
    with_parameters,
)
from rmlens.cli._talk import echo_json

MODELS_SHOWN = 6


def _converters() -> dict:
    """Every converter by name, in name order."""
    from rmlens.data.converters import converter_names, get_converter

    return {name: get_converter(name) for name in converter_names()}


def _sections() -> list[Section]:
    """One section per dataset: its option dataclass, applying with ``--from NAME``."""
    return [Section(conv.options, when=("from", name)) for name, conv in _converters().items()]


def _help() -> str:
    lines = [
        "Convert a public preference dataset to rmlens pairs (id, prompt, chosen, rejected, "
        "user_id, chosen_model, rejected_model, margin where the dataset has them, plus its "
        "turn, sampling field and own ids). SOURCE is a file or folder in the dataset's "
        "native layout, or a Hugging Face dataset id (needs the hub). Writes FILE, and the "
        "count report NAME.report.json beside it (records read, pairs written and dropped by "
        "reason, users, models, margins), and prints the counts. Ties are dropped unless "
        "--ties keep (margin 0); empty responses are dropped and counted. A --config file "
        "holds the dataset's options (and `from`).",
    ]
    for name, conv in _converters().items():
        lines.append(f"{name} ({conv.hub_id_for(conv.options())}): {conv.rules}")
    return "\n\n".join(lines)


def _options_for(ctx: typer.Context, name: str, options: dict[str, Any]):
    """The chosen dataset's options from --config and the typed flags; others are refused."""
    sections = _sections()
    active = next(s for s in sections if s.when[1] == name)
    given = typed_flags(ctx, {k: v for k, v in options.items() if k != CONFIG_FILE})
    for key in given:
        if key not in active.names():
            takes = ", ".join(flag(n) for n in active.names()) or "no dataset options"
            raise InputError(f"{flag(key)} does not apply to --from {name} (it takes {takes})")
    return resolve(ctx, [Section(active.cls)], options, ignore=("from",))


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
    from rich.markup import escape
    from rich.table import Table

    from rmlens.cli._talk import Console

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
    from rmlens.data.converters import converter_names

    names = ", ".join(converter_names())

    def convert(
        ctx: typer.Context,
        source: Annotated[
            str,
            typer.Argument(
                help="File or folder in the dataset's native layout, or a Hugging Face dataset id."
            ),
        ],
        out: Annotated[
            Path,
            typer.Option(
                "--out",
                help="Output: .jsonl(.gz), .json, .csv or .parquet; the report goes beside it.",
            ),
        ],
        dataset: Annotated[
            str | None, typer.Option("--from", help=f"The dataset: {names}.")
        ] = None,
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

        if dataset is None:
            config_file = options.get(CONFIG_FILE)
            dataset = read_toml(config_file).get("from") if config_file else None
            if dataset is None:
                raise InputError(f"give the dataset with --from ({names})")
        converter = get_converter(dataset)
        config = _options_for(ctx, converter.name, options)
        pairs, report = convert_with_report(
            converter.name, source, split=split, quiet=quiet, **config.to_dict()
        )
        path = write_conversion(pairs, report, out)
        save_config(config, config_beside(out))
        if as_json:
            echo_json({**report, "output": str(out)})
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
    command(with_parameters(convert, config_parameters(_sections())))
