"""Exactly once under faults: the hub as processes (the crawling hub, two filter shards, two
reflectors), each bound to a loopback address of its own and reaching the others only through the
URLs it was given, on a real NATS server, crawling a real farm, while

* a seeded schedule kills one of them with SIGKILL at random moments (some again just after
  it started, some while a reflector checkpoints every half second) and starts it again, at
  least ten times; then, at armed failpoints (src/feedmesh/failpoints.py), a filter shard in the
  middle of loading its snapshot and each reflector in the middle of a checkpoint, so those
  moments are certain, not likely;
* the NATS server is stopped for 10 s mid-flow (its own server: other tests share the session's);
* PostgreSQL, holding the hub's state, the entries and the reflectors' logs, is stopped for 10 s.

The oracle is offline: every entry the crawler stored, re-matched against every subscription with
the reference matcher, must be held by the subscription's reflector, and nothing else; no entry
may be stored twice. Not the system's own counters."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from feedmesh.bus.nats_server import LocalNats
from feedmesh.compose import open_hub_state, open_ingest_store, open_reflector_log
from feedmesh.failpoints import ENVIRONMENT as FAILPOINTS
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.hub.tiers.held import restore_held
from feedmesh.match import article_from_entry, parse_query
from feedmesh.store.pg_server import LocalPostgres, LocalPostgresError
from tests.eventually import eventually

from .conftest import ORIGIN
from .test_external_reflectors import free_port

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

    def start(self, env: dict[str, str] | None = None) -> None:
        """Start it (``env``: variables added to this one's, e.g. armed failpoints)."""
        self.starts += 1
        path = self.logs / f"{self.name}-{self.starts}.log"
        self.log_files.append(path)
        with open(path, "wb") as err:
            self.process = subprocess.Popen([sys.executable, "-m", "feedmesh", *self.argv],
                                            stdout=subprocess.DEVNULL, stderr=err,
                                            env={**os.environ, **(env or {})})

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


def subscriptions(state_at: str) -> dict[int, tuple[str, int]]:
    """Two accounts (one per reflector), each with every query: id -> (query, reflector)."""
    state = open_hub_state(state_at)
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


class Oracle(NamedTuple):
    want: dict[int, set[int]]
    """Each subscription's matching stored entries."""
    twice: int
    """Entries stored twice (the same key, or the same content, twice in one feed)."""
    oldest: dict[int, int]
    """Per feed, its oldest stored entry: the store keeps the newest 200 of a feed, so a
    reflector may hold older ones the store has since pruned (and the oracle cannot re-match)."""


def oracle(entries_at: str, subs: dict[int, tuple[str, int]]) -> Oracle:
    """What the reflectors must hold, from the stored entries alone."""
    store = open_ingest_store(entries_at)
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
    oldest: dict[int, int] = {}
    for item in entries:
        oldest[item.feed_id] = min(oldest.get(item.feed_id, item.id), item.id)
    return Oracle(want, twice, oldest)


def held(log_at: str, reflector: int, subs: dict[int, tuple[str, int]]
         ) -> dict[int, list[tuple[int, int]]]:
    """What a reflector's durable state holds for each of its subscriptions (checkpoint plus
    log), as its next start would load it: (entry id, feed id), each held entry's item
    present."""
    keeps = np.zeros(max(subs) + 1, dtype=np.int16)
    keeps[list(subs)] = KEEP
    log = open_reflector_log(log_at, reflector)
    try:
        topk = restore_held(log, keeps).topk
        out = {}
        for sub_id, (_, owner) in subs.items():
            if owner == reflector:
                newest = topk.newest_ids(sub_id, KEEP)
                items = log.items(newest)
                assert len(items) == len(newest), "a held entry has no stored item"
                out[sub_id] = [(item.entry_id, item.feed_id) for item in items]
        return out
    finally:
        log.close()


Disturb = Callable[[dict[str, Role], random.Random, list[str]], Awaitable[None]]


def stored_entries(entries_at: str) -> int:
    store = open_ingest_store(entries_at)
    try:
        return store.entry_count()
    finally:
        store.close()


async def crawled(entries_at: str, more: int = 30) -> None:
    """Until the crawler has stored ``more`` entries past what it holds now: the farm posts and
    the crawl goes on (before a fault, or after one to show that it resumed)."""
    start = stored_entries(entries_at)
    await eventually(lambda: stored_entries(entries_at) >= start + more, timeout=120,
                     interval=0.5)


def filter_role(common: list[str], state_at: str, shard: int, shards: int,
                tmp_path: Path) -> Role:
    return Role(f"filter{shard}", ["filter", *common, "--state", state_at, "--shard",
                                   f"{shard}/{shards}", "--data", str(tmp_path / f"f{shard}")],
                f"feedmesh filter shard {shard}/{shards}", tmp_path)


async def run_topology(tmp_path: Path, nats_url: str, disturb: Disturb, store_url: str = "",
                       crawlers: int = 0, filters: int = 2) -> tuple[int, int, int, list[str]]:
    """Start the five processes (with ``crawlers``, that many ``feedmesh crawler --shard``
    processes instead of the crawling hub with its web), ``disturb`` them while the farm posts,
    stop them in drain order, and check the result offline: (lost, duplicated, pairs expected,
    what was done)."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    state_at = store_url or str(data / "hub.db")
    subs = subscriptions(state_at)
    namespace = f"t{uuid.uuid4().hex[:10]}"
    common = ["--bus", nats_url, "--bus-namespace", namespace, "--log-level", "warning"]
    stored = ["--store", store_url] if store_url else []
    reflector_urls = [f"{a}:{free_port(a)}" for a in REFLECTOR_ADDRESSES]
    config = FarmConfig(feeds=30, seed=5, faults="none", speed=3600.0, origin=ORIGIN)
    async with FarmServer(config) as farm:
        roles = [
            *(Role(f"reflector{n}", ["reflector", *common, *stored, "--state", state_at,
                                     "--shard", f"{n}/2", "--data", str(data), "--listen",
                                     reflector_urls[n], "--checkpoint-interval", "0.5"],
                   f"feedmesh reflector {n}/2", tmp_path) for n in (0, 1)),
            *(filter_role(common, state_at, n, filters, tmp_path) for n in range(filters)),
        ]
        crawling = ["--data", str(data), "--port", "0", "--filters", str(filters),
                    "--external-filters",
                    "--reflectors", "2", "--external-reflectors",
                    ",".join(f"http://{u}" for u in reflector_urls), "--policy", "interval",
                    "--interval", "0.5", "--allow-network", "127.0.0.0/8", "--opml",
                    farm.opml_url]
        if not crawlers:
            roles.append(Role("hub", ["serve", *common, *stored, *crawling, "--host",
                                      HUB_ADDRESS], "feedmesh hub on", tmp_path))
        for n in range(crawlers):
            roles.append(Role(f"crawler{n}", ["crawler", *common, *stored, *crawling, "--host",
                                              f"127.0.2.{2 + n}", "--shard", f"{n}/{crawlers}"],
                              "feedmesh crawler:", tmp_path))
        by_name = {role.name: role for role in roles}
        done: list[str] = []
        codes: dict[str, int] = {}
        try:
            for role in roles:
                role.start()
            for role in roles:
                await role.wait_ready()
            await disturb(by_name, random.Random(20261124), done)
            await crawled(store_url or str(data / "feedmesh.db"))  # after the last one
        finally:
            # Drain order: the hub stops crawling and waits until the tiers acknowledged all it
            # published; then the filters, then the reflectors (a checkpoint each).
            # (A disturbance may have added roles: a filter shard, say.)
            for kind in ("hub", "crawler", "filter", "reflector"):
                for name in sorted(by_name):
                    if name.startswith(kind) and by_name[name].process is not None:
                        codes[name] = await by_name[name].stop()
            roles = list(by_name.values())
    logs = {role.name: role.text() for role in roles}
    assert codes == dict.fromkeys(codes, 0), (done, logs)
    shown = {name: text[text.index("Traceback"):][:3000] for name, text in logs.items()
             if "Traceback" in text}
    assert not shown, "\n\n".join(f"{name}: {text}" for name, text in shown.items())
    truth = oracle(store_url or str(data / "feedmesh.db"), subs)
    want = truth.want
    assert truth.twice == 0
    lost = duplicated = 0
    for reflector in (0, 1):
        log_at = store_url or str(data / f"reflector-{reflector}.db")
        for sub_id, pairs in held(log_at, reflector, subs).items():
            ids = [entry_id for entry_id, _ in pairs]
            duplicated += len(ids) - len(set(ids))
            lost += len(want[sub_id] - set(ids))
            # Held but not expected: only entries the store pruned since (older than their
            # feed's oldest stored entry), never one it has, or never had.
            phantom = sorted(entry_id for entry_id, feed_id in pairs
                             if entry_id not in want[sub_id]
                             and entry_id >= truth.oldest.get(feed_id, 0))
            assert not phantom, (sub_id, phantom)
    expected = sum(len(w) for w in want.values())
    assert expected > 100  # the run matched something worth checking
    return lost, duplicated, expected, done


FAILPOINT_KILLS = {"filter0": "filter.snapshot_mapped",
                   "reflector0": "reflector.checkpoint_written",
                   "reflector1": "reflector.checkpoint_copied"}
"""The moments a random schedule can only hope to hit, made certain: a filter shard in the
middle of loading its snapshot (mapped, the changes since not applied), a reflector between a
durable checkpoint and the truncation of the log it covers, and one with its held entries
copied but nothing written (src/feedmesh/failpoints.py)."""


async def kill_at_failpoints(roles: dict[str, Role], done: list[str]) -> None:
    """Restart each role of FAILPOINT_KILLS with its failpoint armed, and kill it the moment
    its log says it is there (it waits there a minute: the kill lands inside, not after)."""
    for name, point in FAILPOINT_KILLS.items():
        role = roles[name]
        await role.kill()
        done.append(name)
        role.start(env={FAILPOINTS: f"{point}=60"})

        def there(role: Role = role, point: str = point) -> bool:
            assert role.process is not None and role.process.poll() is None, role.text()
            return f"failpoint_reached name={point}" in role.text()

        await eventually(there, timeout=120)
        await role.kill()
        done.append(f"{name} (at {point})")
        role.start()
        await role.wait_ready()


async def kill_at_random(roles: dict[str, Role], rng: random.Random, done: list[str]) -> None:
    names = sorted(roles)
    # Every role at least once, then at random.
    order = rng.sample(names, len(names)) + [rng.choice(names)
                                             for _ in range(KILLS - len(names))]
    for name in order:
        await asyncio.sleep(rng.uniform(0.3, 2.0))  # the system runs meanwhile
        role = roles[name]
        await role.kill()
        done.append(name)
        role.start()
        if rng.random() < 0.3:  # again at once: while it loads its snapshot
            await asyncio.sleep(rng.uniform(0.05, 0.4))
            await role.kill()
            done.append(name + " (loading)")
            role.start()
        await role.wait_ready()
    await kill_at_failpoints(roles, done)


async def test_ten_kills_lose_nothing_and_double_nothing(tmp_path, nats_url):
    lost, duplicated, _, done = await run_topology(tmp_path, nats_url, kill_at_random)
    assert len(done) >= KILLS
    assert (lost, duplicated) == (0, 0), done


async def test_two_crawlers_share_the_feeds_and_kills_lose_nothing(tmp_path, nats_url,
                                                                   postgres_url):
    """Cobra's split of the feeds over crawlers: two `feedmesh crawler --shard i/2` processes
    on one PostgreSQL ingest store each fetch half of the feeds, and the tiers get every entry
    once, while crawlers and the others are killed at random."""
    seen: dict[str, str] = {}

    async def kills_then_look(roles: dict[str, Role], rng: random.Random,
                              done: list[str]) -> None:
        seen.update({name: roles[name].text() for name in ("crawler0", "crawler1")})
        await kill_at_random(roles, rng, done)

    lost, duplicated, _, done = await run_topology(tmp_path, nats_url, kills_then_look,
                                                   store_url=postgres_url, crawlers=2)
    shares = [int(seen[name].split("feedmesh crawler: ")[1].split()[0])
              for name in ("crawler0", "crawler1")]
    assert shares == [15, 15]  # feed ids 1..30: odd and even
    assert (lost, duplicated) == (0, 0), done


async def test_a_filter_shard_added_by_a_restart_loses_nothing(tmp_path, nats_url):
    """Ownership moves by a restart with new flags (docs/distributed.md): the crawling hub is
    stopped (it drains: the one shard acknowledged every article), then the shard; the hub
    starts with --filters 2 (it makes both shards' groups before it publishes), then shards 0/2
    and 1/2. The subscriptions of shard 1 go on getting every entry."""

    def flags(argv: list[str], flag: str, value: str) -> list[str]:
        argv = list(argv)
        argv[argv.index(flag) + 1] = value
        return argv

    entries_at = str(tmp_path / "data" / "feedmesh.db")

    async def reshard(roles: dict[str, Role], rng: random.Random, done: list[str]) -> None:
        await crawled(entries_at)
        hub, shard = roles["hub"], roles["filter0"]
        assert await hub.stop() == 0 and await shard.stop() == 0
        hub.argv = flags(hub.argv, "--filters", "2")
        hub.start()
        await hub.wait_ready()
        common = shard.argv[1:shard.argv.index("--state")]
        state_at = shard.argv[shard.argv.index("--state") + 1]
        for n in (0, 1):
            roles[f"filter{n}"] = filter_role(common, state_at, n, 2, tmp_path)
            roles[f"filter{n}"].starts = 10  # its own log files
            roles[f"filter{n}"].start()
        for n in (0, 1):
            await roles[f"filter{n}"].wait_ready()
        done.append("1 shard -> 2")
        await crawled(entries_at)

    lost, duplicated, _, done = await run_topology(tmp_path, nats_url, reshard, filters=1)
    assert done == ["1 shard -> 2"]
    assert (lost, duplicated) == (0, 0)


async def test_a_nats_outage_of_ten_seconds_is_waited_out(tmp_path):
    server = LocalNats(tmp_path / "nats").start()

    entries_at = str(tmp_path / "data" / "feedmesh.db")

    async def outage(roles: dict[str, Role], rng: random.Random, done: list[str]) -> None:
        await crawled(entries_at)
        await asyncio.to_thread(server.stop)
        done.append("nats stopped")
        await asyncio.sleep(10.0)  # the outage itself: its length is the test's
        await asyncio.to_thread(server.start)  # the same port, the same JetStream files
        done.append("nats started")
        await crawled(entries_at)  # it resumed by itself

    try:
        lost, duplicated, _, done = await run_topology(tmp_path, server.url, outage)
    finally:
        server.stop()
    assert (lost, duplicated) == (0, 0), done


def command_line(pid: int) -> bytes:
    """What every user of the machine reads of a process (``/proc/PID/cmdline``)."""
    return Path(f"/proc/{pid}/cmdline").read_bytes()


async def test_a_postgresql_outage_of_ten_seconds_is_waited_out(tmp_path):
    folder = tempfile.mkdtemp(prefix="feedmesh-test-pg-")  # the server's user must reach it
    server = LocalPostgres(folder, durable=False)
    try:
        server.start()
    except LocalPostgresError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise AssertionError(f"no PostgreSQL for the test: {exc}") from exc
    nats = LocalNats(tmp_path / "nats").start()
    login = server.superuser_login(tmp_path / "secrets" / "superuser.pgpass")

    async def outage(roles: dict[str, Role], rng: random.Random, done: list[str]) -> None:
        for role in roles.values():  # the roles were told where the password is, not what
            argv = command_line(role.process.pid)
            assert server.password.encode() not in argv and b"passfile=" in argv, role.name
        await crawled(server.url())
        await asyncio.to_thread(server.stop)
        done.append("postgresql stopped")
        await asyncio.sleep(10.0)  # the outage itself: its length is the test's
        await asyncio.to_thread(server.start)
        done.append("postgresql started")
        await crawled(server.url())  # it resumed by itself

    try:
        lost, duplicated, _, done = await run_topology(tmp_path, nats.url, outage,
                                                       store_url=login.url)
    finally:
        nats.stop()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    assert (lost, duplicated) == (0, 0), done
