"""No import cycles in the tilemaxsim package: every module's source is parsed with `ast`, its
imports of tilemaxsim modules (module-level and inside functions, relative and absolute) become
the edges of a graph, and the graph must have no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "tilemaxsim"
ROOT = Path(__file__).resolve().parents[1] / "python" / PACKAGE


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its `__init__.py`)."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = (PACKAGE, *path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return name in modules and modules[name].name == "__init__.py"


def _known(name: str, modules: dict[str, Path]) -> bool:
    """A module of the package (the compiled `_native` extension has no source, and no
    imports of ours)."""
    return name in modules or name == f"{PACKAGE}._native"


def _imports(name: str, source: str, modules: dict[str, Path]) -> set[str]:
    """The tilemaxsim modules that module `name` (its `source`) imports, wherever in the file
    the import statement is."""
    out = set()
    # The package a relative import starts from: a package's own name, else its parent's.
    here = name if _is_package(name, modules) else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    out.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            if not (origin == PACKAGE or origin.startswith(PACKAGE + ".")):
                continue
            for alias in node.names:
                # `from pkg import sub` imports the submodule; `from mod import name` the module.
                sub = f"{origin}.{alias.name}"
                out.add(sub if _known(sub, modules) else origin)
    out.discard(name)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path.read_text(), modules) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None (depth-first search, colouring)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_every_module_and_import():
    graph = _graph()
    # Subpackages are parsed: a sample of the edges the package has.
    assert {"tilemaxsim", "tilemaxsim.integrations.pylate", "tilemaxsim.ray._shards"} <= set(graph)
    assert {"tilemaxsim._engine", "tilemaxsim._arrays"} <= graph["tilemaxsim._api"]
    assert "tilemaxsim._api" in graph["tilemaxsim.integrations.pylate"]
    assert "tilemaxsim._corpus" in graph["tilemaxsim.ray._shards"]
    assert "tilemaxsim._native" in graph["tilemaxsim._engine"]
    # Every form of import statement, at module level and inside functions and classes.
    source = """
import tilemaxsim.client
from tilemaxsim import _corpus
from . import _arrays as arrays
from ._float64 import maxsim
from .ray._shards import merge
import numpy, ray

def f():
    from .integrations import pylate
    import tilemaxsim._engine

class C:
    def g(self):
        from . import _residual
"""
    found = _imports("tilemaxsim._api", source, _modules())
    assert found == {
        "tilemaxsim.client",
        "tilemaxsim._corpus",
        "tilemaxsim._arrays",
        "tilemaxsim._float64",
        "tilemaxsim.ray._shards",
        "tilemaxsim.integrations.pylate",
        "tilemaxsim._engine",
        "tilemaxsim._residual",
    }
    # In a subpackage: `.` is the subpackage, `..` the package; `from .. import X` of a name
    # that is no module is an import of the package itself.
    found = _imports("tilemaxsim.ray.serve", "from ._shards import merge\nfrom .. import maxsim\n", _modules())
    assert found == {"tilemaxsim.ray._shards", "tilemaxsim"}


def test_no_import_cycles():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
