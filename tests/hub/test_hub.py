"""The hub end to end: a real farm crawled by every tier, checked against the reference matcher."""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest

from feedmesh.bus.memory import MemoryBus
from feedmesh.clock import ManualClock
from feedmesh.compose.embedded import embedded_hub
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.fetch import FetchSettings
from feedmesh.hub.idcodec import encode_ids
from feedmesh.hub.messages import Article, Matched, MatchedBatch, encode
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.tiers.held import restore_held
from feedmesh.hub.tiers.reflector import Reflector, ReflectorSettings
from feedmesh.match import article_from_entry, parse_query
from feedmesh.model import Entry
from feedmesh.schedule import SchedulerSettings
from feedmesh.store import ReflectedItem, StoreError
from feedmesh.store.sqlite import SQLiteStore
from feedmesh.store.sqlite_hub import SQLiteHubState
from feedmesh.store.sqlite_reflector import SQLiteReflectorLog
from tests.eventually import eventually

from .conftest import BUSES, ORIGIN, hub_settings

QUERY = "people OR time OR world"


def expected_newest(data_dir, query: str, keep: int) -> list[int]:
    """What a subscription must hold: the newest ``keep`` stored entries the query matches."""
    store = SQLiteStore(f"{data_dir}/feedmesh.db", max_entries_per_feed=10**9)
    try:
        urls = {row.id: row.state.url for row in store.feeds()}
        parsed = parse_query(query)
        ids = [item.id for item in store.entries_after(0, 10**9)
               if parsed.matches(article_from_entry(item.entry, urls[item.feed_id]))]
    finally:
        store.close()
    return sorted(ids)[-keep:][::-1]


def held_newest(data_dir, sub_id: int, keep: int, reflector: int = 0) -> list[int]:
    """What the reflector's files hold for ``sub_id`` (checkpoint + match log), as a restarted
    hub would load it."""
    state = SQLiteHubState(f"{data_dir}/hub.db")
    columns = state.subscription_columns()
    state.close()
    keeps = np.zeros(int(columns["id"].max(initial=sub_id)) + 1, dtype=np.int16)
    keeps[columns["id"]] = columns["keep"]
    log = SQLiteReflectorLog(f"{data_dir}/reflector-{reflector}.db")
    try:
        topk = restore_held(log, keeps).topk
        newest = topk.newest_ids(sub_id, keep)
        assert len(log.items(newest)) == len(newest), "a held entry has no stored item"
        return newest
    finally:
        log.close()


@BUSES
async def test_feeds_fill_with_exactly_the_matching_entries(hub_env, tmp_path):
    ann = await hub_env.anonymous.sign_up("ann")
    status, body = await ann.call("POST", "/api/subscriptions", {"query": QUERY, "keep": 25})
    assert status == 201, body
    sub = body["subscription"]
    assert await hub_env.add_farm_sources(ann) == 40

    async def filled() -> bool:
        _, entries = await ann.call("GET", f"/api/subscriptions/{sub['id']}/entries")
        return len(entries["entries"]) >= 5

    await eventually(filled)
    hub = hub_env.hub
    # Each held entry really matches, by the reference evaluator on the stored entry.
    _, entries = await ann.call("GET", f"/api/subscriptions/{sub['id']}/entries")
    stored = {e.id: e for e in hub.store.entries_after(0, 10**9)}
    query = parse_query(QUERY)
    urls = {fid: state.url for fid, state in hub.crawler.crawler.states.items()}
    for held in entries["entries"]:
        item = stored[held["id"]]
        assert query.matches(article_from_entry(item.entry, urls[item.feed_id]))
        assert held["title"] == item.entry.title and held["link"] == item.entry.link
    await hub.stop()
    hub_env.hub.stop = _noop  # the fixture's exit must not stop it twice
    # ... and nothing that matched is missing: held == the newest 25 matches of all stored.
    assert held_newest(tmp_path, sub["id"], 25) == expected_newest(tmp_path, QUERY, 25)


async def _noop() -> None:
    return None


