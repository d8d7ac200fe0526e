"""The architecture, checked: the import contracts in ``.importlinter`` (layers, no cycles, concrete
stores and buses chosen in the composition root only, the web behind the hub's facade, pure
cores) hold for ``src/``, and each contract does catch the violation it is written against; the
lint rules of ``pyproject.toml`` find nothing in src, tests and benchmarks."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
RUFF = Path(sys.executable).parent / "ruff"


def lint_imports(src: Path) -> tuple[int, str]:
    """Run import-linter on the ``feedmesh`` package found in ``src``."""
    environment = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache", str(ROOT / ".importlinter")],
                          capture_output=True, text=True, env=environment, cwd=src, timeout=120,
                          check=False)
    return done.returncode, done.stdout + done.stderr


def test_every_import_contract_holds():
    status, report = lint_imports(ROOT / "src")
    assert status == 0, report
    assert "BROKEN" not in report and re.search(r"Contracts: \d+ kept, 0 broken", report), report


def ruff(*paths: Path) -> tuple[int, str]:
    """``ruff check`` with the rules of ``pyproject.toml`` ([tool.ruff.lint])."""
    done = subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise",
                           "--config", str(ROOT / "pyproject.toml"), *map(str, paths)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    return done.returncode, done.stdout + done.stderr


def test_the_lint_rules_find_nothing():
    status, report = ruff(ROOT / "src", ROOT / "tests", ROOT / "benchmarks")
    assert status == 0, report


def test_the_lint_rules_are_the_projects(tmp_path):
    # A line of 101 characters and a zip that does not say whether lengths must match.
    probe = tmp_path / "probe.py"
    probe.write_text(f"PAIRS = list(zip([1], [2]))\nLONG = {'x' * 92!r}\n", "utf-8")
    status, report = ruff(probe)
    assert status == 1, report
    assert "B905" in report and "E501" in report, report


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text("utf-8") + f"\n{line}\n", "utf-8")


# (file to change, line added, contract that must break)
VIOLATIONS = [
    ("feedmesh/hub/web/feeds.py", "import feedmesh.hub.tiers.reflector",
     "The web layer reaches the hub through its facade only"),
    ("feedmesh/hub/front/holders.py", "import feedmesh.hub.tiers.reflector",
     "Tiers, push and the front are independent; they meet in compose"),
    ("feedmesh/hub/push/service.py", "import feedmesh.hub.front.tokens",
     "Tiers, push and the front are independent; they meet in compose"),
    ("feedmesh/commands/serve.py", "import feedmesh.hub.tiers.filter",
     "Commands read flags: they import compose and flags, never a part"),
    ("feedmesh/commands/web.py", "import feedmesh.store",
     "Commands read flags: they import compose and flags, never a part"),
    ("feedmesh/hub/front/hub_front.py", "import feedmesh.hub.tiers.filter",
     "Only compose imports the modules that construct tiers"),
    ("feedmesh/crawl/pipeline.py", "from feedmesh.store.sqlite import SQLiteStore",
     "Concrete stores and buses are chosen in the composition root only"),
    ("feedmesh/model.py", "import feedmesh.hub",
     "Packages are layered: each imports only from the layers below it"),
    ("feedmesh/fetch/state.py", "import asyncio",
     "Pure cores: no sockets, no databases, no event loop, no HTTP"),
    ("feedmesh/feeds/dates.py", "import feedmesh.feeds.rss",
     "No import cycle between the modules of any package"),
    ("feedmesh/hub/tiers/filter.py", "import feedmesh.hub.tiers.reflector",
     "Tiers talk through the bus, not through each other"),
    ("feedmesh/locality/assign.py", "import asyncio",
     "The feed mapping is pure: only its probe touches the network"),
    ("feedmesh/mesh/overlay/pastry.py", "import socket",
     "Mesh protocol cores are sans-IO: no sockets, no event loop, no databases"),
    ("feedmesh/mesh/sansio/timers.py", "import asyncio",
     "Mesh protocol cores are sans-IO: no sockets, no event loop, no databases"),
    ("feedmesh/mesh/sansio/simulator.py", "import feedmesh.mesh.overlay.ids",
     "mesh/sansio is the floor of the mesh: it imports no mesh part"),
]


@pytest.mark.parametrize("path, line, contract", VIOLATIONS,
                         ids=[v[2].split(":")[0] for v in VIOLATIONS])
def test_each_contract_catches_its_violation(tmp_path, path, line, contract):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "feedmesh", src / "feedmesh",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    before = dict(re.findall(r"^(.+) (KEPT|BROKEN)", lint_imports(src)[1], re.MULTILINE))
    assert before.get(contract) == "KEPT", before
    _append(src / path, line)
    status, report = lint_imports(src)
    after = dict(re.findall(r"^(.+) (KEPT|BROKEN)", report, re.MULTILINE))
    assert status != 0 and after.get(contract) == "BROKEN", report


# -- the wiring, counted in src/ (issue "Every role assembled once") ---------------------------

SRC = ROOT / "src" / "feedmesh"


def _modules() -> dict[str, ast.Module]:
    return {str(path.relative_to(SRC.parent)): ast.parse(path.read_text("utf-8"))
            for path in SRC.rglob("*.py")}


def _calls(tree: ast.Module, name: str) -> int:
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Call)
               and ((isinstance(node.func, ast.Name) and node.func.id == name)
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == name)))


@pytest.mark.parametrize("tier", ["PushService", "FilterTier", "Reflector", "CrawlerTier"])
def test_each_tier_is_constructed_in_one_place_in_compose(tier):
    sites = {path: count for path, tree in _modules().items()
             if (count := _calls(tree, tier))}
    assert sum(sites.values()) == 1, sites
    (where,) = sites
    assert where.startswith("feedmesh/compose/"), sites


def test_signal_handlers_are_installed_in_one_module():
    installers = {path for path, tree in _modules().items()
                  if _calls(tree, "add_signal_handler") or any(
                      isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and node.func.attr == "signal" and isinstance(node.func.value, ast.Name)
                      and node.func.value.id == "signal" for node in ast.walk(tree))}
    assert installers <= {"feedmesh/compose/lifecycle.py", "feedmesh/farm/cli.py"}, installers
    assert "feedmesh/compose/lifecycle.py" in installers


def test_one_module_serves_metrics():
    serving = {path for path, text in ((p, (SRC.parent / p).read_text("utf-8"))
                                       for p in _modules())
               if re.search(r"""["']/metrics["']""", text) and "generate_latest" in text}
    assert serving == {"feedmesh/compose/lifecycle.py"}, serving


def test_no_hook_is_assigned_outside_a_constructor():
    """A hook (``on_*``) is set by its own object's constructor only: not later, and not by
    another object's constructor reaching into it (a second consumer asks for a place, e.g.
    ``UdpNode.listen``)."""
    found = []
    for path, tree in _modules().items():
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
                for target in targets:
                    if not (isinstance(target, ast.Attribute) and target.attr.startswith("on_")):
                        continue
                    own = isinstance(target.value, ast.Name) and target.value.id == "self"
                    if function.name != "__init__" or not own:
                        found.append(f"{path}:{node.lineno} {target.attr}")
    assert found == [], found


def test_no_command_imports_another():
    commands = {p.stem for p in (SRC / "commands").glob("*.py")} - {"__init__", "flags"}
    found = []
    for path, tree in _modules().items():
        if not path.startswith("feedmesh/commands/"):
            continue
        for node in ast.walk(tree):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if isinstance(node, ast.ImportFrom) and node.module == "feedmesh.commands":
                names = [f"feedmesh.commands.{a.name}" for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["feedmesh", "commands"] and len(parts) > 2 \
                        and parts[2] in commands:
                    found.append(f"{path}:{node.lineno} {name}")
    assert found == [], found


def test_only_the_environment_module_reads_feedmesh_variables():
    readers = {path for path, text in ((p, (SRC.parent / p).read_text("utf-8"))
                                       for p in _modules())
               if re.search(r"""(os\.environ(\.get)?|getenv)\(?\[?\s*["']FEEDMESH_""", text)}
    assert readers == set(), readers


# -- the mesh's one dialect (issue "Every role assembled once", item 5) ----------------------

DIALECT = {"receive": ["now", "sender", "message"], "fire": ["now"], "next_deadline": [],
           "take": []}
"""Each method of the dialect and its parameters after ``self`` (``message`` may be ``body``)."""
SANS_IO = ("feedmesh/mesh/overlay/", "feedmesh/mesh/feedex/", "feedmesh/mesh/records/")
HEAP_MODULES = {"feedmesh/mesh/sansio/simulator.py", "feedmesh/mesh/sansio/timers.py"}


def _trees(root: Path) -> dict[str, ast.Module]:
    return {str(path.relative_to(root)): ast.parse(path.read_text("utf-8"))
            for path in (root / "feedmesh" / "mesh").rglob("*.py")}


def _node_classes(trees: dict[str, ast.Module]) -> dict[str, ast.ClassDef]:
    """Protocol nodes: classes of the sans-IO cores named ``*Node`` (not a typing Protocol)."""
    return {f"{path}:{node.name}": node for path, tree in trees.items()
            if path.startswith(SANS_IO) for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and node.name.endswith("Node")
            and "Protocol" not in {ast.unparse(base).split("[")[0] for base in node.bases}}


def dialect_problems(root: Path) -> list[str]:
    """Node classes that do not speak the dialect: a method missing, other parameters, an input
    that returns something (outputs wait for ``take``), or the old timer names."""
    problems = []
    for name, cls in _node_classes(_trees(root)).items():
        methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
        for method, params in DIALECT.items():
            function = methods.get(method)
            if function is None:
                problems.append(f"{name} has no {method}()")
                continue
            got = [a.arg for a in function.args.args[1:]]
            if [("message" if a == "body" else a) for a in got] != params:
                problems.append(f"{name}.{method}({', '.join(got)}), not ({', '.join(params)})")
            returns = ast.unparse(function.returns) if function.returns else ""
            if method in ("receive", "fire") and returns != "None":
                problems.append(f"{name}.{method} returns {returns or 'unannotated'}, not None")
            if method == "take" and not returns.startswith("list["):
                problems.append(f"{name}.take returns {returns or 'unannotated'}, not a list")
        problems += [f"{name} still has {old}()" for old in ("handle_timer", "next_timer")
                     if old in methods]
    return problems


def loop_problems(root: Path) -> list[str]:
    """Event loops and timer heaps outside mesh/sansio: a module that imports ``heapq``, a
    ``*Simulator`` class or a ``simulate`` function not built on the one ``EventLoop``, a live
    driver that fires a node itself instead of through ``NodeDriver``."""
    problems = []
    for path, tree in _trees(root).items():
        imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imports |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        if "heapq" in imports and path not in HEAP_MODULES:
            problems.append(f"{path} imports heapq: a second event loop or timer heap")
        for node in ast.walk(tree):
            simulator = (isinstance(node, ast.ClassDef) and node.name.endswith("Simulator")) or (
                isinstance(node, ast.FunctionDef) and node.name == "simulate")
            uses = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if simulator and "EventLoop" not in uses and path not in HEAP_MODULES:
                problems.append(f"{path}:{node.name} is not built on sansio.EventLoop")
        if path.startswith(("feedmesh/mesh/transport/", "feedmesh/mesh/peer/")) \
                and path != "feedmesh/mesh/transport/driver.py":
            firing = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
                      and isinstance(n.func, ast.Attribute)
                      and (n.func.attr in ("fire", "handle_timer") or (
                          n.func.attr in ("next_deadline", "next_timer")
                          and "node" in ast.unparse(n.func.value)))]
            problems += [f"{path}:{line} drives a node itself, not through NodeDriver"
                         for line in firing]
    return problems


def test_every_mesh_node_speaks_the_one_dialect():
    nodes = {name.split(":")[1] for name in _node_classes(_trees(SRC.parent))}
    assert {"PastryNode", "ScribeNode", "FeedExNode"} <= nodes, nodes
    assert dialect_problems(SRC.parent) == []


def test_one_simulator_loop_one_timer_structure_one_driver_loop():
    assert loop_problems(SRC.parent) == []


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), "utf-8")


