"""The API reference's package pages, written from each package's public names at build time.

For every package in :data:`PACKAGES` it writes ``docs/api/packages/<package>.rst``: the
package docstring, then autosummary tables (functions, configs, classes, exceptions,
constants) of its ``__all__`` (or, for a module without one, the public names it defines).
A name that ``rmlens`` exports too is listed under ``rmlens`` (its own table), so each
object has one page. Autosummary then writes one page per object into
``docs/api/generated``. Both folders are build outputs (gitignored): a name added to
``__all__`` appears without an edit here.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

PACKAGES = (
    "rmlens", "rmlens.data", "rmlens.rewards", "rmlens.influence", "rmlens.hub",
    "rmlens.memorization", "rmlens.comparison",
    "rmlens.evaluation", "rmlens.attribution", "rmlens.sae", "rmlens.tokens",
    "rmlens.generalization", "rmlens.report", "rmlens.stats", "rmlens.experiment",
)  # fmt: skip
KINDS = ("Functions", "Configs", "Classes", "Exceptions and warnings", "Constants")


def public_names(module) -> list[str]:
    """``__all__``, else the names without ``_`` that the module itself defines."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and getattr(value, "__module__", None) == module.__name__
        and (inspect.isclass(value) or inspect.isfunction(value))
    ]


def kind(value) -> str:
    if inspect.isclass(value):
        if issubclass(value, BaseException):
            return "Exceptions and warnings"
        return "Configs" if value.__name__.endswith("Config") else "Classes"
    return "Functions" if callable(value) else "Constants"


def _table(names: list[str], pages: bool = True) -> list[str]:
    """An autosummary table; ``pages``: autosummary writes a page per name."""
    lines = [".. autosummary::", "   :nosignatures:"]
    if pages:
        lines.append("   :toctree: ../generated")
    return lines + ["", *(f"   {n}" for n in names), ""]


def _constants(names: list[str]) -> list[str]:
    return [f"- :py:data:`{n}`" for n in names] + [""]


def package_page(package: str, top: set[str]) -> str:
    module = importlib.import_module(package)
    own: dict[str, list[str]] = {k: [] for k in KINDS}
    shared: dict[str, list[str]] = {k: [] for k in KINDS}
    for name in sorted(public_names(module), key=str.lower):
        where = shared if package != "rmlens" and name in top else own
        where[kind(getattr(module, name))].append(name)
    lines = [package, "=" * len(package), "", f".. automodule:: {package}", "   :no-members:",
             "", f".. currentmodule:: {package}", ""]  # fmt: skip
    for title in KINDS:
        if not (own[title] or shared[title]):
            continue
        lines += [title, "-" * len(title), ""]
        if shared[title]:  # documented once, under rmlens
            lines += [".. currentmodule:: rmlens", "", *_table(shared[title], pages=False)]
            lines += [f".. currentmodule:: {package}", ""]
        if own[title]:
            if title == "Constants":
                lines += _constants(own[title])
            else:
                lines += _table(own[title])
        if title == "Constants":
            for name in own[title]:
                lines += [f".. py:data:: {name}", f"   :value: {shown(getattr(module, name))}", ""]
    return "\n".join(lines)


def shown(value, width: int = 90) -> str:
    """A constant's value on one line: its repr, or its kind and keys when that is long."""
    text = repr(value)
    if len(text) <= width and "\n" not in text:
        return text
    items = list(value) if isinstance(value, (dict, tuple, list, set, frozenset)) else []
    if items:
        head = ", ".join(repr(k) if not isinstance(k, str) else k for k in items[:6])
        more = ", ..." if len(items) > 6 else ""
        keys = "keys" if isinstance(value, dict) else "items"
        return f"{type(value).__name__} of {len(items)} {keys}: {head}{more}"
    return text.replace("\n", " ")[:width] + "..."


def write_pages(app, config=None) -> None:
    out = Path(app.srcdir) / "api" / "packages"
    out.mkdir(parents=True, exist_ok=True)
    top = set(importlib.import_module("rmlens").__all__)
    for package in PACKAGES:
        path = out / f"{package}.rst"
        text = package_page(package, top)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def setup(app):
    # config-inited: before Sphinx lists the source files (and autosummary reads them)
    app.connect("config-inited", write_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
