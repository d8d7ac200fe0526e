"""The schedule package is layered as its docstring says, and has no import cycle.

Imports are read from the source (AST), so that those under ``if TYPE_CHECKING:`` and those inside
functions count too: each one is a dependency a reader has to follow, and each one that points
upwards is how the package once became a single cycle of ten files.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = "feedmesh.schedule"
ROOT = Path(__file__).resolve().parents[2] / "src" / "feedmesh" / "schedule"
ALLOWED_OUTSIDE = {"feedmesh.model", "feedmesh.fetch.state"}
"""The only modules of the rest of feedmesh that the schedule package may import."""


def module_files() -> dict[str, Path]:
    """Every module under the package, by dotted name (``feedmesh.schedule`` for __init__)."""
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join((PACKAGE, *parts))] = path
    return modules


MODULES = module_files()


def imported_modules(name: str, path: Path) -> set[str]:
    """The feedmesh modules that ``name`` imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:  # ``from . import kernels`` imports a module
                submodule = f"{origin}.{alias.name}"
                found.add(submodule if submodule in MODULES else origin)
    return {m for m in found if m == "feedmesh" or m.startswith("feedmesh.")}


def internal_graph() -> dict[str, set[str]]:
    return {name: {m for m in imported_modules(name, path) if m in MODULES and m != name}
            for name, path in MODULES.items()}


def declared_layers() -> list[list[str]]:
    """The layer list in the package docstring, bottom-up, as full module names."""
    docstring = ast.get_docstring(ast.parse((ROOT / "__init__.py").read_text())) or ""
    block = docstring.split("checks the code against this list::", 1)[1].split("\n\n")[1]
    layers: list[list[str]] = []
    for line in block.splitlines():
        numbered = re.match(r"\s*(\d+) [a-z ]+: (.*)$", line)
        if numbered:
            assert int(numbered.group(1)) == len(layers) + 1, line
            layers.append([])
            names = numbered.group(2)
        else:
            names = line
        layers[-1] += [f"{PACKAGE}.{n.strip()}" for n in names.split(",") if n.strip()]
    return layers


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(internal_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_every_module_is_in_exactly_one_layer():
    listed = [name for layer in declared_layers() for name in layer]
    duplicated = sorted({name for name in listed if listed.count(name) > 1})
    missing = sorted(set(MODULES) - set(listed) - {PACKAGE})  # the front door sits above all
    unknown = sorted(set(listed) - set(MODULES))
    assert (duplicated, missing, unknown) == ([], [], [])


def test_modules_import_only_from_their_layer_or_below():
    rank = {name: i for i, layer in enumerate(declared_layers()) for name in layer}
    rank[PACKAGE] = len(rank) + 1  # the front door: nothing inside may import it
    upward = [f"{name} (layer {rank[name] + 1}) imports {target} (layer {rank[target] + 1})"
              for name, targets in internal_graph().items() if name in rank
              for target in sorted(targets) if target in rank and rank[target] > rank[name]]
    assert upward == []


def test_from_the_rest_of_feedmesh_only_the_model_and_the_fetch_state_are_imported():
    outside = {f"{name} imports {target}" for name, path in MODULES.items()
               for target in imported_modules(name, path)
               if not (target == PACKAGE or target.startswith(PACKAGE + "."))
               and target not in ALLOWED_OUTSIDE}
    assert outside == set()


@pytest.mark.parametrize("source, expected", [
    ("from .kernels import njit", {"feedmesh.schedule.kernels"}),
    ("from . import kernels", {"feedmesh.schedule.kernels"}),
    ("from ..units import DAY_S", {"feedmesh.schedule.units"}),
    ("if TYPE_CHECKING:\n    from .scheduler import Scheduler", {"feedmesh.schedule.scheduler"}),
    ("def f():\n    from .snapshot import take_snapshot", {"feedmesh.schedule.snapshot"}),
    ("import feedmesh.fetch.client", {"feedmesh.fetch.client"}),
])
def test_the_import_reader_sees_every_kind_of_import(tmp_path, source, expected):
    path = tmp_path / "probe.py"
    path.write_text(source)
    # read as if it were feedmesh/schedule/policies/base.py for the ``..``, else a top module
    name = "feedmesh.schedule.policies.base" if ".." in source else "feedmesh.schedule.probe"
    assert imported_modules(name, path) == expected
