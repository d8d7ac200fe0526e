"""The ingestion pipeline end to end against a real loopback server whose feeds change."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import msgspec
import pytest
from aiohttp import web

from feedmesh.clock import ManualClock
from feedmesh.crawl import Crawler, CrawlSettings
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.fetch.host_state import HostPolicy
from feedmesh.model import Entry
from feedmesh.store import FeedUpdate, IngestedEntry, StoreUnavailableError
from feedmesh.store.sqlite import SQLiteStore
from tests.eventually import eventually


class Handed:
    """The crawl's consumer in these tests: each committed batch to ``sink``, the other events
    ignored (:class:`feedmesh.crawl.pipeline.CrawlEvents`)."""

    def __init__(self, sink) -> None:  # type: ignore[no-untyped-def]
        self.sink = sink

    async def ingested(self, entries: list[IngestedEntry]) -> None:
        await self.sink(entries)

    def feed_info(self, feed_id: int, info: object) -> None:
        pass

    def document(self, feed_id: int, result: object, parsed: object) -> None:
        pass

    def deactivated(self, feed_id: int) -> None:
        pass


def rss(items: list[tuple[str, str]]) -> bytes:
    body = "".join(f"<item><guid>{g}</guid><title>{t}</title><link>http://example.com/{t}</link>"
                   f"<description>text of {t}</description></item>" for g, t in items)
    return (f'<?xml version="1.0"?><rss version="2.0"><channel><title>Feed</title>'
            f"<link>http://example.com/</link>{body}</channel></rss>").encode()


class Site:
    """Feeds whose documents the test edits; counts requests per path."""

    def __init__(self) -> None:
        self.docs: dict[str, bytes] = {}
        self.status: dict[str, int] = {}
        self.etag_support: dict[str, bool] = {}
        self.hits: dict[str, int] = {}
        self.version: dict[str, int] = {}
        self.redirects: dict[str, str] = {}

    def set(self, name: str, doc: bytes, *, etag: bool = True) -> None:
        self.docs[name] = doc
        self.version[name] = self.version.get(name, 0) + 1
        self.etag_support[name] = etag

    async def handle(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.hits[name] = self.hits.get(name, 0) + 1
        if name in self.redirects:
            return web.Response(status=302, headers={"Location": self.redirects[name]})
        if name in self.status:
            return web.Response(status=self.status[name], text="error page")
        if name not in self.docs:
            return web.Response(status=404)
        etag = f'"{name}-{self.version[name]}"'
        if self.etag_support[name]:
            if request.headers.get("If-None-Match") == etag:
                return web.Response(status=304, headers={"ETag": etag})
            return web.Response(body=self.docs[name], headers={"ETag": etag},
                                content_type="application/rss+xml")
        return web.Response(body=self.docs[name], content_type="application/rss+xml")


@pytest.fixture
async def site() -> AsyncIterator[tuple[str, Site]]:
    s = Site()
    app = web.Application()
    app.router.add_get("/{name}", s.handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", s
    await runner.cleanup()


@pytest.fixture
async def crawler(tmp_path):
    clock = ManualClock(1_800_000_000.0)
    store = SQLiteStore(tmp_path / "crawl.db")
    received: list[IngestedEntry] = []

    async def sink(items: list[IngestedEntry]) -> None:
        received.extend(items)

    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",), total_timeout_s=2),
                       clock=clock) as fetcher:
        c = Crawler(store, fetcher, clock, settings=CrawlSettings(batch_interval_s=0.01),
                    events=Handed(sink))
        c.received = received  # type: ignore[attr-defined]
        c.clock_ = clock  # type: ignore[attr-defined]
        yield c
        await c.aclose()
    store.close()


async def test_first_crawl_then_conditional_then_one_new_entry(site, crawler):
    base, s = site
    s.set("a", rss([("1", "one"), ("2", "two")]))
    await crawler.add_feeds([f"{base}/a"])
    stats = await crawler.crawl()
    assert (stats.fetched, stats.ok, stats.new_entries) == (1, 1, 2)
    assert [i.entry.title for i in crawler.received] == ["one", "two"]

    stats = await crawler.crawl()
    assert stats.not_modified == 1 and stats.new_entries == 0 and stats.parsed == 0

    s.set("a", rss([("3", "three"), ("1", "one"), ("2", "two")]))
    crawler.clock_.advance(60)
    stats = await crawler.crawl()
    assert stats.new_entries == 1 and crawler.received[-1].entry.title == "three"
    assert crawler.received[-1].first_seen_at == crawler.clock_.now()
    postings = crawler.store.postings(1)
    assert [p.backlog for p in postings] == [True, True, False]


async def test_server_ignoring_conditional_get_is_caught_by_document_hash(site, crawler):
    base, s = site
    s.set("a", rss([("1", "one")]), etag=False)
    await crawler.add_feeds([f"{base}/a"])
    await crawler.crawl()
    stats = await crawler.crawl()
    assert stats.ok == 1 and stats.unchanged_documents == 1 and stats.parsed == 0


async def test_changing_guids_do_not_flood(site, crawler):
    base, s = site
    await crawler.add_feeds([f"{base}/a"])
    for round_ in range(4):
        s.set("a", rss([(f"guid-{round_}-1", "one"), (f"guid-{round_}-2", "two")]))
        await crawler.crawl()
    assert len(crawler.received) == 2


async def test_one_bad_feed_does_not_disturb_the_others(site, crawler):
    base, s = site
    s.set("good", rss([("1", "one")]))
    s.set("html", b"<!DOCTYPE html><html><body><p>Not a feed</p></body></html>")
    s.status["broken"] = 500
    s.status["gone"] = 410
    await crawler.add_feeds([f"{base}/{n}" for n in ("good", "html", "broken", "gone", "missing")])
    stats = await crawler.crawl()
    assert stats.new_entries == 1
    assert stats.errors == {"parse:not_a_feed": 1, "server_error": 1, "gone": 1, "not_found": 1}
    states = {crawler.states[i].url.rsplit("/", 1)[1]: crawler.states[i] for i in crawler.states}
    assert not states["gone"].active
    assert states["broken"].errors == 1 and states["broken"].not_before > crawler.clock_.now()
    assert "Not a feed" not in states["html"].last_error and states["html"].last_error

    # Immediately again: backing-off and deactivated feeds are not fetched.
    before = dict(s.hits)
    stats = await crawler.crawl()
    assert stats.skipped == 4 and s.hits["good"] == before["good"] + 1
    assert s.hits["broken"] == before["broken"] and s.hits["gone"] == before["gone"]


async def test_a_url_is_fetched_once_per_cycle(site, crawler):
    base, s = site
    s.set("a", rss([("1", "one")]))
    ids = await crawler.add_feeds([f"{base}/a", f"{base}/a?copy"])
    # As after a confirmed redirect: two feed rows now point at the same URL.
    crawler.states[ids[1]] = crawler.states[ids[0]]
    stats = await crawler.crawl()
    assert s.hits["a"] == 1 and stats.skipped == 1


async def test_a_host_that_cannot_be_reached_is_paused_probed_and_fetched_again(site, tmp_path,
                                                                                   caplog):
    caplog.set_level(logging.INFO, logger="feedmesh.crawl")
    base, s = site
    port = int(base.rsplit(":", 1)[1])
    dead = f"http://127.0.3.7:{port}"  # nothing listens there until the host "comes back"
    for n in range(30):
        s.set(f"d{n}", rss([(f"d{n}", f"dead {n}")]))
    for n in range(10):
        s.set(f"l{n}", rss([(f"l{n}", f"live {n}")]))
    clock = ManualClock(1_800_000_000.0)
    store = SQLiteStore(tmp_path / "crawl.db")
    settings = CrawlSettings(concurrency=2, hosts=HostPolicy(failures_to_pause=5, pause_s=60.0))
    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",), total_timeout_s=2),
                       clock=clock) as fetcher:
        crawler = Crawler(store, fetcher, clock, settings=settings)
        urls = [u for n in range(10) for u in (f"{dead}/d{3 * n}", f"{dead}/d{3 * n + 1}",
                                                f"{dead}/d{3 * n + 2}", f"{base}/l{n}")]
        await crawler.add_feeds(urls)
        dead_ids = [fid for fid, st in crawler.states.items() if st.url.startswith(dead)]

        stats = await crawler.crawl()
        refused = stats.errors.get("connection_error", 0)
        # Five in a row pause the host; the one other fetch in flight then may fail as well.
        assert 5 <= refused <= 6 and refused + stats.host_paused == 30
        assert stats.ok == 10 and all(s.hits[f"l{n}"] == 1 for n in range(10))
        assert "host_paused host=127.0.3.7" in caplog.text
        untouched = [fid for fid in dead_ids if crawler.states[fid].last_fetched_at == 0.0]
        assert len(untouched) == 30 - refused  # a feed skipped keeps its state: no error counted
        assert all(crawler.states[fid].errors == 0 for fid in untouched)

        clock.advance(61.0)  # the pause is over: one probe, which fails and pauses it again
        stats = await crawler.crawl()
        assert stats.errors.get("connection_error", 0) == 1
        assert stats.host_paused == len(untouched) - 1
        assert crawler.hosts.paused_until("127.0.3.7", clock.now()) == clock.now() + 120.0

        app = web.Application()  # the host comes back
        app.router.add_get("/{name}", s.handle)
        runner = web.AppRunner(app, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, "127.0.3.7", port).start()
        try:
            clock.advance(121.0)
            stats = await crawler.crawl()  # the probe finds it answering
            assert stats.ok >= 1 and not stats.errors
            assert "host_answering host=127.0.3.7" in caplog.text
            clock.advance(1.0)
            stats = await crawler.crawl()  # and the feeds skipped meanwhile are fetched
            assert stats.host_paused == 0 and not stats.errors
            assert sum(1 for n in range(30) if s.hits.get(f"d{n}")) == len(untouched) - 1
        finally:
            await runner.cleanup()
        await crawler.aclose()
    store.close()


async def test_the_feeds_of_a_paused_host_take_no_slot_of_a_paced_cycle(site, tmp_path,
                                                                        monkeypatch):
    # A cycle spread over an interval waits for each fetch's slot; a feed skipped because its
    # host is paused must not wait for one (100k skipped feeds were 100k timers a cycle).
    base, s = site
    port = int(base.rsplit(":", 1)[1])
    for n in range(10):
        s.set(f"l{n}", rss([(f"l{n}", f"live {n}")]))
    clock = ManualClock(1_800_000_000.0)
    waits: list[float] = []

    async def wait_for_slot(clock_, seconds, stop) -> None:
        waits.append(seconds)
        clock.advance(seconds)

    monkeypatch.setattr("feedmesh.crawl.pipeline._pause", wait_for_slot)
    store = SQLiteStore(tmp_path / "crawl.db")
    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",), total_timeout_s=2),
                       clock=clock) as fetcher:
        crawler = Crawler(store, fetcher, clock, settings=CrawlSettings(concurrency=1))
        await crawler.add_feeds([f"http://127.0.3.10:{port}/d{n}" for n in range(5)])
        await crawler.crawl()  # five refused: the host is paused for a minute
        await crawler.add_feeds([f"http://127.0.3.10:{port}/d{n}" for n in range(5, 35)]
                                + [f"{base}/l{n}" for n in range(10)])
        stats = await crawler.crawl(spread_s=10.0)
        await crawler.aclose()
    store.close()
    assert stats.ok == 10 and stats.host_paused == 30 and not stats.errors
    assert len(waits) <= 10 and sum(waits) <= 10.0


async def test_a_redirect_to_a_host_that_cannot_be_reached_pauses_that_host_not_the_first(
        site, tmp_path):
    base, s = site
    port = int(base.rsplit(":", 1)[1])
    for n in range(8):
        s.redirects[f"r{n}"] = f"http://127.0.3.8:{port}/moved{n}"
    clock = ManualClock(1_800_000_000.0)
    store = SQLiteStore(tmp_path / "crawl.db")
    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",), total_timeout_s=2),
                       clock=clock) as fetcher:
        crawler = Crawler(store, fetcher, clock, settings=CrawlSettings(concurrency=1))
        await crawler.add_feeds([f"{base}/r{n}" for n in range(8)])
        stats = await crawler.crawl()
        await crawler.aclose()
    store.close()
    assert stats.errors == {"connection_error": 8} and stats.host_paused == 0
    assert all(s.hits[f"r{n}"] == 1 for n in range(8))  # the first host answers every one
    assert crawler.hosts.paused_until("127.0.3.8", clock.now()) == clock.now() + 60.0
    assert crawler.hosts.paused(clock.now()) == {"127.0.3.8": clock.now() + 60.0}


async def test_slow_consumer_applies_backpressure_without_loss(site, tmp_path):
    base, s = site
    for n in range(30):
        s.set(f"f{n}", rss([(f"{n}-{k}", f"post {n}.{k}") for k in range(3)]))
    clock = ManualClock(0.0)
    store = SQLiteStore(tmp_path / "bp.db")
    received: list[int] = []

    async def slow(items: list[IngestedEntry]) -> None:
        await asyncio.sleep(0.05)
        received.extend(i.id for i in items)

    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",)), clock=clock) as fetcher:
        c = Crawler(store, fetcher, clock, events=Handed(slow),
                    settings=CrawlSettings(batch_size=2, concurrency=10, batch_interval_s=0.01))
        await c.add_feeds([f"{base}/f{n}" for n in range(30)])
        stats = await c.crawl()
        await c.aclose()
    assert stats.new_entries == 90 and len(received) == 90 == len(set(received))
    store.close()


async def test_state_survives_restart(site, tmp_path):
    base, s = site
    s.set("a", rss([("1", "one")]))
    clock = ManualClock(0.0)
    path = tmp_path / "r.db"
    for round_ in range(2):
        store = SQLiteStore(path)
        async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",)), clock=clock) as f:
            c = Crawler(store, f, clock)
            await c.load()
            if round_ == 0:
                await c.add_feeds([f"{base}/a"])
            stats = await c.crawl()
            await c.aclose()
        store.close()
    assert stats.not_modified == 1 and stats.new_entries == 0  # validators were persisted


class CountingStore(SQLiteStore):
    """Records the size of each transaction and whether it held anything new."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.transactions: list[tuple[int, bool]] = []

    def apply(self, updates, fenced=None):
        self.transactions.append((len(updates), any(u.entries for u in updates)))
        return super().apply(updates, fenced)