async def test_keep_k_and_one_copy_per_entry(hub_env):
    ann = await hub_env.anonymous.sign_up()
    subs = []
    for keep in (3, 3, 10):
        _, body = await ann.call("POST", "/api/subscriptions", {"query": QUERY, "keep": keep})
        subs.append(body["subscription"])
    await hub_env.add_farm_sources(ann)
    reflector = hub_env.hub.reflectors[0]

    async def enough() -> bool:
        _, body = await ann.call("GET", f"/api/subscriptions/{subs[2]['id']}/entries")
        return len(body["entries"]) == 10

    await eventually(enough)
    hub = hub_env.hub  # quiet: no new matches while the feeds and counts below are read
    await hub.stop_crawling()
    assert await hub.drain()
    small = [await ann.call("GET", f"/api/subscriptions/{s['id']}/entries") for s in subs[:2]]
    assert [len(body["entries"]) for _, body in small] == [3, 3]
    assert small[0][1] == small[1][1]
    await reflector.checkpoint()  # empties the match log, so only held entries stay stored
    live = reflector.topk.live_entries()
    assert await reflector.collect_garbage() > 0
    items, log_rows = reflector.log.counts()
    held = sum(reflector.held(s["id"]) for s in subs)
    # Three subscriptions hold the same entries; each entry is stored once.
    assert log_rows == 0 and items == len(live) and held == 16 and len(live) < held


@BUSES
async def test_restart_keeps_every_feed_without_duplicates(tmp_path, hub_bus):
    # On NATS, the streams and their groups outlive the hub: what one run left unacknowledged
    # the next receives, beside what it replays from the store; nothing may be doubled.
    config = FarmConfig(feeds=30, seed=5, faults="none", speed=3600.0, origin=ORIGIN)
    bus, namespace = hub_bus
    async with FarmServer(config) as farm:
        hub = embedded_hub(hub_settings(str(tmp_path)), bus=bus, bus_namespace=namespace)
        await hub.start()
        account, _ = await hub.front.create_account("ann")
        # A keep larger than all matches, so that "nothing lost" is checked exactly.
        sub = await hub.front.add_subscription(account.id, name="", query=QUERY, keep=5000)
        await hub.add_feeds([farm.feed_url(i) for i in range(30)])
        reflector = hub.reflectors[0]
        await eventually(lambda: reflector.held(sub.id) >= 5)
        before = [i.entry_id for i in await reflector.items(sub.id)]
        await hub.stop()

        hub = embedded_hub(hub_settings(str(tmp_path)), bus=bus, bus_namespace=namespace)
        await hub.start()
        after = [i.entry_id for i in await hub.reflectors[0].items(sub.id)]
        assert set(before) <= set(after)
        cycles = hub.crawler.cycles
        await eventually(lambda: hub.crawler.cycles >= cycles + 2)  # the farm posted meanwhile
        await hub.stop()
    final = held_newest(tmp_path, sub.id, 5000)
    assert len(final) == len(set(final)) and set(after) <= set(final)
    assert final == expected_newest(tmp_path, QUERY, 5000)


