"""A real, independent feed reader reads a personalized feed from a running hub (issue section 5).

newsboat (Debian's) reloads the subscription's RSS and Atom URLs into its own SQLite cache
(``newsboat -u urls -c cache.db -C config -x reload``); the cache must hold the entries, titles and
links the hub served. A second reload of the unchanged feed must be answered 304, which the hub's
``feedmesh_feed_requests_total`` metric proves on the server side.

newsboat runs as a child process with a private HOME and XDG directories under tmp_path and a
timeout, while the hub serves it from this test's event loop (hence asyncio's subprocesses).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sqlite3
from pathlib import Path

import feedparser
import pytest

from feedmesh.hub.web import WebLimits
from tests.eventually import eventually
from tests.hub.web.conftest import ROOMY_LIMITS, filled_subscription, settle

NEWSBOAT = shutil.which("newsboat") or "/usr/bin/newsboat"
TIMEOUT_S = 120.0

pytestmark = pytest.mark.skipif(
    not Path(NEWSBOAT).exists(),
    reason="newsboat not installed (scripts/apt-test-packages installs it)")


@pytest.fixture
def web_limits() -> WebLimits:
    return ROOMY_LIMITS


class Newsboat:
    """newsboat with its own home, configuration, URL list and cache, all under ``root``."""

    def __init__(self, root: Path, urls: list[str]) -> None:
        self.root = root
        for sub in ("home", "config", "data", "cache"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.urls = root / "urls"
        self.urls.write_text("".join(f"{url}\n" for url in urls))
        self.config = root / "config.txt"
        # download-retries 1: newsboat 2.21 counts a 304's empty body as a failed download and
        # would ask again, once per extra retry.
        self.config.write_text("reload-threads 1\ndownload-timeout 60\ndownload-retries 1\n"
                               "show-read-feeds yes\n")
        self.cache = root / "cache.db"

    async def reload(self) -> None:
        await self.run("-x", "reload")

    async def run(self, *arguments: str) -> None:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root / "home"),
               "XDG_CONFIG_HOME": str(self.root / "config"),
               "XDG_DATA_HOME": str(self.root / "data"),
               "XDG_CACHE_HOME": str(self.root / "cache"), "LANG": "C.UTF-8", "TERM": "dumb"}
        process = await asyncio.create_subprocess_exec(
            NEWSBOAT, "-u", str(self.urls), "-c", str(self.cache), "-C", str(self.config),
            *arguments, "-d", str(self.root / "newsboat.log"), "-l", "5", env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(process.communicate(), TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise AssertionError(f"newsboat {arguments} did not finish in {TIMEOUT_S} s") from None
        log = (self.root / "newsboat.log").read_text(errors="replace")[-3000:]
        assert process.returncode == 0, (process.returncode, out.decode(), err.decode(), log)

    def items(self, feed_url: str) -> list[tuple[str, str, str]]:
        """(guid, title, link) of every item newsboat stored for ``feed_url``."""
        with sqlite3.connect(self.cache) as db:
            rows = db.execute("SELECT guid, title, url FROM rss_item WHERE feedurl = ?",
                              (feed_url,)).fetchall()
        return sorted(rows)

    def feed(self, feed_url: str) -> tuple[str, str]:
        """(title, etag) newsboat stored for ``feed_url``."""
        with sqlite3.connect(self.cache) as db:
            row = db.execute("SELECT title, etag FROM rss_feed WHERE rssurl = ?",
                             (feed_url,)).fetchone()
        assert row is not None, f"newsboat stored no feed for {feed_url}"
        return row


async def _feed_requests(env) -> dict[str, float]:
    async with env.session.get(env.base + "/metrics") as response:
        text = await response.text()
    return {status: float(count) for status, count in re.findall(
        r'^feedmesh_feed_requests_total\{status="(\d+)"\} ([0-9.e+]+)$', text, re.MULTILINE)}


async def _served(env, url: str) -> list[tuple[str, str, str]]:
    async with env.session.get(url) as response:
        assert response.status == 200
        feed = feedparser.parse(await response.read())
    assert not feed.bozo
    return sorted((e.id, e.title, e.link) for e in feed.entries)


async def test_newsboat_reads_a_personalized_feed_and_gets_304(hub_env, tmp_path):
    env = hub_env
    ann = await env.anonymous.sign_up("ann")
    sub = await filled_subscription(env, ann, entries=5, name="for newsboat")
    # Freeze the feed: the farm keeps posting, and a reader's second fetch must meet the very
    # feed it saw first. A query no article matches stops new entries; the kept ones stay.
    status, body = await ann.call("PATCH", f"/api/subscriptions/{sub['id']}",
                                  {"query": "zzyzxqwv"})
    assert status == 200, body
    await settle(env)
    # One reader per format, as people subscribe: the RSS and Atom feeds carry the same entry
    # ids, and newsboat's cache keeps an item (by guid) under the first feed that brought it.
    urls = [sub["feed_urls"]["rss"], sub["feed_urls"]["atom"]]
    readers = {url: Newsboat(tmp_path / url.rsplit(".", 1)[1], [url]) for url in urls}

    for url, reader in readers.items():
        await reader.reload()
        stored, served = reader.items(url), await _served(env, url)
        assert len(served) >= 5
        assert stored == served, url  # the same entries (guid/id), titles and links
        assert reader.feed(url)[0] == "feedmesh: for newsboat"

    # newsboat 2.21 (Debian 12) stores the validators only from its second reload of a feed on
    # (newsboat issue #2734: the first tries to UPDATE a cache row it has not written yet), so
    # reload until it holds our ETag; such a reload is a full 200 with nothing new.
    etags = {}
    for url, reader in readers.items():
        for _ in range(2):
            if reader.feed(url)[1]:
                break
            await reader.reload()
        etags[url] = reader.feed(url)[1]
        async with env.session.get(url, headers={"Accept-Encoding": "identity"}) as response:
            assert response.headers["ETag"] == etags[url], "the feed changed while frozen"

    before = await _feed_requests(env)
    for reader in readers.values():
        await reader.reload()  # sends If-None-Match / If-Modified-Since: the hub answers 304
    after = await _feed_requests(env)
    assert after.get("304", 0) - before.get("304", 0) == len(urls)
    assert after.get("200", 0) == before.get("200", 0)
    for url, reader in readers.items():
        assert reader.items(url) == await _served(env, url)
        assert reader.feed(url) == ("feedmesh: for newsboat", etags[url])


async def test_newsboat_takes_every_private_feed_from_one_opml_file(hub_env, tmp_path):
    """A person hands all their feeds to their reader at once: the OPML of their subscriptions,
    imported by newsboat (``-i``), lists each private feed, and a reload reads each one."""
    env = hub_env
    ann = await env.anonymous.sign_up("ann")
    subs = [await filled_subscription(env, ann, entries=1, name=f"feed {n}", query=query)
            for n, query in enumerate(("government OR music", "water OR people"))]
    status, opml = await ann.call("GET", "/api/subscriptions.opml")  # RSS: newsboat's format
    assert status == 200 and opml.count("<outline") == 2
    (tmp_path / "mine.opml").write_text(opml)
    reader = Newsboat(tmp_path / "reader", [])
    await reader.run("-i", str(tmp_path / "mine.opml"))
    imported = [line.split()[0] for line in reader.urls.read_text().splitlines() if line]
    assert imported == [s["feed_urls"]["rss"] for s in subs]
    await reader.reload()
    for sub in subs:
        url = sub["feed_urls"]["rss"]
        assert reader.feed(url)[0] == f"feedmesh: {sub['name']}" and reader.items(url)


async def test_newsboat_shows_an_entry_in_every_feed_that_holds_it(hub_env, tmp_path):
    """Two subscriptions that match the same articles, imported from the subscriptions OPML:
    newsboat keys items by guid across all its feeds, so with one id per entry everywhere the
    second feed showed empty (issue 33, item 5). Each feed's ids are its own: both show all."""
    env = hub_env
    ann = await env.anonymous.sign_up("ann")
    subs = [await filled_subscription(env, ann, entries=3, name=f"feed {n}",
                                      query="government OR music OR water OR people")
            for n in range(2)]

    async def shared() -> set[int]:
        held = [{i.entry_id for i in await env.hub.front.feed_items(s["id"])} for s in subs]
        return held[0] & held[1]

    assert await eventually(shared, timeout=90.0)
    for sub in subs:  # frozen: the reader's reload meets the feeds checked below
        status, body = await ann.call("PATCH", f"/api/subscriptions/{sub['id']}",
                                      {"query": "zzyzxqwv"})
        assert status == 200, body
    await settle(env)
    assert await shared()
    status, opml = await ann.call("GET", "/api/subscriptions.opml")
    assert status == 200
    (tmp_path / "mine.opml").write_text(opml)
    reader = Newsboat(tmp_path / "reader", [])
    await reader.run("-i", str(tmp_path / "mine.opml"))
    await reader.reload()
    urls = [s["feed_urls"]["rss"] for s in subs]
    served = {url: await _served(env, url) for url in urls}
    for url in urls:
        assert len(served[url]) >= 3
        assert reader.items(url) == served[url], url
    # Ids differ between the feeds, and stay put: the same entry, the same id next time.
    ids = [{guid for guid, _, _ in served[url]} for url in urls]
    assert not ids[0] & ids[1]
    assert {url: await _served(env, url) for url in urls} == served
