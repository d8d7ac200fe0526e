"""The kill run under ``feedmesh up``'s supervision (benchmarks/distributed.py ``--kills``).

``feedmesh up`` (its own NATS, SQLite, 2 filter shards, 2 reflectors, one web process) crawls a
farm while a seeded schedule kills a filter, a reflector or the crawler with SIGKILL, each role
at least once, and ``up`` starts each again by itself. Meanwhile a poller reads private feeds
through the web process (each feed about every 5.5 s, under its rate limit). Figures:

* ``kill_restart_s``: median seconds from a kill to the role serving again (its new process
  printed its ready line: ``running`` in up.json), and the max;
* ``kill_web_errors``: poller requests that got no HTTP answer during the kills (goal 0);
  ``kill_web_503``: those answered 503 (a feed whose reflector is restarting:
  ``feed_unavailable`` with Retry-After), counted apart; ``kill_web_requests`` in all;
* ``up_kill_lost`` / ``up_kill_duplicated``: entry-subscription pairs the reflectors lack or hold
  twice, by the offline re-match of tests/hub/test_distributed_faults.py (goal 0 and 0);
* ``nats_node_kill_lost`` / ``nats_node_kill_duplicated``: the same after ``up --nats-cluster 3``
  lost the node leading the articles stream to SIGKILL mid-run (goal 0 and 0), and
  ``nats_node_kill_leader_moved_s``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from feedmesh.farm import FarmConfig, FarmServer

ORIGIN = 1_760_000_000.0
_REPOSITORY = Path(__file__).resolve().parent.parent   # resolved once, not in the event loop
ROLES = ("filter", "reflector", "crawler")


def _rows(data: Path) -> list[dict]:
    return json.loads((data / "up.json").read_text())["processes"]


async def _feedmesh(*argv: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "feedmesh", *argv, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(process.communicate(), 300)
    return process.returncode or 0, err.decode()


def _rematch(data: Path, subs: dict) -> tuple[int, int, int]:
    """After ``down``: every stored entry re-matched offline against every subscription
    (tests/hub/test_distributed_faults.py); the pairs the reflectors lack, hold twice, and
    expect. The run's folder is removed."""
    from tests.hub.test_distributed_faults import held, oracle

    truth = oracle(str(data / "hub" / "feedmesh.db"), subs)
    lost = duplicated = 0
    for reflector in (0, 1):
        for sub_id, pairs in held(str(data / "hub" / f"reflector-{reflector}.db"), reflector,
                                  subs).items():
            ids = [entry_id for entry_id, _ in pairs]
            duplicated += len(ids) - len(set(ids))
            lost += len(truth.want[sub_id] - set(ids))
    shutil.rmtree(data.parent, ignore_errors=True)
    return lost, duplicated + truth.twice, sum(len(w) for w in truth.want.values())