async def test_fetches_that_found_nothing_share_a_transaction_news_does_not_wait(site, tmp_path):
    base, s = site
    for n in range(20):
        s.set(f"q{n}", rss([(f"{n}-1", f"post {n}")]))
    clock = ManualClock(0.0)
    store = CountingStore(tmp_path / "quiet.db")
    loop = asyncio.get_running_loop()
    arrived: dict[str, float] = {}

    async def sink(items: list[IngestedEntry]) -> None:
        for item in items:
            arrived[item.entry.title] = loop.time()

    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",)), clock=clock) as fetcher:
        c = Crawler(store, fetcher, clock, events=Handed(sink), settings=CrawlSettings(
            concurrency=20, quiet_batch_interval_s=3.0))
        await c.add_feeds([f"{base}/q{n}" for n in range(20)])
        await c.crawl()  # every document new: nothing waits (group commit)
        first = len(store.transactions)
        assert all(news for _, news in store.transactions)
        # Nothing changed: the 20 fetches answered 304 share a transaction or two instead of
        # taking one each.
        stats = await c.crawl()
        quiet = store.transactions[first:]
        assert stats.not_modified == 20 and sum(n for n, _ in quiet) == 20
        assert len(quiet) <= 2 and not any(news for _, news in quiet)
        # One feed has news among quiet ones: its entry does not wait out the quiet 3 s.
        s.set("q7", rss([("7-2", "news"), ("7-1", "post 7")]))
        started = loop.time()
        stats = await c.crawl()
        assert stats.new_entries == 1 and arrived["news"] - started < 1.5
        await c.aclose()
    store.close()


