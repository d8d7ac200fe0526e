"""Feed ownership moves while the crawlers run (docs/locality.md, "Ownership"): named crawler
processes (``feedmesh crawler --name``), each fetching from a loopback address of its own, on a
real PostgreSQL and a real NATS server, crawl a real farm while

1. ``feedmesh map --apply`` maps the feeds over two crawlers before they start;
2. a web process's ``FeedsAdded`` brings feeds nobody owns: they get one owner each;
3. a third crawler joins and ``map --apply`` moves feeds to it while all three run;
4. one leaves (SIGTERM) and ``map --apply`` moves its feeds to the others.

The oracle is offline, as in the fault tests: every stored entry, re-matched against every
subscription, is held by the reflector exactly once, and no entry is stored twice. And the farm's
request log shows who fetched what: between two changes every feed is fetched from its owner's
address only, and the owner is the one the table (the mapping) gives.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import subprocess
import sys
import uuid
from pathlib import Path

from feedmesh.compose import open_bus, open_feed_ownership, open_hub_state, open_ingest_store
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.hub.messages import FeedsAdded, encode
from tests.eventually import eventually

from .conftest import ORIGIN
from .test_distributed_faults import KEEP, QUERIES, Role, crawled, held, oracle
from .test_external_reflectors import free_port

CRAWLERS = {"alpha": "127.0.3.1", "beta": "127.0.3.2", "gamma": "127.0.3.3"}
"""Each crawler's source address: the farm sees its fetches come from there."""
HOSTS = 6
LATE_FEEDS = 5
"""Feeds a web process adds while the crawlers run (FeedsAdded), the last of the farm's."""


def one_reflector_subscriptions(state_at: str) -> dict[int, tuple[str, int]]:
    state = open_hub_state(state_at)
    try:
        account, _ = state.create_account("ann", 1.0)
        return {state.add_subscription(account.id, name="", query=query, keep=KEEP,
                                       reflector=0, now=1.0).id: (query, 0)
                for query in QUERIES}
    finally:
        state.close()


def latency_matrix(path: Path, port: int) -> None:
    """Crawler k is near farm hosts 2k+1 and 2k+2 (20 ms), far from the others (150 ms)."""
    rtt = {name: {f"127.0.1.{h}:{port}": 20.0 if (h - 1) // 2 == k else 150.0
                  for h in range(1, HOSTS + 1)}
           for k, name in enumerate(CRAWLERS)}
    path.write_text(json.dumps({"rtt_ms": rtt}))


async def map_apply(store_url: str, matrix: Path, names: list[str], *more: str) -> dict:
    argv = [sys.executable, "-m", "feedmesh", "map", "--apply", "--store", store_url,
            "--matrix", str(matrix), "--json", "--wait", "60", *more]
    for name in names:
        argv += ["--crawler", f"{name}={CRAWLERS[name]}"]
    done = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True,
                                   timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def owners(store_url: str) -> dict[int, str]:
    """Feed id -> owner, every move handed over."""
    table = open_feed_ownership(store_url)
    try:
        rows = table.owners()
        assert not any(row.next_owner for row in rows.values())
        return {feed_id: row.owner for feed_id, row in rows.items()}
    finally:
        table.close()


class Window:
    """The farm's requests from ``start`` (a request sequence number) until the next change of
    ownership, checked against the table as it was then (every move handed over)."""

    def __init__(self, name: str, start: int, store_url: str) -> None:
        self.name = name
        self.start = start
        self.owners = owners(store_url)

    def check(self, farm: FarmServer, end: int, farm_ids: dict[int, int]
              ) -> tuple[dict[str, set[int]], list[tuple[int, str, str | None]]]:
        """What each crawler fetched, and the fetches that did not come from the feed's
        owner's address (feed, crawler, owner)."""
        address_of = {address: name for name, address in CRAWLERS.items()}
        fetched: dict[str, set[int]] = {}
        wrong = []
        for request in farm.log.since(self.start):
            if request.feed is None or request.seq >= end:
                continue
            feed_id = farm_ids[request.feed]
            crawler = address_of.get(request.client, request.client)
            fetched.setdefault(crawler, set()).add(feed_id)
            if crawler != self.owners.get(feed_id):
                wrong.append((feed_id, crawler, self.owners.get(feed_id)))
        return fetched, wrong


