"""The ``__init__.pyi`` stubs: what an IDE or a type checker reads for the lazy packages.

Every package whose ``__init__`` builds its names with ``rmlens._lazy.attach`` has a stub
beside it that declares each of them as ``from .module import name as name``, so that
``rmlens.audit`` can be followed to its code. The stub must declare exactly the package's
``__all__``, each declaration must resolve to the object the package hands out, and the
wheel must carry the stubs and ``py.typed`` (PEP 561).
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "rmlens"


def _attaching() -> list[str]:
    """Every package whose ``__init__.py`` calls ``attach``."""
    found = []
    for init in sorted(ROOT.rglob("__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id == "attach"]  # fmt: skip
        if calls:
            found.append(".".join(init.parent.relative_to(SRC).parts))
    return found


PACKAGES = _attaching()


def _declared(package: str) -> dict[str, tuple[str, str]]:
    """``{name: (module, attribute)}`` of the stub's ``from .module import attribute as name``."""
    stub = SRC.joinpath(*package.split(".")) / "__init__.pyi"
    declared: dict[str, tuple[str, str]] = {}
    for node in ast.parse(stub.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            assert isinstance(node, ast.ImportFrom) and node.level == 1 and node.module, (
                f"{stub}: only `from .module import name as name` ({ast.unparse(node)})"
            )
            for alias in node.names:
                assert alias.asname == alias.name, (
                    f"{stub}: `{ast.unparse(node)}` does not re-export (`as {alias.name}`)"
                )
                assert alias.name not in declared, f"{stub}: {alias.name} declared twice"
                declared[alias.name] = (f"{package}.{node.module}", alias.name)
    return declared


def test_every_lazy_package_has_a_stub():
    assert "rmlens" in PACKAGES and len(PACKAGES) >= 10
    missing = [p for p in PACKAGES if not (SRC / p.replace(".", "/") / "__init__.pyi").is_file()]
    assert not missing, f"no __init__.pyi beside: {missing}"
    assert (ROOT / "py.typed").is_file()


@pytest.mark.parametrize("package", PACKAGES)
def test_stub_declares_exactly_the_packages_names(package):
    names = set(importlib.import_module(package).__all__)
    declared = set(_declared(package))
    assert declared == names, (
        f"{package}/__init__.pyi: missing {sorted(names - declared)}, "
        f"not in __all__ {sorted(declared - names)}"
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_each_declared_import_resolves(package):
    exported = importlib.import_module(package)
    for name, (module, attribute) in _declared(package).items():
        value = getattr(importlib.import_module(module), attribute)
        assert getattr(exported, name) is value, f"{package}.{name} is not {module}.{attribute}"


def test_the_wheel_carries_the_stubs():
    """setuptools' package data names ``py.typed`` and every ``*.pyi``."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    project = tomllib.loads((SRC.parent / "pyproject.toml").read_text(encoding="utf-8"))
    data = project["tool"]["setuptools"]["package-data"]["rmlens"]
    assert "py.typed" in data and "**/*.pyi" in data