async def test_backpressure_stalls_the_crawler_instead_of_growing_queues(tmp_path):
    config = FarmConfig(feeds=60, seed=3, faults="none", speed=3600.0, origin=ORIGIN)
    async with FarmServer(config) as farm:
        hub = embedded_hub(hub_settings(str(tmp_path), bus_buffer_bytes=64 * 1024))
        reflector = hub.reflectors[0]
        gate = asyncio.Event()
        original = reflector._store_batch

        async def stalled(deliveries):
            await gate.wait()
            await original(deliveries)

        reflector._store_batch = stalled
        committed: list[int] = []  # entries stored by each of the crawler's transactions
        apply = hub.store.apply

        def recorded(updates, fenced=None):
            ingested = apply(updates, fenced)
            committed.append(len(ingested))
            return ingested

        hub.store.apply = recorded
        await hub.start()
        account, _ = await hub.front.create_account("ann")
        sub = await hub.front.add_subscription(account.id, name="", query=QUERY, keep=10)
        await hub.add_feeds([farm.feed_url(i) for i in range(60)])
        # The stalled reflector fills its 64 KB: the filter waits to send it more, and the
        # crawler, whose articles the filter no longer takes, waits to publish the next one.
        await eventually(lambda: hub.bus.waiting_publishers("matches.0") == 1
                         and hub.bus.waiting_publishers("articles") == 1, timeout=60.0)
        depths = hub.bus.depths()
        assert all(held <= 64 * 1024 + 20_000 for _, held in depths.values()), depths
        assert depths["articles/filter-0"][1] > 0  # the filter is blocked, articles wait
        # The crawler cannot commit far ahead of what it publishes: the batch being handed
        # on waits to publish, and the committer holds the one batch it committed meanwhile
        # until then, so what is stored and not yet published is at most those two.
        unpublished = hub.store.entry_count() - await hub.bus.last_seq("articles")
        assert unpublished <= sum(committed[-2:])
        gate.set()
        assert await hub.drain(30)
        assert reflector.held(sub.id) > 0
        await hub.stop()


async def _lone_reflector(tmp_path, probe, **settings) -> tuple[Reflector, MemoryBus]:
    bus = MemoryBus()
    metrics = HubMetrics()
    reflector = Reflector(0, SQLiteReflectorLog(tmp_path / "r.db"), bus, ManualClock(100.0),
                          metrics,
                          ReflectorSettings(**{"soft_memory_bytes": 1000,
                                               "hard_memory_bytes": 2000,
                                               "batch_interval_s": 0.001, **settings}),
                          memory_probe=probe)
    reflector.register(7, keep=10, generation=0)
    return reflector, bus


async def _send_match(bus: MemoryBus, n: int) -> int:
    article = Article(entry_id=n, feed_id=1, feed_url="http://x/f", feed_title="X",
                      entry=Entry(key=str(n), title=f"t{n}", link=f"http://x/{n}",
                                  summary="<p>body</p>"), first_seen_at=99.0)
    return await bus.publish("matches.0", encode(Matched(article=article,
                                                         sub_ids=encode_ids(np.array([7])))))


async def _stored(bus: MemoryBus, seq: int) -> None:
    """Until the reflector has stored (acknowledged) the match with bus number ``seq``."""
    assert await bus.wait_acked("matches.0", seq, timeout=10.0)


async def _running(reflector: Reflector) -> asyncio.Task:
    """The reflector's loop, once its consumer is registered (what it is sent is then its)."""
    task = asyncio.create_task(reflector.run())
    await eventually(lambda: "matches.0/reflector-0" in reflector.bus.depths())
    return task


async def test_memory_pressure_degrades_without_crashing(tmp_path, caplog):
    level = {"rss": 0}
    reflector, bus = await _lone_reflector(tmp_path, lambda: level["rss"])
    task = await _running(reflector)

    async def send(n: int) -> None:
        await _stored(bus, await _send_match(bus, n))

    caplog.set_level(logging.WARNING, logger="feedmesh.hub.reflector")
    await send(1)                # normal
    level["rss"] = 1500
    await send(2)                # soft: body dropped, title and link kept
    level["rss"] = 2500
    await send(3)                # hard: entry dropped
    items = {i.entry_id: i for i in await reflector.items(7)}
    assert set(items) == {1, 2}
    assert items[1].entry.summary == "<p>body</p>" and not items[1].degraded
    assert items[2].degraded and items[2].entry.summary == "" and items[2].entry.link
    samples = {s.labels.get("action"): s.value for m in reflector.metrics.registry.collect()
               if m.name == "feedmesh_reflector_degraded" for s in m.samples
               if s.name.endswith("_total")}
    assert samples == {"body_dropped": 1.0, "dropped": 1.0}
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "reflector_dropping_bodies" in messages and "reflector_dropping_entries" in messages
    task.cancel()
    reflector.close()


