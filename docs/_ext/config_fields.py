"""The config reference, from the config dataclasses' fields (``dataclasses.fields``).

- ``.. rmlens-configs::`` emits one section per subclass of :class:`rmlens._params.Config`
  (found by importing every rmlens module, so a new config cannot be left out): each field's
  name, type, default, command-line flag(s) and ``metadata["help"]``.
- For the API pages, a config class's docstring gets a numpydoc ``Parameters`` section built
  from the same metadata (before numpydoc reads it), so fields are documented once, beside the
  field, and numpydoc's PR01 check holds for every config.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
import types
import typing
from typing import Any

from docutils import nodes
from rst_nodes import code, inline, section, table
from sphinx.util.docutils import SphinxDirective

SUBPACKAGES = ("data", "rewards", "memorization", "comparison", "evaluation", "attribution",
               "sae", "tokens", "generalization", "report")  # fmt: skip


def config_classes() -> list[type]:
    """Every Config subclass, by public name (``rmlens.X`` first, then by package)."""
    import rmlens
    from rmlens._params import Config

    for info in pkgutil.walk_packages(rmlens.__path__, "rmlens."):
        importlib.import_module(info.name)
    found, todo = [], list(Config.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls not in found and dataclasses.is_dataclass(cls):
            found.append(cls)
        todo += cls.__subclasses__()
    return sorted(found, key=lambda c: (public_path(c).count("."), public_path(c)))


def public_path(cls: type) -> str:
    """``rmlens.AuditConfig``, ``rmlens.data.X``, else where it is defined."""
    for package in ("rmlens", *(f"rmlens.{p}" for p in SUBPACKAGES)):
        module = importlib.import_module(package)
        if cls.__name__ in getattr(module, "__all__", ()):
            return f"{package}.{cls.__name__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(h) for h in typing.get_args(hint))
    if hint is type(None):
        return "None"
    if hint is Ellipsis:
        return "..."
    if origin is not None:
        args = ", ".join(type_name(a) for a in typing.get_args(hint))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if hint is typing.Any:
        return "Any"
    return getattr(hint, "__name__", str(hint))


def nested_config(hint: Any) -> type | None:
    from rmlens._params import _config_type

    return _config_type(hint)


def fields_of(cls: type) -> list[dict[str, Any]]:
    """Name, type, default, flags and help of each field a user sets (not ``_`` ones)."""
    from rmlens._params import _default
    from rmlens.cli._options import _declarations

    hints = typing.get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):
            continue
        hint, meta = hints[f.name], f.metadata
        default = _default(f)
        inner = nested_config(hint)
        if inner is not None:
            flags = [f"[{f.name}]"]
            shown = f"{type(default).__name__}()" if default is not None else "None"
        else:
            flags = [d.strip().lstrip("/ ").strip() for d in _declarations(f.name, hint, meta)]
            shown = repr(default)
        rows.append(
            {
                "name": f.name,
                "type": type_name(hint),
                "default": shown,
                "unset": meta.get("unset"),
                "flags": flags,
                "nested": inner,
                "help": meta.get("help", ""),
            }
        )
    return rows


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


class ConfigsDirective(SphinxDirective):
    """``.. rmlens-configs::``: the reference of every config class."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        out = []
        for cls in config_classes():
            path = public_path(cls)
            intro = nodes.paragraph("", "", code(path), nodes.Text(": "), *inline(_summary(cls)))
            rows = []
            for row in fields_of(cls):
                flags: list[nodes.Node] = []
                for i, flag in enumerate(row["flags"]):
                    flags += ([nodes.Text(", ")] if i else []) + [code(flag)]
                if row["nested"] is not None:
                    flags = [nodes.Text("TOML table "), code(row["flags"][0])]
                default: list[nodes.Node] = [code(row["default"])]
                if row["unset"]:
                    default.append(nodes.Text(f" ({row['unset']})"))
                rows.append([code(row["name"]), code(row["type"]), default, flags, row["help"]])
            out.append(
                section(
                    cls.__name__,
                    f"config-{cls.__name__}",
                    intro,
                    table(HEADER, rows, [16, 12, 13, 19, 40]),
                )
            )
        return out


# --- numpydoc Parameters for config classes -------------------------------------------------

HEADER = ["Field", "Type", "Default", "Flag", "Help"]
_SECTION = re.compile(r"^-{3,}\s*$")


def _rst(text: str) -> str:
    """Help text as RST: backticked spans as code, ``*`` and ``|`` as themselves."""
    text = re.sub(r"`+([^`]+)`+", r"``\1``", text)
    return re.sub(r"(?<!`)([*|])", r"\\\1", text)


def parameters_section(cls: type) -> list[str]:
    lines = ["Parameters", "----------"]
    for row in fields_of(cls):
        kind = row["type"] if row["nested"] is None else f":class:`{row['type']}`"
        lines.append(f"{row['name']} : {kind}, default={row['default']}")
        help_ = row["help"] or f"See {row['type']}."
        flags = ", ".join(f"``{f}``" for f in row["flags"])
        where = f"TOML table ``{row['flags'][0]}``" if row["nested"] else f"Flag {flags}"
        lines.append(f"    {_rst(help_)} ({where}.)")
    return lines + [""]


def add_parameters(app, what, name, obj, options, lines: list[str]) -> None:
    """Insert a Parameters section, from field metadata, into a config class's docstring."""
    from rmlens._params import Config

    if what != "class" or not (isinstance(obj, type) and issubclass(obj, Config)):
        return
    if not dataclasses.is_dataclass(obj) or "Parameters" in lines:
        return
    at = next(
        (i for i in range(1, len(lines)) if _SECTION.match(lines[i]) and lines[i - 1].strip()),
        None,
    )
    block = parameters_section(obj)
    if at is None:
        lines += ["", *block]
    else:
        lines[at - 1 : at - 1] = [*block, ""]


def setup(app):
    app.add_directive("rmlens-configs", ConfigsDirective)
    app.connect("autodoc-process-docstring", add_parameters, priority=400)  # numpydoc: 500
    return {"parallel_read_safe": True, "parallel_write_safe": True}
