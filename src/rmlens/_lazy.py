"""Lazy package exports: ``import rmlens.x`` loads nothing heavy until a name is used.

Each package's ``__init__`` maps its public names to the private modules that define them;
the module is imported on first attribute access (PEP 562). This keeps ``rmlens --help``
and every ``--help`` fast: the command line reads config dataclasses without importing
torch, transformers or pandas.

A type checker or an IDE cannot follow a name that ``__getattr__`` makes, so each such
package has an ``__init__.pyi`` stub beside it that declares every exported name as
``from .module import name as name``: a name added to ``exports`` goes into the stub too
(``tests/test_stubs.py`` checks that they agree).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def attach(
    package: str, exports: dict[str, list[str]], moved: dict[str, list[str]] | None = None
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``__all__``, ``__getattr__`` and ``__dir__`` for ``package``.

    ``exports`` maps a submodule name (``"_config"``) to the public names it defines.
    ``moved`` maps another package (``"rmlens.hub"``) to names that this package once
    defined and that now live there: they still resolve (code written against the old path
    keeps working), but are not this package's (not in ``__all__`` or its stub).
    """
    where = {name: f"{package}.{module}" for module, names in exports.items() for name in names}
    elsewhere = {name: home for home, names in (moved or {}).items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where and name not in elsewhere:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where.get(name) or elsewhere[name]), name)
        globals_ = importlib.import_module(package).__dict__
        globals_[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(where)

    return sorted(where), __getattr__, __dir__
