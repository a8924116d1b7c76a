"""No import circle inside mcp_sim, counting every import: module-level, function-level and TYPE_CHECKING alike.

A function-level import that dodges a circle at run time is still a circle in the design (the layers no longer
point down), so this check reads the source with `ast` rather than asking Python what it managed to import.

What counts as an edge from a module: the module its import statement names (`import a.b` and `from a.b import x`
name `a.b`; a package's name means its `__init__`), plus `a.b.x` when `x` is itself a module. The parent packages
Python runs on the way (`a` for `import a.b`) are not counted: a package's `__init__` re-exporting its own
submodules is the ordinary pattern and says nothing about layers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import mcp_sim

PACKAGE_ROOT = Path(mcp_sim.__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def imported_names(tree: ast.AST, importer: str, is_package: bool) -> Iterator[str]:
    """Every module name each import statement in the tree names, wherever the statement sits."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # A relative import counts from the importer's package (the module itself when it is a package).
                package = importer.split(".") if is_package else importer.split(".")[:-1]
                base_parts = package[: len(package) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            yield base
            for alias in node.names:
                yield f"{base}.{alias.name}"


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets = imported_names(tree, name, path.name == "__init__.py")
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative so a deep package cannot hit the recursion limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest path round the circle through the component's first module, so the failure names real edges."""
    members = set(component)
    start = component[0]
    paths: dict[str, list[str]] = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    return [*paths[node], start]
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a strongly connected component always has one


def test_no_import_circle_in_mcp_sim() -> None:
    graph = import_graph()
    circles = [" -> ".join(one_cycle(graph, component)) for component in strongly_connected(graph)]
    assert not circles, "import circles (every import counted, lazy ones too):\n" + "\n".join(circles)


def test_the_check_sees_lazy_and_type_checking_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from mcp_sim.a import A\n"
        "def f():\n    from . import b\n    import mcp_sim.c\n"
    )
    names = set(imported_names(ast.parse(source), "mcp_sim.pkg.mod", is_package=False))
    assert {"mcp_sim.a", "mcp_sim.pkg", "mcp_sim.pkg.b", "mcp_sim.c"} <= names


def test_the_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert one_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


# The package's layers, lowest first; a module may import its own layer or one below (docs/DEVELOPMENT.md).
# The package's face ("": __init__, only its __version__) imports nothing of the package and sits lowest.
LAYERS = [{"", "base"}, {"models"}, {"engines"}, {"state", "xsim"}, {"core"}, {"rehearsal", "serving", "sources"},
          {"fidelity"}, {"app"}, {"cli"}, {"__main__", "pytest_plugin"}]


def layer_of(module: str) -> int:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else ""
    return next(index for index, members in enumerate(LAYERS) if name in members)


def test_every_import_points_down_a_layer() -> None:
    upward = sorted(f"{importer} -> {imported}" for importer, targets in import_graph().items()
                    for imported in targets if layer_of(imported) > layer_of(importer))
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_the_root_holds_only_entry_points() -> None:
    root = sorted(path.name for path in PACKAGE_ROOT.glob("*.py"))
    assert root == ["__init__.py", "__main__.py", "pytest_plugin.py"]
    assert {path.name for path in PACKAGE_ROOT.iterdir() if path.is_dir() and path.name != "__pycache__"} == \
        set().union(*LAYERS) - {"__main__", "pytest_plugin", ""}
    assert not any(line.startswith(("from mcp_sim", "import mcp_sim"))
                   for line in (PACKAGE_ROOT / "__init__.py").read_text().splitlines())