# (file, text replaced, replacement, check, what the check must say)
MESH_VIOLATIONS = [
    ("feedmesh/mesh/feedex/node.py", "def fire(self, now: float) -> None:",
     "def handle_timer(self, now: float) -> None:", dialect_problems, "FeedExNode has no fire()"),
    ("feedmesh/mesh/feedex/node.py",
     "def receive(self, now: float, sender: Address, message: Message) -> None:",
     "def receive(self, now: float, sender: Address, message: Message) -> list[Send]:",
     dialect_problems, "FeedExNode.receive returns list[Send], not None"),
    ("feedmesh/mesh/overlay/pastry.py", "def take(self) -> list[tuple[Handle, Any]]:",
     "def take(self, limit: int = 0) -> list[tuple[Handle, Any]]:", dialect_problems,
     "PastryNode.take(limit), not ()"),
    ("feedmesh/mesh/feedex/sim.py", "import bisect\n", "import bisect\nimport heapq\n",
     loop_problems, "feedex/sim.py imports heapq"),
    ("feedmesh/mesh/overlay/sim.py", "class Simulator:",
     "class FastSimulator:\n    queue: list = []\n\n\nclass Simulator:", loop_problems,
     "FastSimulator is not built on sansio.EventLoop"),
    ("feedmesh/mesh/peer/transport.py", "        self._driver.flush(sends)\n",
     "        self._driver.flush(sends)\n        self.node.fire(self.clock.now())\n",
     loop_problems, "drives a node itself, not through NodeDriver"),
]


@pytest.mark.parametrize("path, old, new, check, expected", MESH_VIOLATIONS,
                         ids=[v[4].split(",")[0] for v in MESH_VIOLATIONS])
def test_each_mesh_check_catches_its_violation(tmp_path, path, old, new, check, expected):
    shutil.copytree(SRC, tmp_path / "feedmesh", ignore=shutil.ignore_patterns("__pycache__"))
    assert check(tmp_path) == []
    _edit(tmp_path / path, old, new)
    found = check(tmp_path)
    assert any(expected in problem for problem in found), found