class AnswerLostStore(SQLiteStore):
    """Commits, then reports the commit as failed once (``lose_next``): a connection that
    broke during COMMIT, whose outcome the client cannot know."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.lose_next = False

    def apply(self, updates, fenced=None):
        ingested = super().apply(updates, fenced)
        if self.lose_next:
            self.lose_next = False
            raise StoreUnavailableError("applying 1 feed updates failed in postgresql://x/hub: "
                                        "consuming input failed: server closed the connection")
        return ingested


async def test_a_commit_reported_failed_but_stored_is_still_handed_on_once(site, tmp_path):
    """The refetch after the failed commit finds its entries known to the store; the next
    commit hands them on, once, and not another crawler's entries stored meanwhile."""
    base, s = site
    s.set("mine", rss([("1", "one")]))
    s.set("theirs", rss([("9", "nine")]))
    clock = ManualClock(0.0)
    store = AnswerLostStore(tmp_path / "lost.db")
    received: list[str] = []

    async def sink(items: list[IngestedEntry]) -> None:
        received.extend(i.entry.title for i in items)

    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",)), clock=clock) as fetcher:
        crawler = Crawler(store, fetcher, clock, events=Handed(sink), share=(0, 2),
                          settings=CrawlSettings(batch_interval_s=0.01))
        theirs, mine = await crawler.add_feeds([f"{base}/theirs", f"{base}/mine"])
        assert crawler.owns(mine) and not crawler.owns(theirs)
        await crawler.crawl()
        assert received == ["one"]
        s.set("mine", rss([("2", "two"), ("1", "one")]))
        store.lose_next = True
        clock.advance(60)
        stats = await crawler.crawl()
        assert stats.errors == {"store": 1} and received == ["one"]
        assert [i.entry.title for i in store.entries(mine)] == ["two", "one"]  # stored anyway
        # Another crawler stores an entry of its own feed meanwhile.
        other = store.feeds()[0]
        assert other.id == theirs
        store.apply([FeedUpdate(feed_id=theirs, state=other.state, seen_at=61.0,
                                entries=(Entry(key="9", title="nine"),))])
        clock.advance(60)
        stats = await crawler.crawl()  # "two" is known now: the refetch stores nothing new
        assert stats.errors == {} and stats.new_entries == 0
        assert received == ["one", "two"]
        clock.advance(60)
        await crawler.crawl()
        assert received == ["one", "two"]  # once
        await crawler.aclose()
    store.close()


