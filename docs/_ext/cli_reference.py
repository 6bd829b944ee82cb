"""The command-line reference, walked from the Typer app at build time (it cannot drift).

``.. rmlens-cli::`` turns ``typer.main.get_command(rmlens.cli._app.app)`` (a click group;
Typer may ship its own copy of click, so only the command objects' own methods are used)
into one section per command, depth first: ``rmlens``, ``rmlens memorize``, ...,
``rmlens data synth``. Each has the usage line, the help text and a table of every option:
its flags, type (or metavar), default and help, as ``--help`` words them (each option's
``get_help_record``, whose trailing ``[default: ...; required]`` is split off).
"""

from __future__ import annotations

import re

from docutils import nodes
from rst_nodes import code, paragraphs, section, table
from sphinx.util.docutils import SphinxDirective

_EXTRA = re.compile(r"\s*\[([^\[\]]*)\]\s*$")


def root_command():
    import typer

    from rmlens.cli._app import app

    return typer.main.get_command(app)


def walk(command, name: str = "rmlens", parent=None):
    """``(path, command, context)`` of the command and, depth first, of its subcommands."""
    ctx = command.context_class(command, info_name=name.split()[-1], parent=parent)
    yield name, command, ctx
    subcommands = getattr(command, "commands", {})
    for sub in sorted(subcommands):
        if not subcommands[sub].hidden:
            yield from walk(subcommands[sub], f"{name} {sub}", ctx)


def split_help(text: str) -> tuple[str, str, bool]:
    """``(help, default, required)`` from a help record's text."""
    default, required = "", False
    match = _EXTRA.search(text or "")
    if match:
        for part in match.group(1).split("; "):
            if part.startswith("default: "):
                default = part.removeprefix("default: ")
            elif part == "required":
                required = True
        text = text[: match.start()]
    return text.strip(), default, required


def option_rows(command, ctx) -> tuple[list[list], list[list]]:
    """The arguments' and the options' table rows."""
    arguments, options = [], []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:  # hidden
            continue
        help_, default, required = split_help(record[1] or getattr(param, "help", "") or "")
        metavar = param.metavar or param.display_type(ctx).strip("<>")
        if param.param_type_name == "argument":
            need = "required" if param.required else "optional"
            arguments.append([code(record[0].split()[0]), code(metavar), need, help_])
            continue
        flags: list[nodes.Node] = []
        for i, opt in enumerate([*param.opts, *param.secondary_opts]):
            flags += ([nodes.Text(", ")] if i else []) + [code(opt)]
        kind = "flag" if getattr(param, "is_flag", False) else code(metavar)
        shown = "required" if required else (code(default) if default else "")
        options.append([flags, kind, shown, help_])
    return arguments, options


class CliDirective(SphinxDirective):
    """``.. rmlens-cli::``: every command of ``rmlens``, one section each."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        out = []
        for path, command, ctx in walk(root_command()):
            body: list[nodes.Node] = []
            usage = command.get_usage(ctx).removeprefix("Usage: ")
            body.append(nodes.literal_block(usage, usage, language="text"))
            body += paragraphs(command.help or "")
            subcommands = getattr(command, "commands", {})
            if subcommands:
                rows = [
                    [code(f"{path} {n}"), subcommands[n].get_short_help_str(limit=120)]
                    for n in sorted(subcommands)
                    if not subcommands[n].hidden
                ]
                body.append(table(["Command", "What it does"], rows, [30, 70]))
            arguments, options = option_rows(command, ctx)
            if arguments:
                body.append(nodes.rubric("", "Arguments"))
                body.append(table(["Argument", "Type", "", "Help"], arguments, [16, 12, 10, 62]))
            if options:
                body.append(nodes.rubric("", "Options"))
                body.append(table(["Option", "Type", "Default", "Help"], options, [26, 12, 14, 48]))
            out.append(section(path, path.replace(" ", "-"), *body))
        return out


def setup(app):
    app.add_directive("rmlens-cli", CliDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