async def test_checkpoints_run_beside_the_stream_and_survive_a_failure(tmp_path, caplog):
    import threading

    reflector, bus = await _lone_reflector(tmp_path, lambda: 0, checkpoint_interval_s=0.0)
    write, calls, gate = reflector.log.write_checkpoint, [], threading.Event()

    def write_checkpoint(arrays, upto):  # the first is held up, the second finds the disk full
        calls.append(upto)
        if len(calls) == 1:
            assert gate.wait(10)
        elif len(calls) == 2:
            raise StoreError("writing the checkpoint r.db.topk.npz failed: [Errno 28] No space "
                             "left on device")
        write(arrays, upto)

    reflector.log.write_checkpoint = write_checkpoint
    caplog.set_level(logging.ERROR, logger="feedmesh.hub.reflector")
    task = await _running(reflector)
    await _send_match(bus, 1)
    await eventually(lambda: calls)  # the first checkpoint has begun, and hangs
    for n in range(2, 6):
        await _send_match(bus, n)
    await eventually(lambda: reflector.held(7) == 5)  # ...while the stream goes on
    assert reflector.log.counts()[1] == 5 and len(calls) == 1
    gate.set()
    # the rows it covers are gone, and it is over
    await eventually(lambda: reflector.log.counts()[1] == 4
                     and not reflector._maintenance.locked())
    await _send_match(bus, 6)
    await eventually(lambda: "reflector_maintenance_failed" in caplog.text)
    assert "No space left on device" in caplog.text
    await _send_match(bus, 7)
    await eventually(lambda: len(calls) >= 3 and reflector.log.counts()[1] == 0)
    assert [i.entry_id for i in await reflector.items(7)] == [7, 6, 5, 4, 3, 2, 1]
    task.cancel()
    reflector.close()

    again, _ = await _lone_reflector(tmp_path, lambda: 0)  # from the checkpoint alone
    again.restore()
    assert [i.entry_id for i in await again.items(7)] == [7, 6, 5, 4, 3, 2, 1]
    again.close()


def _held_item(n: int) -> ReflectedItem:
    return ReflectedItem(entry_id=n, feed_id=1, feed_url="http://x/f", feed_title="X",
                         first_seen_at=99.0, stored_at=100.0,
                         entry=Entry(key=str(n), title=f"t{n}", link=f"http://x/{n}"))


@pytest.mark.parametrize("outage", [True, False], ids=["store-out", "store-fails"])
async def test_a_store_outage_is_waited_out_and_a_failing_store_parks(tmp_path, caplog,
                                                                      monkeypatch, outage):
    """A store that cannot be reached is not the message's fault: the reflector retries its
    matches for as long as the outage lasts (here 12 attempts, past the 5 a poison message
    gets) and stores them when it ends, parking nothing. The same failure as a plain
    StoreError (a constraint, a bug in the store) parks the match after 5 attempts."""
    from feedmesh.hub import deliveries
    from feedmesh.store import StoreUnavailableError

    monkeypatch.setattr(deliveries, "RETRY_BASE_S", 0.001)
    monkeypatch.setattr(deliveries, "OUTAGE_RETRY_CAP_S", 0.01)
    reflector, bus = await _lone_reflector(tmp_path, lambda: 0)
    store, attempts = reflector.log.store, []

    def store_while_down(rows, watermarks):
        attempts.append(len(rows))
        if len(attempts) <= 12:
            kind = StoreUnavailableError if outage else StoreError
            raise kind("storing 1 matches failed in postgresql://feedmesh@127.0.0.1:5432/hub: "
                       "connection failed: Connection refused")
        return store(rows, watermarks)

    reflector.log.store = store_while_down
    caplog.set_level(logging.WARNING, logger="feedmesh.hub")
    task = await _running(reflector)
    seq = await _send_match(bus, 1)
    if outage:
        await _stored(bus, seq)
        assert len(attempts) == 13 and reflector.held(7) == 1
        assert not await bus.parked() and "message_parked" not in caplog.text
        assert "message_waiting group=reflector-0" in caplog.text
        assert reflector.metrics.parked.labels("reflector-0")._value.get() == 0
    else:
        await eventually(lambda: "message_parked" in caplog.text)
        assert len(attempts) == deliveries.MAX_DELIVERIES and reflector.held(7) == 0
        [parked] = await bus.parked()
        assert parked.seq == seq and "failed 5 times: StoreError" in parked.reason
    task.cancel()
    reflector.close()