class RecordingStore(SQLiteStore):
    """Tells the test each commit's entries as they are stored (from the store thread)."""

    def __init__(self, path, stored) -> None:
        super().__init__(path)
        self.stored = stored  # called with the titles a commit stored

    def apply(self, updates, fenced=None):
        ingested = super().apply(updates, fenced)
        self.stored([i.entry.title for i in ingested])
        return ingested


async def test_a_batch_commits_while_the_one_before_is_handed_on_and_order_is_kept(site,
                                                                                  tmp_path):
    """The store and the bus work at the same time: the second commit happens while the
    first batch's hand-on is still waiting, and the batches are still handed on in the order
    they were stored, each once."""
    base, s = site
    for name in "abc":
        s.set(name, rss([(name, f"post {name}")]))
    loop = asyncio.get_running_loop()
    stored: list[list[str]] = []
    two_stored = asyncio.Event()

    def on_stored(titles: list[str]) -> None:
        def note() -> None:
            stored.append(titles)
            if len([t for t in stored if t]) >= 2:
                two_stored.set()
        loop.call_soon_threadsafe(note)

    handed: list[list[str]] = []
    waited_in_vain: list[bool] = []

    async def sink(items: list[IngestedEntry]) -> None:
        if not handed:  # the first hand-on waits until a second batch is stored
            try:
                await asyncio.wait_for(two_stored.wait(), 10)
            except TimeoutError:  # commits waited for this hand-on: no overlap
                waited_in_vain.append(True)
        handed.append([i.entry.title for i in items])

    clock = ManualClock(0.0)
    store = RecordingStore(tmp_path / "overlap.db", on_stored)
    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",)), clock=clock) as fetcher:
        c = Crawler(store, fetcher, clock, events=Handed(sink),
                    settings=CrawlSettings(batch_size=1, concurrency=3))
        await c.add_feeds([f"{base}/{name}" for name in "abc"])
        stats = await c.crawl()
        await c.aclose()
    store.close()
    assert stats.new_entries == 3 and not waited_in_vain
    assert handed == [titles for titles in stored if titles]
    assert sorted(t for titles in handed for t in titles) == ["post a", "post b", "post c"]


