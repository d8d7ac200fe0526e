"""What `feedmesh serve` writes is its owner's alone: the data folder 0700, every file 0600 (the
hub's databases hold token hashes, and one file holds the key that signs every private URL)."""

from __future__ import annotations

import signal
import stat

import pytest

from .test_crash import _call, _free_port, _serve, _wait_up


@pytest.mark.slow
def test_the_data_folder_and_every_file_in_it_are_private(tmp_path):
    data = tmp_path / "hub"
    port = _free_port()
    hub = _serve(str(data), port)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_up(base, hub)
        token = _call(base, "POST", "/api/accounts", {"name": "ann"})["token"]
        _call(base, "POST", "/api/subscriptions", {"query": "law"}, token)
        hub.send_signal(signal.SIGTERM)  # stopping writes checkpoints and index snapshots
        assert hub.wait(60) == 0
    finally:
        if hub.poll() is None:
            hub.kill()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    files = sorted(p for p in data.rglob("*") if p.is_file())
    names = {p.name for p in files}
    assert {"hub.db", "feedmesh.db", "feed-secret.key", "reflector-0.db",
            "filter-0-of-1.index", "filter-0-of-1.index.json"} <= names, names
    loose = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in files
             if stat.S_IMODE(p.stat().st_mode) & 0o077}
    assert not loose, f"readable by others: {loose}"
