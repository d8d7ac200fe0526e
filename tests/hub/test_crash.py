"""kill -9 a serving hub mid-stream: after a restart no subscription has lost or duplicated an
entry that was stored before the crash."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from feedmesh.farm import FarmConfig, FarmProcess
from tests.eventually import eventually

from .conftest import ORIGIN
from .test_hub import expected_newest, held_newest

QUERIES = ("people OR time OR world", "government OR market", "years")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _call(base: str, method: str, path: str, body: object = None, token: str = "",
          raw: bytes | None = None, content_type: str = "application/json") -> dict:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Content-Type", content_type)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


def _serve(data_dir: str, port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "feedmesh", "serve", "--data", data_dir, "--port", str(port),
         "--policy", "interval", "--interval", "0.3", "--allow-network", "127.0.0.0/8",
         "--per-host", "8",
         "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_up(base: str, proc: subprocess.Popen, timeout: float = 60.0) -> dict:
    def answering() -> dict | None:
        if proc.poll() is not None:
            raise RuntimeError(f"hub exited early: {proc.stderr.read()}")
        try:
            return _call(base, "GET", "/api/stats")
        except OSError:
            return None

    return eventually.blocking(answering, timeout=timeout, interval=0.2, what="the hub answers")


@pytest.mark.slow
def test_kill_9_mid_stream_loses_and_duplicates_nothing(tmp_path):
    data = str(tmp_path / "hub")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    config = FarmConfig(feeds=120, seed=21, faults="none", speed=7200.0, origin=ORIGIN)
    with FarmProcess(config) as farm:
        hub = _serve(data, port)
        try:
            _wait_up(base, hub)
            token = _call(base, "POST", "/api/accounts", {"name": "ann"})["token"]
            subs = [_call(base, "POST", "/api/subscriptions", {"query": q, "keep": 100},
                          token)["subscription"]["id"] for q in QUERIES]
            with urllib.request.urlopen(farm.opml_url, timeout=30) as answer:
                opml = answer.read()
            _call(base, "POST", "/api/opml", raw=opml, token=token, content_type="text/xml")
            # Kill while entries are flowing: after the first crawl, during a later one.
            readings = [0]

            def flowing() -> bool:
                readings.append(_call(base, "GET", "/api/stats")["entries_stored"])
                return readings[-1] > readings[-2] > 500

            eventually.blocking(flowing, timeout=60.0, interval=0.1,
                                what="entries still being stored after the first 500")
            os.kill(hub.pid, signal.SIGKILL)
            hub.wait(10)
        finally:
            if hub.poll() is None:
                hub.kill()

        hub = _serve(data, port)
        try:
            first = _wait_up(base, hub)  # the replay is done before the hub answers
            eventually.blocking(  # a few more crawl cycles after it
                lambda: _call(base, "GET", "/api/stats")["crawl_cycles"]
                >= first["crawl_cycles"] + 3, timeout=60.0, interval=0.2)
            hub.send_signal(signal.SIGTERM)  # clean shutdown drains the queues
            assert hub.wait(60) == 0
        finally:
            if hub.poll() is None:
                hub.kill()

    for sub_id, query in zip(subs, QUERIES, strict=True):
        held = held_newest(data, sub_id, 100)
        assert len(held) == len(set(held)), f"duplicates in subscription {sub_id}"
        assert held == expected_newest(data, query, 100), f"subscription {sub_id} lost entries"
        assert held, f"subscription {sub_id} never matched anything"
