"""Exactly once under kill -9: the hub as processes (the crawling hub, two filter shards, two
reflectors), each bound to a loopback address of its own and reaching the others only through the
URLs it was given, on a real NATS server, crawling a real farm, while a seeded schedule kills
one of them with SIGKILL at random moments (some while it is still loading its snapshot, some
while a reflector checkpoints every half second) and starts it again.

The oracle is offline: every entry the crawler stored, re-matched against every subscription with
the reference matcher, must be held by the subscription's reflector, and nothing else; no entry
may be stored twice. Not the system's own counters."""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.match import article_from_entry, parse_query
from feedmesh.store.sqlite import SQLiteStore
from feedmesh.store.sqlite_hub import SQLiteHubState
from tests.eventually import eventually

from .conftest import ORIGIN
from .test_external_reflectors import free_port
from .test_hub import held_newest

QUERIES = ["people", "time OR world", "people AND time", "world NOT people", "year*",
           "life OR day", "\"the world\"", "people OR time OR world"]
KEEP = 5000  # larger than anything matched: nothing is trimmed, so "held" is "delivered"
KILLS = 10
HUB_ADDRESS = "127.0.2.1"
REFLECTOR_ADDRESSES = ("127.0.2.11", "127.0.2.12")


@dataclass
class Role:
    """One process of the topology; its standard error goes to a file (read, never piped: a
    process that logs much must not block on a full pipe)."""

    name: str
    argv: list[str]
    ready: str
    logs: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    log_files: list[Path] = field(default_factory=list)

    def start(self) -> None:
        self.starts += 1
        path = self.logs / f"{self.name}-{self.starts}.log"
        self.log_files.append(path)
        with open(path, "wb") as err:
            self.process = subprocess.Popen([sys.executable, "-m", "feedmesh", *self.argv],
                                            stdout=subprocess.DEVNULL, stderr=err)

    def text(self) -> str:
        return self.log_files[-1].read_text(errors="replace")

    async def wait_ready(self) -> None:
        def up() -> bool:
            assert self.process is not None and self.process.poll() is None, self.text()
            return self.ready in self.text()

        await eventually(up, timeout=120)

    async def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(self.process.wait, 30)

    async def stop(self) -> int:
        """SIGTERM, and its exit status (the farm, in this event loop, keeps serving)."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.process.wait, 120)


def subscriptions(data: Path) -> dict[int, tuple[str, int]]:
    """Two accounts (one per reflector), each with every query: id -> (query, reflector)."""
    state = SQLiteHubState(data / "hub.db")
    subs = {}
    for name in ("ann", "bob"):
        account, _ = state.create_account(name, 1.0)
        for query in QUERIES:
            reflector = account.id % 2
            sub = state.add_subscription(account.id, name="", query=query, keep=KEEP,
                                         reflector=reflector, now=1.0)
            subs[sub.id] = (query, reflector)
    state.close()
    return subs


def oracle(data: Path, subs: dict[int, tuple[str, int]]) -> tuple[dict[int, set[int]], int]:
    """Each subscription's matching stored entries, and how many entries are stored twice
    (the same key, or the same content, twice in one feed)."""
    store = SQLiteStore(data / "feedmesh.db", max_entries_per_feed=10**9)
    try:
        urls = {row.id: row.state.url for row in store.feeds()}
        entries = store.entries_after(0, 10**9)
    finally:
        store.close()
    keys = {(item.feed_id, item.entry.key) for item in entries}
    hashes = {(item.feed_id, item.entry.content_hash) for item in entries}
    twice = 2 * len(entries) - len(keys) - len(hashes)
    tokens = [(item.id, article_from_entry(item.entry, urls[item.feed_id])) for item in entries]
    want = {sub_id: {entry_id for entry_id, t in tokens if parse_query(query).matches(t)}
            for sub_id, (query, _) in subs.items()}
    return want, twice


async def test_ten_kills_lose_nothing_and_double_nothing(tmp_path, nats_url):
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    subs = subscriptions(data)
    namespace = f"t{uuid.uuid4().hex[:10]}"
    common = ["--bus", nats_url, "--bus-namespace", namespace, "--log-level", "warning"]
    reflector_urls = [f"{a}:{free_port(a)}" for a in REFLECTOR_ADDRESSES]
    config = FarmConfig(feeds=30, seed=5, faults="none", speed=3600.0, origin=ORIGIN)
    async with FarmServer(config) as farm:
        roles = [
            *(Role(f"reflector{n}", ["reflector", *common, "--state", str(data / "hub.db"),
                                     "--shard", f"{n}/2", "--data", str(data), "--listen",
                                     reflector_urls[n], "--checkpoint-interval", "0.5"],
                   f"feedmesh reflector {n}/2", tmp_path) for n in (0, 1)),
            *(Role(f"filter{n}", ["filter", *common, "--state", str(data / "hub.db"),
                                  "--shard", f"{n}/2", "--data", str(tmp_path / f"f{n}")],
                   f"feedmesh filter shard {n}/2", tmp_path) for n in (0, 1)),
            Role("hub", ["serve", *common, "--data", str(data), "--host", HUB_ADDRESS,
                         "--port", "0", "--filters", "2", "--external-filters",
                         "--reflectors", "2", "--external-reflectors",
                         ",".join(f"http://{u}" for u in reflector_urls),
                         "--policy", "interval", "--interval", "0.5",
                         "--allow-network", "127.0.0.0/8", "--opml", farm.opml_url],
                 "feedmesh hub on", tmp_path),
        ]
        by_name = {role.name: role for role in roles}
        rng = random.Random(20261124)
        names = sorted(by_name)
        # Every role at least once, then at random.
        order = rng.sample(names, len(names)) + [rng.choice(names)
                                                 for _ in range(KILLS - len(names))]
        kills: list[str] = []
        codes: dict[str, int] = {}
        try:
            for role in roles:
                role.start()
            for role in roles:
                await role.wait_ready()
            for name in order:
                await asyncio.sleep(rng.uniform(0.3, 2.0))  # the system runs meanwhile
                role = by_name[name]
                await role.kill()
                kills.append(name)
                role.start()
                if rng.random() < 0.3:  # again at once: while it loads its snapshot
                    await asyncio.sleep(rng.uniform(0.05, 0.4))
                    await role.kill()
                    kills.append(name + " (loading)")
                    role.start()
                await role.wait_ready()
            await asyncio.sleep(2.0)  # some crawling after the last restart
        finally:
            # Drain order: the hub stops crawling and waits until the tiers acknowledged all it
            # published; then the filters, then the reflectors (a checkpoint each).
            for name in ("hub", "filter0", "filter1", "reflector0", "reflector1"):
                if by_name[name].process is not None:
                    codes[name] = await by_name[name].stop()
    logs = {role.name: role.text() for role in roles}
    assert codes == dict.fromkeys(codes, 0), (kills, logs)
    assert not any("Traceback" in text for text in logs.values()), logs
    assert len(kills) >= KILLS
    want, twice = oracle(data, subs)
    assert twice == 0
    lost = duplicated = 0
    for sub_id, (_, reflector) in subs.items():
        held = held_newest(data, sub_id, KEEP, reflector=reflector)
        duplicated += len(held) - len(set(held))
        lost += len(want[sub_id] - set(held))
        assert set(held) <= want[sub_id], (sub_id, sorted(set(held) - want[sub_id])[:10])
    assert sum(len(w) for w in want.values()) > 100  # the run matched something worth checking
    assert (lost, duplicated) == (0, 0), kills
