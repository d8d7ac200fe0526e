"""Crawling while readers poll: does serving private feeds slow the crawler down?

The hub serves feeds from the same event loop that runs its crawler. A `feedmesh serve` process
(pinned to core 1) crawls a farm (its own process, core 0) as fast as it can: every feed every
``--interval`` seconds, an interval too short to finish in, so the crawl's pace is the hub's
capacity. One subscription holds 100 entries (a ~120 KB RSS feed). The crawl's fetch rate is
measured over whole windows, alternately quiet and with ``--clients`` readers (in this process,
core 0) polling that feed as fast as the feed limits allow, each poll a full 200 with gzip, as a
reader without validators would: each reader from its own loopback address (the limits are per
feed and client), waiting as long as a 429's Retry-After says. ``--no-limits`` lifts the limits
and lets every reader poll back to back: the worst case, not the target's.

    .venv/bin/python benchmarks/feed_serving.py [--clients 200] [--window 20] [--rounds 3]
    .venv/bin/python benchmarks/feed_serving.py --no-limits   # readers back to back
    .venv/bin/python benchmarks/feed_serving.py --src ../other-checkout/src   # another version

Target: the crawl under load keeps >= 90% of its quiet fetch rate. Last line: JSON with
``quiet_fetches_per_s``, ``loaded_fetches_per_s``, ``crawl_ratio`` (medians over rounds),
``feed_200_per_s`` and ``feed_renders``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from feedmesh.farm import FarmConfig, FarmProcess

ORIGIN = 1_760_000_000.0
QUERY = "people OR time OR world OR year OR government"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _call(url: str, method: str = "GET", body: object = None, token: str = "") -> dict:
    request = urllib.request.Request(url, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.load(answer)


def _counter(base: str, name: str) -> float:
    with urllib.request.urlopen(f"{base}/metrics", timeout=60) as answer:
        text = answer.read().decode()
    return sum(s.value for family in text_string_to_metric_families(text)
               for s in family.samples if s.name == name)


def start_hub(data: Path, port: int, opml_url: str, interval: float, src: str | None,
              limits: bool) -> subprocess.Popen:
    def pin() -> None:
        if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
            os.sched_setaffinity(0, {1})

    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.path.abspath(src)
    return subprocess.Popen(
        [sys.executable, "-m", "feedmesh", "serve", "--data", str(data), "--port", str(port),
         "--policy", "interval", "--interval", str(interval), "--per-host", "64",
         "--allow-network", "127.0.0.0/8", "--opml", opml_url,
         *(() if limits else ("--feed-rate", "1000000", "--feed-burst", "1000000")),
         "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=pin, env=env)


def wait_until(check, timeout: float, what: str, hub: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hub.poll() is not None:
            raise RuntimeError(f"hub exited: {hub.stderr.read()[-2000:]}")
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not happen within {timeout} s")


async def poll(url: str, clients: int, seconds: float) -> tuple[int, int]:
    """``clients`` readers, each from its own loopback address, fetching ``url`` as fast as the
    hub lets them for ``seconds``: again at once after a 200, after Retry-After after a 429.
    Returns (200s, 429s)."""
    served = refused = 0
    headers = {"Accept-Encoding": "gzip"}
    deadline = time.perf_counter() + seconds

    async def reader(number: int) -> None:
        nonlocal served, refused
        address = f"127.0.{1 + number // 250}.{1 + number % 250}"
        connector = aiohttp.TCPConnector(limit=1, local_addr=(address, 0))
        async with aiohttp.ClientSession(connector=connector) as session:
            while time.perf_counter() < deadline:
                async with session.get(url, headers=headers) as response:
                    await response.read()
                    if response.status == 429:
                        refused += 1
                        wait = float(response.headers.get("Retry-After", "1"))
                        await asyncio.sleep(min(wait, max(0.0, deadline - time.perf_counter())))
                        continue
                    if response.status != 200:
                        raise RuntimeError(f"{url}: {response.status}")
                    served += 1

    await asyncio.gather(*(reader(n) for n in range(clients)))
    return served, refused


def fetch_rate(base: str, seconds: float,
               load: tuple[str, int] | None) -> tuple[float, int, int]:
    """The crawl's fetches per second over ``seconds``, with readers polling or not; and how
    many feeds the readers got (200) and were refused (429)."""
    before = _counter(base, "feedmesh_fetches_total")
    started = time.perf_counter()
    served = refused = 0
    if load is None:
        time.sleep(seconds)
    else:
        served, refused = asyncio.run(poll(load[0], load[1], seconds))
    elapsed = time.perf_counter() - started
    return (_counter(base, "feedmesh_fetches_total") - before) / elapsed, served, refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feeds", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--window", type=float, default=20.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="quiet/loaded pairs")
    parser.add_argument("--no-limits", action="store_true",
                        help="lift the feed limits: readers poll back to back (worst case)")
    parser.add_argument("--interval", type=float, default=0.5,
                        help="crawl interval, shorter than a cycle takes (capacity-bound)")
    parser.add_argument("--src", default=None, help="run the hub from this source tree")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})
    config = FarmConfig(feeds=args.feeds, seed=1, faults="none", hosts=20, speed=60.0,
                        origin=ORIGIN, max_age_share=0.0)
    with tempfile.TemporaryDirectory() as tmp, FarmProcess(config, cpu=0) as farm:
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        hub = start_hub(Path(tmp) / "hub", port, farm.opml_url, args.interval, args.src,
                        limits=not args.no_limits)
        try:
            wait_until(lambda: _call(f"{base}/api/stats"), 120, "the hub answering", hub)
            token = _call(f"{base}/api/accounts", "POST", {"name": "bench"})["token"]
            sub = _call(f"{base}/api/subscriptions", "POST",
                        {"query": QUERY, "keep": 100}, token)["subscription"]
            entries = f"{base}/api/subscriptions/{sub['id']}/entries"
            wait_until(lambda: len(_call(entries, token=token)["entries"]) >= 100, 600,
                       "the feed filling up", hub)
            url = sub["feed_urls"]["rss"]
            with urllib.request.urlopen(url, timeout=60) as answer:
                feed_bytes = len(answer.read())
            fetch_rate(base, min(args.window, 10.0), None)  # warm up: compilation, caches
            quiet, loaded, served, refused = [], [], [], []
            for _ in range(args.rounds):
                rate, _, _ = fetch_rate(base, args.window, None)
                quiet.append(rate)
                rate, ok, no = fetch_rate(base, args.window, (url, args.clients))
                loaded.append(rate)
                served.append(ok / args.window)
                refused.append(no / args.window)
                print(f"  quiet {quiet[-1]:7.1f} fetches/s   with {args.clients} readers "
                      f"{loaded[-1]:7.1f} fetches/s; readers got {served[-1]:7.1f} feeds/s, "
                      f"{refused[-1]:6.1f} 429s/s", flush=True)
            renders = _call(f"{base}/api/stats")["metrics"].get(
                "feedmesh_feed_renders_total", None)
        finally:
            hub.terminate()
            try:
                hub.wait(60)
            except subprocess.TimeoutExpired:
                hub.kill()
    figures = {
        "feeds": args.feeds, "clients": args.clients, "feed_bytes": feed_bytes,
        "quiet_fetches_per_s": round(statistics.median(quiet), 1),
        "loaded_fetches_per_s": round(statistics.median(loaded), 1),
        "crawl_ratio": round(statistics.median(
            busy / calm for busy, calm in zip(loaded, quiet, strict=True)), 3),
        "feed_200_per_s": round(statistics.median(served), 1),
        "feed_429_per_s": round(statistics.median(refused), 1),
        "limits": not args.no_limits,
        "feed_renders": renders, "src": args.src or "this checkout",
    }
    print(f"crawl under load keeps {figures['crawl_ratio']:.0%} of its quiet rate "
          "(target >= 90%)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
