"""The commands a person runs: feedmesh crawl, serve and stats, as processes, against a farm."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from feedmesh.farm import FarmConfig, FarmProcess
from tests.eventually import eventually

ORIGIN = 1_760_000_000.0


@pytest.fixture(scope="module")
def farm():
    with FarmProcess(FarmConfig(feeds=30, seed=9, faults="none", origin=ORIGIN,
                                fault_overrides={0: "http_500", 1: "html"})) as process:
        yield process


def feedmesh(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "feedmesh", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_crawl_once_prints_a_summary_and_keeps_state(farm, tmp_path):
    db = str(tmp_path / "crawl.db")
    args = ("crawl", "--opml", farm.opml_url, "--once", "--db", db,
            "--allow-network", "127.0.0.0/8", "--quiet")
    first = feedmesh(*args)
    assert first.returncode == 0, first.stderr
    assert "30 feeds from" in first.stderr
    assert "fetched" in first.stderr and "error: server_error" in first.stderr
    assert "error: parse:not_a_feed" in first.stderr
    second = feedmesh(*args)
    assert second.returncode == 0, second.stderr
    # The state survived: the second run skips the backed-off feeds and gets 304s.
    assert "skipped (backoff, inactive)" in second.stderr


def test_crawl_refuses_what_it_cannot_read(tmp_path):
    missing = feedmesh("crawl", "--opml", str(tmp_path / "nope.opml"), "--once",
                       "--db", str(tmp_path / "x.db"))
    assert missing.returncode == 2 and "cannot read the OPML list" in missing.stderr
    bad = tmp_path / "bad.opml"
    bad.write_text("<html>not opml</html>")
    result = feedmesh("crawl", "--opml", str(bad), "--once", "--db", str(tmp_path / "x.db"))
    assert result.returncode == 2 and "root element is <html>" in result.stderr
    # Loopback is refused unless allowed: the guard protects the crawler's own network.
    blocked = feedmesh("crawl", "--opml", "http://127.0.0.1:9/opml", "--once",
                       "--db", str(tmp_path / "x.db"))
    assert blocked.returncode == 2 and "loopback" in blocked.stderr


def test_serve_and_stats(farm, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hub = subprocess.Popen([sys.executable, "-m", "feedmesh", "serve", "--data",
                            str(tmp_path / "hub"), "--port", str(port), "--opml", farm.opml_url,
                            "--allow-network", "127.0.0.0/8", "--interval", "5",
                            "--policy", "interval"],
                           stderr=subprocess.PIPE, text=True)

    def stats_once_stored() -> dict | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/stats") as answer:
                stats = json.load(answer)
        except OSError:  # not listening yet
            return None
        return stats if stats["entries_stored"] > 0 else None

    try:
        stats = eventually.blocking(stats_once_stored, timeout=60, interval=0.2,
                                    what="the hub serves stats with entries stored")
        assert stats["feeds"] == 30
        printed = feedmesh("stats", "--url", f"http://127.0.0.1:{port}")
        assert printed.returncode == 0, printed.stderr
        assert "source feeds" in printed.stdout and "30" in printed.stdout
        as_json = json.loads(feedmesh("stats", "--url", f"http://127.0.0.1:{port}",
                                      "--json").stdout)
        assert as_json["feeds"] == 30
    finally:
        hub.send_signal(signal.SIGTERM)
        assert hub.wait(60) == 0, hub.stderr.read()
    down = feedmesh("stats", "--url", f"http://127.0.0.1:{port}")
    assert down.returncode == 2 and "cannot read" in down.stderr
