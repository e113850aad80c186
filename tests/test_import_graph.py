"""The layering of the packages, read from the source: depthtui -> engine -> store, never back
up, and no circle of imports between modules.

Every import counts, the ones inside functions too (a lazy import is still an arrow); imports
under `if TYPE_CHECKING:` do not, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {"store": 0, "engine": 1, "depthtui": 2}  # a module may import its own layer or lower


def _modules() -> dict[str, Path]:
    found = {}
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:`."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                skipped |= {id(n) for n in ast.walk(inner)}
    return skipped


def _graph() -> dict[str, set[str]]:
    modules = _modules()

    def ours(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skipped = _type_checking_only(tree)
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets |= {t for a in node.names if (t := ours(a.name))}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        package = package.rpartition(".")[0]
                    base = f"{package}.{base}" if base else package
                # `from store import views` names a module; `from store.views import CAPS` a name
                targets |= {t for a in node.names if (t := ours(f"{base}.{a.name}"))}
        graph[name] = targets - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} imports {b}"
        for a, targets in graph.items()
        for b in targets
        if LAYERS[b.split(".")[0]] > LAYERS[a.split(".")[0]]
    )


def test_no_import_points_back_up_the_layers() -> None:
    graph = _graph()
    assert len(graph) > 100  # the packages were found
    assert _upward(graph) == []


def test_no_circle_of_imports_between_modules() -> None:
    assert _cycles(_graph()) == []


def test_the_checks_see_an_arrow_back_up_and_a_circle() -> None:
    # The checks above can fail: the same functions on a graph with both faults.
    graph = {"store.a": {"engine.b"}, "engine.b": {"engine.c"}, "engine.c": {"engine.b"}}
    assert _cycles(graph) == [["engine.b", "engine.c"]]
    assert _upward(graph) == ["store.a imports engine.b"]