async def test_ownership_moves_while_crawlers_run_and_nothing_is_lost_or_doubled(
        tmp_path, nats_url, postgres_url):
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    subs = one_reflector_subscriptions(postgres_url)
    namespace = f"t{uuid.uuid4().hex[:10]}"
    common = ["--bus", nats_url, "--bus-namespace", namespace, "--log-level", "warning"]
    stored = ["--store", postgres_url]
    # No publisher asks to be polled less often (ttl, max-age, skipHours): every feed is
    # fetched every half second, so every post is due to be stored soon after it is made.
    config = FarmConfig(feeds=30, hosts=HOSTS, seed=5, faults="none", speed=3600.0,
                        origin=ORIGIN, ttl_share=0.0, max_age_share=0.0, skip_hours_share=0.0)
    async with FarmServer(config) as farm:
        urls = [farm.feed_url(n) for n in range(config.feeds)]
        store = open_ingest_store(postgres_url)
        try:
            rows = store.add_feeds(urls[:-LATE_FEEDS], now=ORIGIN)
        finally:
            store.close()
        port = int(urls[0].rsplit(":", 1)[1].split("/")[0])
        matrix = tmp_path / "rtt.json"
        latency_matrix(matrix, port)

        # 1. The first mapping, written before the crawlers start (nobody to tell).
        first = await map_apply(postgres_url, matrix, ["alpha", "beta"])
        assert first["transferred"] == len(rows) and first["algorithm"] == "ours"

        reflector_url = f"127.0.2.11:{free_port('127.0.2.11')}"
        roles: dict[str, Role] = {
            "reflector0": Role("reflector0", ["reflector", *common, *stored, "--state",
                                              postgres_url, "--shard", "0/1", "--data",
                                              str(data), "--listen", reflector_url,
                                              "--checkpoint-interval", "0.5"],
                               "feedmesh reflector 0/1", tmp_path),
            "filter0": Role("filter0", ["filter", *common, "--state", postgres_url, "--shard",
                                        "0/1", "--data", str(tmp_path / "f0")],
                            "feedmesh filter shard 0/1", tmp_path),
        }

        def crawler(name: str, number: int) -> Role:
            folder = data / name
            return Role(f"crawler-{name}", [
                "crawler", *common, *stored, "--data", str(folder), "--port", "0",
                "--host", f"127.0.2.{2 + number}", "--filters", "1", "--external-filters",
                "--reflectors", "1", "--external-reflectors", f"http://{reflector_url}",
                "--policy", "interval", "--interval", "0.5", "--allow-network", "127.0.0.0/8",
                "--name", name, "--source-address", CRAWLERS[name]],
                "feedmesh crawler:", tmp_path)

        for name, number in (("alpha", 0), ("beta", 1)):
            roles[f"crawler-{name}"] = crawler(name, number)
        windows: list[Window] = []
        codes: dict[str, int] = {}
        try:
            for role in roles.values():
                role.start()
            for role in roles.values():
                await role.wait_ready()
            windows.append(Window("two crawlers", farm.log.next_seq, postgres_url))
            followed_at = dict.fromkeys(range(config.feeds - LATE_FEEDS), farm.clock.now())
            await crawled(postgres_url)
            late_start = farm.log.next_seq

            # 2. A web process adds feeds (stored, then FeedsAdded on `feeds`, as
            # hub/front/holders.py's RemoteSources.add does): each gets one owner, which crawls it.
            store = open_ingest_store(postgres_url)
            try:
                late = [row.id for row in store.add_feeds(urls[-LATE_FEEDS:], now=ORIGIN)]
            finally:
                store.close()
            followed_at.update(dict.fromkeys(range(config.feeds - LATE_FEEDS, config.feeds),
                                             farm.clock.now()))
            bus = open_bus(nats_url, namespace=namespace)
            try:
                await bus.publish("feeds", encode(FeedsAdded(urls=tuple(urls[-LATE_FEEDS:]))))
            finally:
                await bus.close()

            def late_feeds_fetched() -> bool:
                table = open_feed_ownership(postgres_url)
                try:
                    rows = table.owners()
                finally:
                    table.close()
                fetched = {(farm_id, request.client) for farm_id in range(25, 30)
                           for request in farm.log.since(late_start, feed=farm_id)}
                return all(f in rows for f in late) and all(
                    (25 + i, CRAWLERS[rows[f].owner]) in fetched for i, f in enumerate(late))

            await eventually(late_feeds_fetched, timeout=60, interval=0.2)
            # From the moment they were added: the first claim is the only owner.
            windows.append(Window("late feeds owned", late_start, postgres_url))
            await crawled(postgres_url)

            # 3. A third crawler joins; the mapping moves feeds to it while all run.
            roles["crawler-gamma"] = crawler("gamma", 2)
            roles["crawler-gamma"].start()
            await roles["crawler-gamma"].wait_ready()
            ends = [late_start, farm.log.next_seq]
            joined = await map_apply(postgres_url, matrix, ["alpha", "beta", "gamma"], "--bus",
                                     nats_url, "--bus-namespace", namespace)
            assert joined["algorithm"] == "reassigned" and joined["staged"] > 0
            assert joined["not_handed_over"] == 0
            windows.append(Window("gamma joined", farm.log.next_seq, postgres_url))
            assert set(windows[-1].owners.values()) == set(CRAWLERS)
            await crawled(postgres_url)

            # 4. One leaves (it drains as it stops); its feeds go to the others at once.
            ends.append(farm.log.next_seq)
            codes["crawler-beta"] = await roles["crawler-beta"].stop()
            left = await map_apply(postgres_url, matrix, ["alpha", "gamma"], "--bus", nats_url,
                                   "--bus-namespace", namespace)
            assert left["transferred"] > 0 and left["staged"] == 0
            # its durable group on `feeds` is gone too (it would keep every later message)
            assert left["departed"] == left["groups_dropped"] == ["beta"]
            windows.append(Window("beta left", farm.log.next_seq, postgres_url))
            assert set(windows[-1].owners.values()) == {"alpha", "gamma"}
            await crawled(postgres_url)

            def every_feed_crawled_since_the_last_change() -> bool:
                return {request.feed for request in farm.log.since(windows[-1].start)
                        if request.status in (200, 304)} >= set(range(config.feeds))

            # A feed nobody picked up would lose all that is posted from then on, which the
            # posting-log check below cannot see (it counts what some fetch could have seen).
            await eventually(every_feed_crawled_since_the_last_change, timeout=60,
                             interval=0.2)
            ends.append(farm.log.next_seq)
        finally:
            for kind in ("crawler", "filter", "reflector"):
                for name in sorted(roles):
                    if name.startswith(kind) and roles[name].process is not None \
                            and name not in codes:
                        codes[name] = await roles[name].stop()

        farm_ids = {urls.index(row.source_url): row.id
                    for row in _stored_feeds(postgres_url)}
        # Between a change and the next (the handovers themselves left out), only the owner
        # fetches each feed.
        checked = [window.check(farm, end, farm_ids)
                   for window, end in zip(windows, ends, strict=True)]
        # Every post the farm made while its feed was followed, up to the feed's last fetch
        # (by whichever crawler), was stored.
        never_stored, posted = _never_stored(farm, farm_ids, followed_at,
                                             _stored_entries(postgres_url))

    logs = {name: role.text() for name, role in roles.items()}
    assert codes == dict.fromkeys(codes, 0), logs
    assert not any("Traceback" in text for text in logs.values()), logs

    # The oracle, offline: every post stored, every stored entry held once by its subscriptions.
    assert posted > 100 and not never_stored, (posted, never_stored[:10])
    truth = oracle(postgres_url, subs)
    assert truth.twice == 0
    lost = duplicated = 0
    for sub_id, pairs in held(postgres_url, 0, subs).items():
        ids = [entry_id for entry_id, _ in pairs]
        duplicated += len(ids) - len(set(ids))
        lost += len(truth.want[sub_id] - set(ids))
    expected = sum(len(want) for want in truth.want.values())
    assert expected > 100  # the run matched something worth checking
    assert (lost, duplicated) == (0, 0), (lost, duplicated, expected)

    # Who fetched: only owners, and every crawler in the windows it owned feeds in.
    for window, (_, wrong) in zip(windows, checked, strict=True):
        assert not wrong, (window.name, wrong[:10])
    fetched = [crawlers for crawlers, _ in checked]
    assert set(fetched[0]) == {"alpha", "beta"}
    assert set(fetched[2]) == set(CRAWLERS)
    assert set(fetched[3]) == {"alpha", "gamma"}
    moved_to_gamma = {f for f, owner in windows[2].owners.items() if owner == "gamma"}
    assert moved_to_gamma and fetched[2]["gamma"] <= moved_to_gamma


