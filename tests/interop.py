"""Third-party programs the interop tests drive, installed from their registries at the versions
pinned in ``scripts/npm-test-packages`` (``scripts/bootstrap test`` installs them; a test asking
for one that is missing installs it the same way, into ``.venv/npm/<name>-<version>``, or
``$FEEDMESH_NPM_CACHE``). Skipped, saying why, only when node or npm is not on the machine."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PINNED = REPO / "scripts" / "npm-test-packages"

__all__ = ["node_modules"]


def _pinned(name: str) -> str:
    for line in PINNED.read_text().split():
        package, _, version = line.rpartition("@")
        if package == name:
            return version
    raise LookupError(f"{name} is not pinned in {PINNED}")


def node_modules(name: str) -> Path:
    """The ``node_modules`` folder holding npm package ``name`` at its pinned version."""
    version = _pinned(name)
    cache = Path(os.environ.get("FEEDMESH_NPM_CACHE") or REPO / ".venv" / "npm")
    folder = cache / f"{name}-{version}"
    if not (folder / ".installed").exists():
        node, npm = shutil.which("node"), shutil.which("npm")
        if node is None or npm is None:
            pytest.skip(f"the npm package {name}@{version} needs node and npm, and "
                        f"{'node' if node is None else 'npm'} is not on PATH (scripts/bootstrap "
                        "test installs them)")
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund",
                        "--no-save", "--silent", f"{name}@{version}"], check=True, timeout=600,
                       stdout=subprocess.DEVNULL)
        (folder / ".installed").touch()
    installed = folder / "node_modules" / name / "package.json"
    assert f'"version": "{version}"' in installed.read_text(), installed
    return folder / "node_modules"