async def test_log_truncation_is_spread_out_between_the_streams_writes(tmp_path):
    """After a checkpoint, the covered log rows are deleted in small transactions spaced out in
    time, so the stream's writes go on between them instead of waiting behind all of them."""
    from feedmesh.hub.tiers.reflector import TRUNCATE_CHUNK

    reflector, bus = await _lone_reflector(tmp_path, lambda: 0, checkpoint_interval_s=3600.0,
                                           gc_interval_s=3600.0)
    rows = 5 * TRUNCATE_CHUNK
    seven = encode_ids(np.array([7]))
    reflector.log.store([(_held_item(n), seven, 0) for n in range(1, rows + 1)], {0: rows})
    reflector.restore()
    assert reflector.log.counts()[1] == rows
    writes: list[str] = []
    truncate, store = reflector.log.truncate_log, reflector.log.store

    def logged_truncate(upto, limit=500):
        writes.append(f"truncate {limit}")
        return truncate(upto, limit)

    def logged_store(batch, marks):
        writes.append("store")
        return store(batch, marks)

    reflector.log.truncate_log, reflector.log.store = logged_truncate, logged_store
    task = await _running(reflector)
    checkpoint = asyncio.create_task(reflector.checkpoint())
    for n in range(rows + 1, rows + 40):  # one at a time, each stored before the next is sent
        await _stored(bus, await _send_match(bus, n))
    await checkpoint
    truncations = [w for w in writes if w.startswith("truncate")]
    assert set(truncations) == {f"truncate {TRUNCATE_CHUNK}"}
    assert len(truncations) >= rows // TRUNCATE_CHUNK + 1  # chunks, then one that finds none
    at = [i for i, w in enumerate(writes) if w.startswith("truncate")]
    assert writes[at[0]:at[-1]].count("store") >= 3  # the stream wrote in between
    assert reflector.log.counts()[1] <= 39  # what the checkpoint covered is gone
    assert [i.entry_id for i in await reflector.items(7)] == list(range(rows + 39, rows + 29, -1))
    task.cancel()
    await reflector.close_async()  # at shutdown: checkpointed, the whole log truncated at once
    reopened = SQLiteReflectorLog(tmp_path / "r.db")
    assert reopened.counts()[1] == 0
    reopened.close()


@pytest.fixture
def flood_config() -> FarmConfig:
    return FarmConfig(feeds=5, seed=2, faults="none", fault_overrides={0: "flood"}, speed=600.0,
                      origin=ORIGIN)


async def test_a_flooding_source_neither_floods_feeds_nor_blocks_readers(tmp_path, flood_config):
    import aiohttp

    async with FarmServer(flood_config) as farm, aiohttp.ClientSession() as session:
        hub = embedded_hub(hub_settings(str(tmp_path)))
        await hub.start()
        account, _ = await hub.front.create_account("ann")
        sub = await hub.front.add_subscription(account.id, name="", query=QUERY, keep=10)
        from aiohttp import web

        from feedmesh.hub.web import build_app
        runner = web.AppRunner(build_app(hub.front, base_url="http://127.0.0.1"))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}/f/{hub.front.feed_token(sub)}.rss"
        await hub.add_feeds([farm.feed_url(i) for i in range(5)])
        # The parser keeps the newest 1,000 entries of a document (ParseLimits.max_entries): a
        # 10,000-entry burst is cut there, reported, and ingested without harm.
        await eventually(lambda: hub.store.entry_count() >= 1000)
        async with session.get(url) as response:
            assert response.status == 200  # readers are served during the flood
        assert await hub.drain(60)
        assert len(await hub.reflectors[0].items(sub.id)) == 10
        await runner.cleanup()
        await hub.stop()


