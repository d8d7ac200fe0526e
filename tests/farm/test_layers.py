"""The farm's modules import each other in one direction only: no cycles, no import from a higher
layer. The layers are the list in ``feedmesh.farm``'s docstring; this test reads it from there.

Every import counts, as Python sees it or not: module level, under ``TYPE_CHECKING``, inside
functions, relative or absolute. Read with ``ast``, so nothing is imported to check.
"""

from __future__ import annotations

import ast
from pathlib import Path

import feedmesh.farm

PACKAGE = "feedmesh.farm"
SOURCE = Path(feedmesh.farm.__file__).parent


def farm_modules() -> dict[str, Path]:
    """Short name (``server``, ``__init__``) -> file, for every module of the package."""
    return {path.stem: path for path in sorted(SOURCE.glob("*.py"))}


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The farm modules ``name`` imports (short names; ``__init__`` for the package itself)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()

    def add(dotted: str) -> None:
        if dotted == PACKAGE:
            found.add("__init__")
        elif dotted.startswith(PACKAGE + "."):
            found.add(dotted[len(PACKAGE) + 1:].split(".")[0])

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from this package (modules here are all one level deep)
                base = ".".join(PACKAGE.split(".")[:len(PACKAGE.split(".")) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module == PACKAGE:  # ``from feedmesh.farm import server``: the submodule if it is one
                for alias in node.names:
                    add(f"{PACKAGE}.{alias.name}" if alias.name in known else PACKAGE)
            else:
                add(module)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = farm_modules()
    return {name: imported_modules(name, path, set(modules)) for name, path in modules.items()}


def documented_layers() -> list[list[str]]:
    """The layer list from the package docstring, top layer first."""
    lines = (feedmesh.farm.__doc__ or "").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Layers, top to bottom"))
    block = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith("::"))
    layers = []
    for line in lines[block + 2:]:
        if not line.strip():
            break
        layers.append([name.strip() for name in line.split("|")])
    return layers


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (``[a, b, a]``), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def layer_violations(graph: dict[str, set[str]], layers: list[list[str]]) -> list[str]:
    """Every import that does not go strictly down the layers ("a -> b" with the reason)."""
    level = {name: len(layers) - i for i, layer in enumerate(layers) for name in layer}
    level["__init__"] = len(layers) + 1  # the front door, above every layer
    problems = []
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            if level[target] > level[source]:
                problems.append(f"{source} -> {target}: imports a higher layer")
            elif level[target] == level[source]:
                problems.append(f"{source} -> {target}: imports a module of its own layer")
    return problems


def test_the_layer_list_names_every_module_once() -> None:
    listed = [name for layer in documented_layers() for name in layer]
    assert len(listed) == len(set(listed)), "a module is listed twice"
    modules = set(farm_modules()) - {"__init__"}
    assert not modules - set(listed), f"not in the layer list: {sorted(modules - set(listed))}"
    assert not set(listed) - modules, f"listed but not a module: {sorted(set(listed) - modules)}"


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_imports_go_down_the_layers() -> None:
    problems = layer_violations(import_graph(), documented_layers())
    assert not problems, "\n".join(problems)


def test_the_checks_see_what_they_must() -> None:
    """The parser and both checks on a made-up package: TYPE_CHECKING and function-level imports
    are edges, a cycle is found, and an upward or sideways import is reported."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from feedmesh.farm.low import thing\n"
        "if TYPE_CHECKING:\n"
        "    from feedmesh.farm.top import Top\n"
        "def later():\n"
        "    import feedmesh.farm.side\n"
        "    from . import other\n"
    )
    path = Path(__file__).with_name("_layers_probe.py")
    try:
        path.write_text(source)
        edges = imported_modules("mid", path, {"low", "top", "side", "other", "mid"})
    finally:
        path.unlink()
    assert edges == {"low", "top", "side", "other"}
    graph = {"top": {"mid"}, "mid": edges, "low": set(), "side": set(), "other": set()}
    assert find_cycle(graph) == ["mid", "top", "mid"]
    assert layer_violations(graph, [["top"], ["mid", "side"], ["low", "other"]]) == [
        "mid -> side: imports a module of its own layer", "mid -> top: imports a higher layer"]