async def test_a_hand_on_that_fails_loses_no_entry_and_stalls_no_fetch(site, tmp_path):
    """A bug downstream (the consumer's ``ingested`` raises once): the cycle still ends (no fetch
    waits
    forever), and the next commit hands on every entry that was stored but not handed on."""
    base, s = site
    for name in "abcd":
        s.set(name, rss([(name, f"post {name}")]))
    received: list[str] = []
    failures = [RuntimeError("a bug downstream")]

    async def sink(items: list[IngestedEntry]) -> None:
        if failures:
            raise failures.pop()
        received.extend(i.entry.title for i in items)

    clock = ManualClock(0.0)
    store = SQLiteStore(tmp_path / "handon.db")
    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",)), clock=clock) as fetcher:
        c = Crawler(store, fetcher, clock, events=Handed(sink),
                    settings=CrawlSettings(batch_size=1, concurrency=4))
        await c.add_feeds([f"{base}/{name}" for name in "abcd"])
        await asyncio.wait_for(c.crawl(), 30)
        s.set("d", rss([("d2", "post d2"), ("d", "post d")]))
        clock.advance(60)
        await asyncio.wait_for(c.crawl(), 30)
        await c.aclose()
    store.close()
    assert sorted(received) == ["post a", "post b", "post c", "post d", "post d2"]


