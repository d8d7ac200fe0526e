"""Run a farm in its own process (benchmarks put it on the other core) and talk to it over HTTP.

    with FarmProcess(FarmConfig(feeds=10_000, faults="none"), cpu=0) as farm:
        crawl(farm.opml_url)
        hits = farm.requests(since=0)       # the request log, fetched from /_farm/requests

The child is ``python -m feedmesh farm ... --ready-json``; :meth:`FarmProcess.start` returns once
it printed its ready line (with the port it bound) and :meth:`stop` sends SIGTERM and waits.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request

import msgspec

from feedmesh.errors import FeedmeshError
from feedmesh.farm.config import FarmConfig
from feedmesh.farm.requestlog import FarmRequest
from feedmesh.procstat import rss_bytes

__all__ = ["FarmProcess", "FarmProcessError"]


class FarmProcessError(FeedmeshError, RuntimeError):
    """The farm process did not start (the message carries its stderr)."""


class _Requests(msgspec.Struct):
    next: int
    dropped: int
    requests: list[FarmRequest]


def _args(config: FarmConfig) -> list[str]:
    """The whole config travels as JSON, so every setting (fault timings, mixes) reaches the
    child."""
    return ["--config-json", msgspec.json.encode(config).decode(), "--ready-json"]


class FarmProcess:
    """A ``feedmesh farm`` child process serving exactly ``config``."""

    def __init__(self, config: FarmConfig, *, cpu: int | None = None,
                 python: str = sys.executable) -> None:
        self.config = config
        self.cpu = cpu
        self.python = python
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.base_urls: list[str] = []
        self.origin = 0.0
        self.startup_s = 0.0
        self.ready_s = 0.0

    def start(self, timeout: float = 60.0) -> FarmProcess:
        cpu = self.cpu

        def pin() -> None:  # runs in the child before exec
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})

        started = time.perf_counter()
        self.process = subprocess.Popen(
            [self.python, "-m", "feedmesh", "farm", *_args(self.config)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=pin)
        deadline = time.monotonic() + timeout
        line = ""
        while not line and self.process.poll() is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            readable, _, _ = select.select([self.process.stdout], [], [], min(remaining, 0.5))
            if readable:
                line = self.process.stdout.readline()
        if not line.startswith("{"):
            self.stop()
            stderr = self.process.stderr.read() if self.process.stderr else ""
            raise FarmProcessError(f"farm process did not get ready: {line!r} {stderr.strip()}")
        ready = json.loads(line)
        self.ready_s = time.perf_counter() - started
        self.port = ready["port"]
        self.base_urls = ready["base_urls"]
        self.origin = ready["origin"]
        self.startup_s = ready["startup_s"]
        return self

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else 0

    @property
    def base_url(self) -> str:
        return self.base_urls[0]

    @property
    def opml_url(self) -> str:
        return f"{self.base_url}/opml"

    def feed_url(self, feed_id: int) -> str:
        return f"{self.base_urls[feed_id % self.config.hosts]}/feeds/{feed_id}"

    def _get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.base_url + path, timeout=30) as response:
            return response.read()

    def requests(self, since: int = 0, *, feed: int | None = None) -> list[FarmRequest]:
        query = f"?since={since}" + (f"&feed={feed}" if feed is not None else "")
        return msgspec.json.decode(self._get("/_farm/requests" + query), type=_Requests).requests

    def truth(self, feed_id: int, since: float | None = None) -> list[dict]:
        query = "" if since is None else f"?since={since}"
        return json.loads(self._get(f"/_farm/truth/{feed_id}{query}"))["posts"]

    def stats(self) -> dict:
        return json.loads(self._get("/_farm/stats"))

    def rss_bytes(self) -> int:
        """Resident memory of the farm process (from /proc)."""
        return rss_bytes(self.pid) or 0

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> FarmProcess:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
