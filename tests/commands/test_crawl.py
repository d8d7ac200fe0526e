"""`feedmesh crawl` ends with the feeds that failed and why, for a person and (``--json``) for a
program, and names its own flag when the address guard refuses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from feedmesh.farm import FarmConfig, FarmProcess


def feedmesh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "feedmesh", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_the_feeds_that_failed_and_why(tmp_path):
    config = FarmConfig(feeds=12, seed=9, faults="none", origin=1_760_000_000.0,
                        fault_overrides={0: "http_500", 1: "html"})
    with FarmProcess(config) as farm:
        done = feedmesh("crawl", "--opml", farm.opml_url, "--once", "--quiet", "--json",
                        "--db", str(tmp_path / "c.db"), "--allow-network", "127.0.0.0/8")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    failed = {row["url"]: row for row in answer["failed"]}
    assert answer["cycles"] == 1 and answer["last_cycle"]["fetched"] == 12
    assert len(failed) == 2, failed
    outcomes = sorted(row["outcome"] for row in failed.values())
    assert outcomes == ["not_a_feed", "server_error"]
    assert all(row["error"].startswith(row["url"]) for row in failed.values())
    assert "2 feeds failed" in done.stderr and "HTTP 500" in done.stderr  # the table


def test_a_refused_address_names_the_flag_that_allows_it(tmp_path):
    done = feedmesh("crawl", "--opml", "http://127.0.0.1:9/opml", "--once",
                    "--db", str(tmp_path / "x.db"))
    assert done.returncode == 2 and "loopback address" in done.stderr
    assert "--allow-network CIDR" in done.stderr and "allow_networks" not in done.stderr