@pytest.mark.parametrize("where", ["commit", "take"])
async def test_a_cancelled_committer_loses_no_entry_and_stalls_no_fetch(site, tmp_path, where):
    """The committer is cancelled while the store thread commits a batch (which it finishes),
    or while it takes a batch off the queue (waiting for more): the batch's fetches hear back
    (forgotten, made again) instead of waiting forever, and the next commit hands on the
    entries a cancelled commit stored."""
    import threading

    base, s = site
    for name in "ab":
        s.set(name, rss([(name, f"post {name}")]))
    received: list[str] = []

    async def sink(items: list[IngestedEntry]) -> None:
        received.extend(i.entry.title for i in items)

    entered, release = threading.Event(), threading.Event()

    class SlowOnce(SQLiteStore):
        def apply(self, updates, fenced=None):  # type: ignore[no-untyped-def]
            if where == "commit" and any(u.entries for u in updates) and not entered.is_set():
                entered.set()
                release.wait(30)
            return super().apply(updates, fenced)

    clock = ManualClock(0.0)
    store = SlowOnce(tmp_path / "cancelled.db")
    # "take": an hour's batch window, so the committer holds what it took and waits for more.
    window = 0.5 if where == "commit" else 3600.0
    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",)), clock=clock) as fetcher:
        c = Crawler(store, fetcher, clock, events=Handed(sink),
                    settings=CrawlSettings(batch_size=8, batch_interval_s=window, concurrency=4))
        taking: list[list] = []
        take = c._take_batch

        async def recorded(queue, batch):  # type: ignore[no-untyped-def]
            taking.append(batch)
            return await take(queue, batch)

        c._take_batch = recorded  # type: ignore[method-assign]
        await c.add_feeds([f"{base}/{name}" for name in "ab"])
        cycle = asyncio.create_task(c.crawl())
        if where == "commit":
            await eventually(entered.is_set, timeout=30)
        else:
            await eventually(lambda: taking and len(taking[-1]) == 2, timeout=30)
        committer = c._committer
        assert committer is not None
        committer.cancel()
        release.set()
        stats = await asyncio.wait_for(cycle, 30)  # every fetch heard back
        assert committer.cancelled()
        assert stats.errors.get("internal", 0) == 2
        assert received == []
        c.settings = msgspec.structs.replace(c.settings, batch_interval_s=0.01)
        clock.advance(60)
        await asyncio.wait_for(c.crawl(), 30)
        await c.aclose()
    store.close()
    assert sorted(received) == ["post a", "post b"]  # each once
