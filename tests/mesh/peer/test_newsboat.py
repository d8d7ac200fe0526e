"""A person's reader polls the peer, not the publisher: newsboat (Debian's) reads one feed and
the merged feed from the peer's local proxy, and gets a 304 once it holds the proxy's ETag."""

from __future__ import annotations

import feedparser
import pytest

from tests.eventually import eventually
from tests.hub.test_newsboat import NEWSBOAT, Newsboat
from tests.mesh.peer.conftest import BUSY, LAZY

pytestmark = pytest.mark.skipif(not __import__("pathlib").Path(NEWSBOAT).exists(),
                                reason="newsboat not installed (scripts/apt-test-packages)")


async def _served(url: str) -> list[tuple[str, str, str]]:
    import aiohttp
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert response.status == 200
        feed = feedparser.parse(await response.read())
    assert not feed.bozo
    return sorted((e.id, e.title, e.link) for e in feed.entries)


async def test_newsboat_reads_the_peers_local_proxy(mesh, tmp_path):
    # one peer, fetching each feed once: its archive, and so the proxy's feeds, then stay put
    peer = await mesh.peer(0, list(BUSY), LAZY)

    async def archived() -> bool:
        counts = [await peer.archive.count(mesh.url(f)) for f in BUSY]
        assert [len(mesh.fetches(0, f)) for f in BUSY] == [1, 1] and all(counts), counts
        return True
    await eventually(archived)
    feed_id = peer.archive.feed_id(mesh.url(BUSY[0]))
    urls = [peer.proxy.feed_url(feed_id, "rss"), f"{peer.proxy.url}/all.atom"]
    before = {f: len(mesh.fetches(0, f)) for f in BUSY}
    readers = {url: Newsboat(tmp_path / url.rsplit(".", 1)[1], [url]) for url in urls}
    for url, reader in readers.items():
        await reader.reload()
        stored, served = reader.items(url), await _served(url)
        assert stored == served and served, url
    # the reader saw the publisher's own entries: its guids, as the farm gives them
    document = {row.entry.key for row in await peer.archive.entries(feed_id, 1000)}
    assert {guid for guid, _, _ in readers[urls[0]].items(urls[0])} == document
    merged = {guid for guid, _, _ in readers[urls[1]].items(urls[1])}
    assert document <= merged and len(merged) > len(document)  # both feeds, merged

    for url, reader in readers.items():  # newsboat keeps the ETag from its second reload on
        for _ in range(2):
            if reader.feed(url)[1]:
                break
            await reader.reload()
        assert reader.feed(url)[1]
    not_modified = peer.proxy.not_modified
    for reader in readers.values():
        await reader.reload()
    assert peer.proxy.not_modified == not_modified + len(urls)
    # every poll was answered by the peer: the publisher saw none of them
    assert {f: len(mesh.fetches(0, f)) for f in BUSY} == before
    assert peer.status()["fetches_saved"] >= 2 * len(urls)