async def test_fetch_metrics_follow_a_cycle_spread_over_minutes(tmp_path):
    """A cycle paced over its interval is metered while it runs, not only when it ends: with a
    five-minute interval, `/metrics` would otherwise show no fetch for minutes at a time."""
    # no Cache-Control or ttl hints: every feed is due again in the next cycle
    config = FarmConfig(feeds=30, seed=5, faults="none", speed=60.0, origin=ORIGIN,
                        max_age_share=0.0, ttl_share=0.0)
    async with FarmServer(config) as farm:
        hub = embedded_hub(hub_settings(str(tmp_path), crawl_interval_s=6.0))
        await hub.start()
        tier = hub.crawler
        await hub.add_feeds([farm.feed_url(i) for i in range(30)])  # the first cycle, at once

        def fetched() -> float:
            return sum(s.value for m in hub.metrics.registry.collect()
                       if m.name == "feedmesh_fetches" for s in m.samples
                       if s.name == "feedmesh_fetches_total")

        await eventually(lambda: tier.last_cycle is not None and tier.last_cycle.fetched == 30)
        cycles = tier.cycles
        assert fetched() == 30
        # The next cycle paces 30 fetches over 4.8 s: readings while it runs count some.
        await eventually(lambda: fetched() > 30)
        assert tier.cycles == cycles, "the paced cycle ended before any of it was metered"
        assert fetched() < 60
        await eventually(lambda: tier.cycles > cycles)
        # each fetch counted once, none lost at the cycle's end
        assert fetched() == 30 + tier.last_cycle.fetched == 60
        await hub.stop()


async def test_a_subscription_made_after_the_entries_holds_them_across_a_restart(tmp_path):
    config = FarmConfig(feeds=20, seed=6, faults="none", speed=3600.0, origin=ORIGIN)
    async with FarmServer(config) as farm:
        hub = embedded_hub(hub_settings(str(tmp_path)))
        await hub.start()
        await hub.add_feeds([farm.feed_url(i) for i in range(20)])
        await eventually(lambda: hub.store.entry_count() >= 100)
        account, _ = await hub.front.create_account("ann")
        sub = await hub.front.add_subscription(account.id, name="", query=QUERY, keep=5)
        assert hub.reflectors[0].held(sub.id) == 5  # full when the call returns
        await hub.stop()
    # What its reflector's files hold (checkpoint + log): the newest five matches of all that
    # was stored, whether they came from the start or arrived after.
    assert held_newest(tmp_path, sub.id, 5) == expected_newest(tmp_path, QUERY, 5)


async def test_a_match_after_a_quiet_spell_is_stored_without_waiting_out_the_batch_window(
        tmp_path):
    """Group commit: a batch gathers until ``batch_interval_s`` after the one before began, so
    a match that finds the reflector idle goes at once (a window of an hour here: counted from
    the match, as it once was, this would wait that hour)."""
    clock = ManualClock(100.0)
    reflector = Reflector(0, SQLiteReflectorLog(tmp_path / "r.db"), MemoryBus(), clock,
                          HubMetrics(), ReflectorSettings(batch_interval_s=3600.0,
                                                          checkpoint_interval_s=3600.0,
                                                          gc_interval_s=3600.0))
    reflector.load({"id": np.array([7]), "keep": np.array([10]), "reflector": np.array([0]),
                    "generation": np.array([0]), "created_at": np.array([1.0]),
                    "changed_at": np.array([1.0])})

    def matched(entry_id: int) -> bytes:
        article = Article(entry_id=entry_id, feed_id=1, feed_url="http://x/f", feed_title="X",
                          entry=Entry(key=str(entry_id), title=f"t{entry_id}"),
                          first_seen_at=99.0)
        return encode(Matched(article=article, sub_ids=encode_ids(np.array([7])), shard=0))

    task = await _running(reflector)
    seq = await reflector.bus.publish("matches.0", matched(1))
    assert await reflector.bus.wait_acked("matches.0", seq, timeout=30.0)
    assert reflector.held(7) == 1
    task.cancel()
    reflector.close()


