"""`feedmesh serve --bus`: the hub's tiers meeting on a real NATS JetStream server, and a bus it
cannot use said in one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

import pytest

from tests.eventually import eventually


def serve(tmp_path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "feedmesh", "serve", "--data", str(tmp_path / "data"),
         "--port", "0", "--log-level", "warning", *flags],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)


def test_serve_runs_its_tiers_on_nats_and_stops_cleanly(tmp_path, nats_url):
    hub = serve(tmp_path, "--bus", nats_url, "--bus-namespace", "servetest")
    try:
        line = hub.stderr.readline()  # the first line says where the hub listens
        assert line.startswith("feedmesh hub on http://127.0.0.1:"), line
        base = line.split()[3].rstrip("/")
        request = urllib.request.Request(base + "/api/accounts", method="POST",
                                         data=json.dumps({"name": "ann"}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            token = json.load(answer)["token"]
        request = urllib.request.Request(
            base + "/api/subscriptions", method="POST",
            data=json.dumps({"query": "nats OR jetstream"}).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        # The answer waits until every tier applied the change: a round trip through the
        # server's control stream and every group's acknowledgement.
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 201
    finally:
        hub.send_signal(signal.SIGTERM)
        rest = hub.communicate(timeout=60)[1]
    assert hub.returncode == 0, rest
    assert "Traceback" not in rest


@pytest.mark.parametrize("bus, says", [
    ("kafka://127.0.0.1:9092", "bus 'kafka://127.0.0.1:9092': use 'memory' or a NATS URL"),
])
def test_a_bus_it_cannot_use_is_one_line(tmp_path, bus, says):
    hub = serve(tmp_path, "--bus", bus)
    err = hub.communicate(timeout=60)[1]
    assert hub.returncode == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("feedmesh serve: ") and says in lines[0], err


async def test_the_streams_outlive_the_hub(tmp_path, nats_url):
    # What the hub created on the server is there after it stopped: the groups its tiers
    # joined, durable, waiting for the next start.
    from feedmesh.bus.jetstream import JetStreamBus

    hub = serve(tmp_path, "--bus", nats_url, "--bus-namespace", "outlive")
    try:
        assert hub.stderr.readline().startswith("feedmesh hub on")
    finally:
        hub.send_signal(signal.SIGTERM)
        hub.communicate(timeout=60)
    bus = await JetStreamBus.connect(nats_url, namespace="outlive")
    try:
        names = set()

        async def listed() -> bool:
            names.update(info.config.name for info in await bus._js.streams_info())
            return {"outlive_articles", "outlive_control", "outlive_matches_0"} <= names

        await eventually(listed)
        groups = {c.name for c in await bus._js.consumers_info("outlive_articles")}
        assert groups == {"filter-0"}
    finally:
        await bus.close()


def test_a_store_that_is_not_postgresql_is_one_line(tmp_path):
    hub = serve(tmp_path, "--store", "mysql://127.0.0.1/feedmesh")
    err = hub.communicate(timeout=60)[1]
    assert hub.returncode == 2
    assert err.strip() == ("feedmesh serve: --store 'mysql://127.0.0.1/feedmesh': give a "
                           "postgresql:// URL (or nothing, for SQLite files in --data)"), err