async def _kill_run(kills: int, feeds: int, polled: int, seed: int) -> dict:
    sys.path.insert(0, str(_REPOSITORY))  # the tests package
    from tests.hub.test_distributed_faults import subscriptions
    from tests.upprocess import running_up

    data = Path(tempfile.mkdtemp(prefix="feedmesh-bench-up-")) / "up"
    (data / "hub").mkdir(parents=True, mode=0o700)
    subs = subscriptions(str(data / "hub" / "hub.db"))  # 2 accounts, one per reflector
    rng = random.Random(seed)
    config = FarmConfig(feeds=feeds, seed=5, faults="none", speed=3600.0, origin=ORIGIN)
    counts = {"requests": 0, "no_answer": 0, "503": 0, "429": 0, "200": 0}
    restarts: list[float] = []
    done: list[str] = []
    timeout = aiohttp.ClientTimeout(total=10)
    async with FarmServer(config) as farm, aiohttp.ClientSession(timeout=timeout) as session, \
            running_up("--data", str(data), "--store", "sqlite", "--filters", "2",
                       "--reflectors", "2", "--port", "0", "--crawl-interval", "0.5",
                       "--opml", farm.opml_url, "--allow-network", "127.0.0.0/8",
                       timeout=180) as up:
        web = up.web
        urls = []
        for n in range(2):  # readers on both reflectors
            async with session.post(f"{web}/api/accounts", json={"name": f"r{n}"}) as answer:
                auth = {"Authorization": f"Bearer {(await answer.json())['token']}"}
            for _ in range(polled // 2):
                async with session.post(f"{web}/api/subscriptions", headers=auth,
                                        json={"query": "people OR time OR world"}) as answer:
                    urls.append((await answer.json())["subscription"]["feed_urls"]["rss"])
        polling = asyncio.Event()

        async def poll() -> None:
            while not polling.is_set():
                for url in urls:
                    counts["requests"] += 1
                    try:
                        async with session.get(url) as answer:
                            await answer.read()
                            key = str(answer.status)
                            counts[key] = counts.get(key, 0) + 1
                    except (aiohttp.ClientError, TimeoutError, OSError):
                        counts["no_answer"] += 1
                    await asyncio.sleep(5.5 / len(urls))

        poller = asyncio.create_task(poll())
        order = [*rng.sample(ROLES, len(ROLES)),
                 *(rng.choice(ROLES) for _ in range(max(0, kills - len(ROLES))))]
        for role in order:
            await asyncio.sleep(rng.uniform(1.0, 3.0))  # the hub runs meanwhile
            victim = rng.choice([r for r in _rows(data) if r["role"] == role])
            key = (victim["role"], victim.get("shard", ""))
            os.kill(victim["pid"], signal.SIGKILL)
            killed = time.monotonic()
            while True:
                now = next(r for r in _rows(data) if (r["role"], r.get("shard", "")) == key)
                if now["pid"] != victim["pid"] and now["state"] == "running":
                    break
                if time.monotonic() - killed > 120:
                    raise RuntimeError(f"{key} not back within 120 s: {now}")
                await asyncio.sleep(0.05)
            restarts.append(time.monotonic() - killed)
            done.append(f"{role} {key[1]}".strip())
        await asyncio.sleep(5.0)  # what the last restart held is matched and served
        polling.set()
        await poller
        code, err = await _feedmesh("down", "--data", str(data))
        if code != 0:
            raise RuntimeError(f"feedmesh down: {err}")
        await asyncio.wait_for(up.process.wait(), 180)
    lost, duplicated, expected = _rematch(data, subs)
    return {"kill_restart_s": round(statistics.median(restarts), 2),
            "kill_restart_max_s": round(max(restarts), 2),
            "kill_web_errors": counts["no_answer"], "kill_web_503": counts["503"],
            "kill_web_429": counts["429"], "kill_web_requests": counts["requests"],
            "up_kill_lost": lost, "up_kill_duplicated": duplicated,
            "up_kill_pairs": expected, "up_kills": len(done), "up_killed": done}


async def _leader(admin, stream: str) -> str | None:
    import nats

    try:
        info = await admin._js.stream_info(stream)
    except nats.errors.Error:  # no stream yet, or no leader while one is elected
        return None
    return info.cluster.leader if info.cluster else None


async def _until(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.25)
    raise RuntimeError(f"not within {seconds:.0f} s: {what}")


async def _nats_node_kill_run(feeds: int, seed: int) -> dict:
    """``up --nats-cluster 3``: the node leading the articles stream killed mid-run."""
    sys.path.insert(0, str(_REPOSITORY))  # the tests package
    from tests.hub.test_distributed_faults import subscriptions
    from tests.upprocess import running_up

    from feedmesh.bus.jetstream import JetStreamBus

    data = Path(tempfile.mkdtemp(prefix="feedmesh-bench-up-cluster-")) / "up"
    (data / "hub").mkdir(parents=True, mode=0o700)
    subs = subscriptions(str(data / "hub" / "hub.db"))
    config = FarmConfig(feeds=feeds, seed=seed % 1000, faults="none", speed=3600.0,
                        origin=ORIGIN)
    async with FarmServer(config) as farm, running_up(
            "--data", str(data), "--store", "sqlite", "--nats-cluster", "3", "--filters", "1",
            "--reflectors", "2", "--port", "0", "--crawl-interval", "0.5",
            "--opml", farm.opml_url, "--allow-network", "127.0.0.0/8", timeout=180) as up:
        listing = json.loads((data / "up.json").read_text())
        nodes = {p["node"]: p for p in listing["processes"] if p["role"] == "nats"}
        admin = await JetStreamBus.connect(listing["bus"], connect_timeout=10,
                                           credentials=data / "secrets/nats/admin.nk")
        try:
            await asyncio.sleep(3.0)  # crawling and matching under way
            victim = await _until(lambda: _leader(admin, "feedmesh_articles"), 60,
                                  "the articles stream's leader")
            os.kill(nodes[victim]["pid"], signal.SIGKILL)
            killed = time.monotonic()

            async def moved() -> bool:
                found = await _leader(admin, "feedmesh_articles")
                return found is not None and found != victim

            await _until(moved, 60, "a new leader of the articles stream")
            moved_s = time.monotonic() - killed
            await asyncio.sleep(5.0)  # the hub goes on crawling and matching
        finally:
            await admin.close()
        code, err = await _feedmesh("down", "--data", str(data))
        if code != 0:
            raise RuntimeError(f"feedmesh down: {err}")
        await asyncio.wait_for(up.process.wait(), 180)
    lost, duplicated, expected = _rematch(data, subs)
    return {"nats_node_kill_lost": lost, "nats_node_kill_duplicated": duplicated,
            "nats_node_kill_pairs": expected,
            "nats_node_kill_leader_moved_s": round(moved_s, 2)}


def nats_node_kill_run(feeds: int = 20, seed: int = 20261202) -> dict:
    figures = asyncio.run(_nats_node_kill_run(feeds, seed))
    print(f"NATS node kill (3-node cluster, the articles leader): leader moved after "
          f"{figures['nats_node_kill_leader_moved_s']} s; {figures['nats_node_kill_pairs']} pairs "
          f"expected, lost {figures['nats_node_kill_lost']}, doubled "
          f"{figures['nats_node_kill_duplicated']} (goal 0 and 0)", flush=True)
    return figures


def supervised_kill_run(kills: int = 9, feeds: int = 30, polled: int = 10,
                        seed: int = 20261202) -> dict:
    figures = asyncio.run(_kill_run(kills, feeds, polled, seed))
    print(f"kill run under up: {figures['up_kills']} kills ({', '.join(figures['up_killed'])}); "
          f"back after {figures['kill_restart_s']} s (median; max "
          f"{figures['kill_restart_max_s']} s; goal <= 5); poller: "
          f"{figures['kill_web_requests']} requests, {figures['kill_web_errors']} without an "
          f"answer (goal 0), {figures['kill_web_503']} 503; {figures['up_kill_pairs']} pairs "
          f"expected, lost {figures['up_kill_lost']}, doubled {figures['up_kill_duplicated']}",
          flush=True)
    return figures


if __name__ == "__main__":
    print(json.dumps(supervised_kill_run() | nats_node_kill_run()))