async def test_feeds_answer_the_same_validators_after_a_restart(tmp_path):
    """A feed's version and last change (what its ETag and Last-Modified carry) come back as
    they were: from the checkpoint, taken at its log position, and the log rows after it replayed
    by the live rule, including an entry matched again (a new subscription's starting entries
    are logged under its own shard, -id, and the filter's match of the same entry under the
    filter's: versions are not idempotent). A feed edited after the checkpoint gets a version
    none of its earlier contents had."""
    clock = ManualClock(100.0)

    def started(changed_at: list[float]) -> Reflector:
        reflector = Reflector(0, SQLiteReflectorLog(tmp_path / "r.db"), MemoryBus(), clock,
                              HubMetrics(), ReflectorSettings(batch_interval_s=0.001,
                                                              checkpoint_interval_s=3600.0,
                                                              gc_interval_s=3600.0))
        reflector.load({"id": np.array([7, 8]), "keep": np.array([10, 10]),
                        "reflector": np.array([0, 0]), "generation": np.array([0, 0]),
                        "created_at": np.array([1.0, 1.0]),
                        "changed_at": np.array(changed_at)})
        return reflector

    async def match(reflector: Reflector, entry_id: int, subs: list[int], shard: int = 0) -> None:
        article = Article(entry_id=entry_id, feed_id=1, feed_url="http://x/f", feed_title="X",
                          entry=Entry(key=str(entry_id), title=f"t{entry_id}"),
                          first_seen_at=99.0)
        clock.advance(1.0)
        seq = await reflector.bus.publish("matches.0", encode(Matched(
            article=article, sub_ids=encode_ids(np.array(subs)), shard=shard)))
        assert await reflector.bus.wait_acked("matches.0", seq, timeout=10.0)

    live = started([1.0, 1.0])
    task = await _running(live)
    for entry_id, subs, shard in ((1, [7, 8], -8), (1, [7, 8], 0), (2, [7, 8], 0), (3, [8], 0)):
        await match(live, entry_id, subs, shard)
    await live.checkpoint()
    for entry_id, subs, shard in ((4, [7], -7), (4, [7], 0), (5, [8], 0), (3, [7], 1)):
        await match(live, entry_id, subs, shard)
    before = {sub: live.version(sub) for sub in (7, 8)}
    assert before[7][0] == 6 and before[8][0] == 5  # 4 twice, then 3: 4, 5, 6
    task.cancel()
    live.close()  # as a crash: no checkpoint at the end, the last rows only in the log

    again = started([1.0, 1.0])
    assert {sub: again.version(sub) for sub in (7, 8)} == before
    again.close()
    edited = started([1.0, clock.now() + 5.0])  # 8 renamed after the checkpoint
    assert edited.version(7) == before[7]
    assert edited.version(8)[0] > max(v for v, _ in before.values())
    edited.close()


async def test_a_host_that_cannot_be_reached_shows_in_the_stats_and_metrics(tmp_path):
    """An operator sees which hosts are paused (`/api/stats`, `feedmesh stats`) and how many
    (`/metrics`), and the crawl goes on for the others."""
    config = FarmConfig(feeds=10, seed=5, faults="none", speed=60.0, origin=ORIGIN)
    async with FarmServer(config) as farm:
        port = int(farm.feed_url(0).split(":")[2].split("/")[0])
        hub = embedded_hub(hub_settings(str(tmp_path), crawl_interval_s=2.0))
        await hub.start()
        try:
            await hub.add_feeds([farm.feed_url(i) for i in range(10)]
                                + [f"http://127.0.3.11:{port}/feeds/{i}" for i in range(8)])

            def gauge() -> float:
                return next(s.value for m in hub.metrics.registry.collect()
                            if m.name == "feedmesh_crawl_hosts_paused" for s in m.samples)

            await eventually(lambda: hub.crawler.last_cycle is not None
                             and hub.crawler.last_cycle.fetched == 18)
            stats = await hub.front.stats()
            assert set(stats["hosts_paused"]) == {"127.0.3.11"}
            assert stats["hosts_paused"]["127.0.3.11"] > hub.clock.now()
            assert stats["last_crawl"]["ok"] == 10
            assert stats["last_crawl"]["errors"] == {"connection_error": 8}
            assert gauge() == 1.0
            # Feeds of that host added now are not tried: the host is paused.
            cycles = hub.crawler.cycles
            await hub.add_feeds([f"http://127.0.3.11:{port}/feeds/{i}" for i in range(8, 13)])
            await eventually(lambda: hub.crawler.cycles > cycles
                             and hub.crawler.last_cycle.feeds_due == 5)
            stats = await hub.front.stats()
            assert stats["last_crawl"]["host_paused"] == 5 and not stats["last_crawl"]["errors"]
        finally:
            await hub.stop()