def _never_stored(farm: FarmServer, farm_ids: dict[int, int], followed_at: dict[int, float],
                  entries) -> tuple[list[tuple[int, str]], int]:
    """The farm's posts, since their feed was followed, that some fetch (by any crawler) could
    see and that are not stored; and how many posts could be seen. A fetch at ``t`` sees a
    post made by ``t`` while fewer than the feed's ``entries_cap`` posts came after it (the
    document lists the newest few). A stored entry names its post at the end of its id or its
    link (the farm's guids and permalinks do)."""
    names = {(item.feed_id, name.rsplit("/", 1)[-1]) for item in entries
             for name in (item.entry.key, item.entry.link)}
    fetches: dict[int, list[float]] = {}
    for request in farm.log.since(0):
        if request.feed is not None and request.status in (200, 304):
            fetches.setdefault(request.feed, []).append(request.farm_time)
    missing = []
    seen = 0
    for farm_id, since in followed_at.items():
        times = sorted(fetches.get(farm_id, ()))
        if not times:
            continue
        posts = farm.truth(farm_id, since=since, until=times[-1])
        cap = farm.model.spec(farm_id).entries_cap
        for n, post in enumerate(posts):
            at = bisect.bisect_left(times, post.time)  # the first fetch after the post
            after = sum(1 for later in posts[n + 1:] if later.time <= times[at])
            if after >= cap:
                continue  # pushed out of the document before any fetch
            seen += 1
            if (farm_ids[farm_id], post.key) not in names:
                missing.append((farm_id, post.key))
    return missing, seen


def _stored_entries(store_url: str):
    store = open_ingest_store(store_url)
    try:
        return store.entries_after(0, 10**9)
    finally:
        store.close()


def _stored_feeds(store_url: str):
    store = open_ingest_store(store_url)
    try:
        return store.feeds()
    finally:
        store.close()
