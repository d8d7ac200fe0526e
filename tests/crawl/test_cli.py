"""The commands a person runs: feedmesh crawl, serve and stats, as processes, against a farm."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
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


def test_every_error_of_a_crawl_names_its_feed(tmp_path):
    """The failure list has every feed the cycle counted an error for: the fetches that failed,
    the documents that parsed only in part, and the feeds whose document holds no entry."""
    overrides = {0: "http_500", 1: "html", 2: "malformed", 3: "not_found", 4: "wrong_charset"}
    with FarmProcess(FarmConfig(feeds=12, seed=4, faults="none", origin=ORIGIN,
                                fault_overrides=overrides)) as farm:
        done = feedmesh("crawl", "--opml", farm.opml_url, "--once", "--db",
                        str(tmp_path / "c.db"), "--allow-network", "127.0.0.0/8", "--quiet",
                        "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    errors = report["last_cycle"]["errors"]
    assert errors.get("parse:malformed"), errors  # the farm's malformed feed is recovered
    failed = report["failed"]
    assert sum(errors.values()) == sum(1 for f in failed if f["outcome"] != "empty"), (
        errors, failed)
    by_outcome = {f["outcome"] for f in failed}
    assert {"parse:malformed", "not_found"} <= by_outcome, failed
    assert all(f["error"] for f in failed)
    assert "entries recovered" in next(f["error"] for f in failed
                                       if f["outcome"] == "parse:malformed")


def test_ctrl_c_stops_a_crawl_within_two_seconds_keeping_what_was_fetched(tmp_path):
    """Half the feeds answer only after 20 s: the cycle is long, and Ctrl-C must not wait for
    it (nor for the fetches in flight), but what was fetched is stored."""
    overrides = dict.fromkeys(range(0, 40, 2), "slow")
    with FarmProcess(FarmConfig(feeds=40, seed=4, faults="none", origin=ORIGIN,
                                fault_overrides=overrides, slow_delay_s=20.0)) as farm:
        db = tmp_path / "c.db"
        process = subprocess.Popen(
            [sys.executable, "-m", "feedmesh", "crawl", "--opml", farm.opml_url, "--once",
             "--db", str(db), "--allow-network", "127.0.0.0/8", "--quiet", "--timeout", "30",
             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            asyncio.run(eventually(lambda: _stored(db) > 0, timeout=60, interval=0.1))
            began = time.monotonic()
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
            took = time.monotonic() - began
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, err
    assert took < 2.0, took
    assert "Traceback" not in err, err
    report = json.loads(out)
    assert report["interrupted"] is True and report["last_cycle"]["fetched"] > 0
    assert _stored(db) > 0  # what was fetched before Ctrl-C is kept


def _stored(db) -> int:
    import sqlite3
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
            return connection.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
    except sqlite3.Error:
        return 0