async def test_the_crawl_figures_say_what_is_under_way(tmp_path):
    """A cycle that takes long is shown while it runs (what it fetched so far), not as nothing
    until it ends; a learned policy, which has no cycles, shows its last minute."""
    config = FarmConfig(feeds=10, seed=5, faults="none", origin=ORIGIN,
                        fault_overrides=dict.fromkeys(range(5, 10), "slow"), slow_delay_s=30.0)
    async with FarmServer(config) as farm:
        patient = FetchSettings(allow_networks=("127.0.0.0/8",), total_timeout_s=60.0)
        hub = embedded_hub(hub_settings(str(tmp_path), crawl_interval_s=600.0, fetch=patient))
        await hub.start()
        try:
            await hub.add_feeds([farm.feed_url(i) for i in range(10)])

            def running() -> dict | None:
                figures = hub.crawler.figures()
                assert figures["crawl_mode"] == "interval"
                now = figures["crawl_running"]
                return now if now and now["fetched"] >= 5 else None

            under_way = await eventually(running, timeout=20)
            assert under_way["feeds_due"] == 10 and under_way["fetched"] < 10
            stats = await hub.front.stats()  # what /api/stats and `feedmesh stats` show
            assert stats["crawl_mode"] == "interval"
            assert stats["crawl_running"]["feeds_due"] == 10
        finally:
            await hub.stop()
    scheduled = embedded_hub(hub_settings(str(tmp_path / "learned"),
                                          schedule=SchedulerSettings(policy="uniform")))
    assert scheduled.crawler.figures()["crawl_mode"] == "scheduled"
    scheduled.stores.close()


async def test_a_batch_formed_otherwise_after_a_filters_restart_is_stored_once(tmp_path):
    """A filter that died before acknowledging a batch matches its articles again; with more
    articles come meanwhile, the second batch differs from the first (another ``msg_id``: the
    bus keeps both), and the reflector keeps and reports each (entry, shard) once, while an
    edited entry (same id, other content) still goes through."""
    reflector, bus = await _lone_reflector(tmp_path, lambda: 0)
    told: list[tuple[int, int]] = []

    class Events:
        def matched(self, batch) -> None:
            told.extend((item.entry_id, int(s)) for item, ids, _ in batch for s in ids)

    reflector.events = Events()
    task = await _running(reflector)

    def article(n: int, title: str = "") -> Article:
        return Article(entry_id=n, feed_id=1, feed_url="http://x/f", feed_title="X",
                       entry=Entry(key=str(n), title=title or f"t{n}"), first_seen_at=99.0)

    def batch(*articles: Article) -> bytes:
        return encode(MatchedBatch(articles=articles,
                                   sub_ids=tuple(encode_ids(np.array([7])) for _ in articles)))

    await _stored(bus, await bus.publish("matches.0", batch(article(1), article(2)),
                                         msg_id="articles.1-2.0"))
    await _stored(bus, await bus.publish("matches.0", batch(article(1), article(2), article(3)),
                                         msg_id="articles.1-3.0"))
    assert told == [(1, 7), (2, 7), (3, 7)]
    await _stored(bus, await bus.publish("matches.0", batch(article(2, "edited"))))
    assert told[-1] == (2, 7) and len(told) == 4
    assert [i.entry.title for i in await reflector.items(7)] == ["t3", "edited", "t1"]
    task.cancel()
    reflector.close()
