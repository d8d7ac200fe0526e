"""benchmarks/mesh_feedex.py end to end at a small size: a farm process, a tracker and six peers
on their own 127.0.3.x addresses in two worker processes, one farm hour at 600x. It must finish,
print its figures and end with the JSON line the issue names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[3] / "benchmarks" / "mesh_feedex.py"
KEYS = {"xch_coverage", "sln_coverage", "xch_lag_min", "sln_lag_min",
        "publisher_requests_xch_over_sln", "calls_per_node_min"}


def test_the_emulation_benchmark_runs_and_reports_the_issues_keys():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), "--nodes", "6", "--workers", "2", "--hours", "1",
         "--interval-hours", "0.5", "--speed", "600", "--churn", "0", "--warmup-s", "5"],
        capture_output=True, text=True, env=env, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures.keys() >= KEYS
    assert figures["nodes"] == 6 and figures["surviving_nodes"] == 6
    # every node fetched its 20 feeds twice or so; the exchange adds to what its fetches saw
    assert figures["publisher_requests_per_feed_day"] > 0
    assert 0 < figures["sln_coverage"] <= figures["xch_coverage"] <= 1
    assert figures["calls_per_node_min"] > 0 and figures["send_failures"] >= 0
    assert "entries a node gets, XCH" in done.stdout
