"""No import cycle inside any rmlens subpackage.

Each package is layered: a module imports only modules below it (configs at the bottom, then
what they configure, then what trains, loads, saves or prints). The graph counts every
``import`` and ``from ... import`` of a sibling module, at module level or inside a function
or ``TYPE_CHECKING`` block alike: an import moved into a function still ties the modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "rmlens"


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every rmlens module and the rmlens modules it imports (anywhere in its code)."""
    files = {_module(p): p for p in sorted(ROOT.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [module, *(f"{module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in files and t != name}
    return graph


def _subpackages(graph: dict[str, set[str]]) -> list[str]:
    """Every package below ``rmlens`` (``rmlens.data.converters`` too)."""
    return sorted(name for name in graph
                  if name != "rmlens" and (SRC / name.replace(".", "/")).is_dir())


def find_cycle(graph: dict[str, set[str]], nodes: set[str]) -> list[str] | None:
    """One cycle of ``graph`` restricted to ``nodes`` (its modules, first repeated last), or
    None. Depth-first search: an edge back to a module still on the path closes a cycle."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in sorted(nodes):
        if start in state:
            continue
        path, stack = [start], [iter(sorted(graph[start] & nodes))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt] & nodes)))
    return None


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "rmlens.rewards._config" in graph["rmlens.rewards.finetune"]  # module level
    assert "rmlens.cli._debias" in graph["rmlens.cli.sae"]  # in a function, `from cli import`
    assert "rmlens.comparison.metrics" in graph["rmlens.comparison._record"]
    assert "rmlens.report._assets" in graph["rmlens.report._compare_page"]  # relative
    assert len(_subpackages(graph)) >= 10


def test_find_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph, set(graph)) == ["a", "b", "c", "a"]
    assert find_cycle(graph, {"a", "b", "d"}) is None
    assert find_cycle({"a": {"b"}, "b": set()}, {"a", "b"}) is None


def test_no_import_cycle_inside_a_subpackage():
    graph = import_graph()
    cycles = {}
    for package in _subpackages(graph):
        inside = {name for name in graph if name.startswith(f"{package}.")}
        cycle = find_cycle(graph, inside)
        if cycle:
            cycles[package] = " -> ".join(m.rpartition(".")[2] for m in cycle)
    assert not cycles, f"import cycles (lower modules must not import higher ones): {cycles}"


def test_no_import_cycle_between_packages():
    """Packages form layers too (DESIGN.md section 9): with each subpackage taken as one node,
    no arrow runs back up (``sae`` once imported ``attribution``'s built-in features while
    ``attribution`` imported ``sae``)."""
    graph = import_graph()

    def node(module: str) -> str:
        return ".".join(module.split(".")[:2])

    packages: dict[str, set[str]] = {}
    for name, targets in graph.items():
        packages.setdefault(node(name), set()).update(
            node(t) for t in targets if node(t) != node(name)
        )
    cycle = find_cycle(packages, set(packages))
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle or [])


# Packages import each other's public names (their ``__init__``), never their ``_private``
# modules; the few exceptions say why in a ``# private: <reason>`` comment. Modules directly
# under ``rmlens`` (``rmlens._errors``, ``rmlens._io``, ...) are the shared base: allowed.
MAX_PRIVATE_IMPORTS = 9


def private_imports() -> list[tuple[str, int, str]]:
    """``(importing module, line, imported private module)`` for every import of another
    subpackage's private module (a ``_`` segment below the package), anywhere in the code."""
    graph = import_graph()
    found = []
    for name in sorted(graph):
        home = name.split(".")[:2]
        if len(home) < 2 or not (SRC / "rmlens" / home[1]).is_dir():
            continue
        path = SRC / (name.replace(".", "/") + ".py")
        if not path.is_file():
            path = SRC / name.replace(".", "/") / "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if (module in graph and parts[0] == "rmlens" and len(parts) > 2
                        and parts[1] != home[1] and (SRC / "rmlens" / parts[1]).is_dir()
                        and any(p.startswith("_") for p in parts[2:])):  # fmt: skip
                    found.append((name, node.lineno, module))
    return found


def _has_reason(lines: list[str], lineno: int) -> bool:
    """A ``# private:`` comment on the import's line or above it, in its block of imports."""
    i = lineno - 1
    if "# private:" in lines[i]:
        return True
    while i > 0 and lines[i - 1].strip().startswith(("#", "from ", "import ")):
        i -= 1
        if lines[i].strip().startswith("# private:"):
            return True
    return False


def test_packages_import_each_others_public_names():
    found = private_imports()
    assert len(found) <= MAX_PRIVATE_IMPORTS, "\n".join(
        f"{name}:{line} imports {module}: import its package's public name instead"
        for name, line, module in found
    )
    silent = []
    for name, line, module in found:
        lines = (SRC / (name.replace(".", "/") + ".py")).read_text(encoding="utf-8").splitlines()
        if not _has_reason(lines, line):
            silent.append(f"{name}:{line} ({module})")
    assert not silent, f"private imports without a `# private: <reason>` comment: {silent}"


def test_function_level_imports_say_why():
    """An rmlens import inside a function (cli/ apart: its commands import lazily by design)
    is there because it would load a heavy package (torch, scipy, matplotlib, ...) with the
    module; the function says which in a ``# lazy: <why>`` comment above its first one."""
    silent = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.relative_to(ROOT).parts[0] == "cli":
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            own = [n for n in ast.walk(fn) if isinstance(n, ast.ImportFrom)
                   and (n.level or (n.module or "").startswith("rmlens"))]  # fmt: skip
            own += [n for n in ast.walk(fn) if isinstance(n, ast.Import)
                    and n.names[0].name.startswith("rmlens")]  # fmt: skip
            if own and not any("# lazy:" in line
                               for line in lines[fn.lineno - 1 : min(n.lineno for n in own)]):
                silent.append(f"{_module(path)}.{fn.name}")
    assert not silent, f"function-level imports without a `# lazy: <why>` comment: {silent}"
