"""`feedmesh serve` on a data folder it may not write says so in one line, not a traceback.

Root writes anywhere, so the hub runs as ``nobody`` here (setpriv)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SETPRIV = shutil.which("setpriv")
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None,
                                reason="needs root and setpriv to run the hub as nobody")


def serve_as_nobody(data: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m",
         "feedmesh", "serve", "--data", str(data), "--port", "0"],
        capture_output=True, text=True, timeout=120)


@pytest.fixture
def folder():
    """A folder nobody may read but not write (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="feedmesh-readonly-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.mark.parametrize("inside, says", [
    ("new", "cannot create the data folder"),       # it would have to be made
    ("", "cannot open SQLite store"),                # it exists, read-only
])
def test_a_data_folder_it_may_not_write_is_one_line(folder, inside, says):
    done = serve_as_nobody(folder / inside if inside else folder)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("feedmesh serve: "), done.stderr
    assert says in lines[0] and "Permission denied" in lines[0]
