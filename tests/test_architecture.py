"""The architecture, checked: the import contracts in ``.importlinter`` (layers, no cycles, concrete
stores and buses chosen in the composition root only, the web behind the hub's facade, pure
cores) hold for ``src/``, and each contract does catch the violation it is written against."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(src: Path) -> tuple[int, str]:
    """Run import-linter on the ``feedmesh`` package found in ``src``."""
    environment = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache", str(ROOT / ".importlinter")],
                          capture_output=True, text=True, env=environment, cwd=src, timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_every_import_contract_holds():
    status, report = lint_imports(ROOT / "src")
    assert status == 0, report
    assert "BROKEN" not in report and re.search(r"Contracts: \d+ kept, 0 broken", report), report


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text("utf-8") + f"\n{line}\n", "utf-8")


# (file to change, line added, contract that must break)
VIOLATIONS = [
    ("feedmesh/hub/web/feeds.py", "import feedmesh.hub.app",
     "The web layer reaches the hub through its facade only"),
    ("feedmesh/crawl/pipeline.py", "from feedmesh.store.sqlite import SQLiteStore",
     "Concrete stores and buses are chosen in the composition root only"),
    ("feedmesh/model.py", "import feedmesh.hub",
     "Packages are layered: each imports only from the layers below it"),
    ("feedmesh/fetch/state.py", "import asyncio",
     "Pure cores: no sockets, no databases, no event loop, no HTTP"),
    ("feedmesh/feeds/dates.py", "import feedmesh.feeds.rss",
     "No import cycle between the modules of any package"),
    ("feedmesh/hub/filter.py", "import feedmesh.hub.reflector",
     "Tiers talk through the bus, not through each other"),
    ("feedmesh/locality/assign.py", "import asyncio",
     "The feed mapping is pure: only its probe touches the network"),
    ("feedmesh/mesh/overlay/pastry.py", "import socket",
     "Mesh protocol cores are sans-IO: no sockets, no event loop, no databases"),
]


@pytest.mark.parametrize("path, line, contract", VIOLATIONS,
                         ids=[v[2].split(":")[0] for v in VIOLATIONS])
def test_each_contract_catches_its_violation(tmp_path, path, line, contract):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "feedmesh", src / "feedmesh",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    before = dict(re.findall(r"^(.+) (KEPT|BROKEN)", lint_imports(src)[1], re.M))
    assert before.get(contract) == "KEPT", before
    _append(src / path, line)
    status, report = lint_imports(src)
    after = dict(re.findall(r"^(.+) (KEPT|BROKEN)", report, re.M))
    assert status != 0 and after.get(contract) == "BROKEN", report
