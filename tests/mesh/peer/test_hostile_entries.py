"""A neighbour's markup never reaches the reader: hostile entries (scripts, event handlers,
``javascript:``/``data:`` links, iframes, dates a month ahead) sent through FeedEx by a peer and
through a signed multicast record by a republisher are archived cleaned, and the real local proxy
on loopback serves none of it in its RSS or JSON feeds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import msgspec
import pytest

from feedmesh.feeds.foreign import CLOCK_SKEW_S, clean_foreign
from feedmesh.fetch import Fetcher
from feedmesh.mesh.peer.entries import from_wire, to_wire
from feedmesh.mesh.peer.multicast import entry_from_record
from feedmesh.model import Entry
from tests.eventually import eventually
from tests.mesh.peer.conftest import BUSY, LAZY, linked
from tests.mesh.peer.test_multicast_peer import LEGACY, peer, scribe, site
from tests.mesh.republish.test_republish import LOOPBACK

FORBIDDEN = ("alert(", "<script", "&lt;script", "onerror", "onload", "javascript:", "data:text",
             "iframe", "evil.example")
MONTH = timedelta(days=30)


def hostile(name: str, now: float) -> list[Entry]:
    """The hostile set; every entry also holds one honest word (``kept-NAME-i``) that must be
    served, so the test cannot pass by serving nothing."""
    ahead = datetime.fromtimestamp(now, UTC) + MONTH
    summaries = [
        '<p>kept-{}-0</p><script>alert("s")</script>',
        '<p>kept-{}-1</p><img src="http://127.0.0.1/x.png" onerror="alert(1)" onload="alert(2)">',
        '<p>kept-{}-2</p><iframe src="http://evil.example/"></iframe>',
        '<p>kept-{}-3</p><a href="javascript:alert(3)">a</a><a href="data:text/html,x">b</a>',
        '<p>kept-{}-4</p><svg><script>alert(4)</script></svg><body onload="alert(5)">',
    ]
    links = ["javascript:alert(6)", "data:text/html;base64,PHNjcmlwdD4=", "http://127.0.0.1/ok",
             "  JaVaScRiPt:alert(7)", "http://127.0.0.1/ok2"]
    return [Entry(key=f"urn:hostile:{name}:{i}", guid=f"urn:hostile:{name}:{i}",
                  title=f'<script>alert("t")</script>Title {name} {i}<img src=x onerror=alert(8)>',
                  link=links[i], summary=summary.format(name), published=ahead)
            for i, summary in enumerate(summaries)]


async def served(session: aiohttp.ClientSession, proxy, feed_id: int) -> dict[str, str]:
    out = {}
    for suffix in ("rss", "json"):
        async with session.get(proxy.feed_url(feed_id, suffix)) as response:
            assert response.status == 200
            out[suffix] = (await response.read()).decode()
    return out


def assert_clean(documents: dict[str, str], name: str, now: float) -> None:
    for suffix, text in documents.items():
        lowered = text.lower()
        for construct in FORBIDDEN:
            assert construct not in lowered, f"{construct!r} served in the {suffix} feed"
        for i in range(5):
            assert f"kept-{name}-{i}" in text, f"the honest text of entry {i} is lost"
    items = msgspec.json.decode(documents["json"])["items"]
    dates = [datetime.fromisoformat(item["date_published"]) for item in items
             if item["id"].startswith(f"urn:hostile:{name}:")]
    assert len(dates) == 5
    assert all(d.timestamp() <= now + CLOCK_SKEW_S for d in dates), dates


def test_the_cleaning_of_a_foreign_entry_is_the_parsers() -> None:
    now = 1_800_000_000.0
    for entry in hostile("unit", now):
        clean = clean_foreign(entry, "http://127.0.0.1/feed", now)
        text = f"{clean.title} {clean.link} {clean.summary}".lower()
        assert not any(construct in text for construct in FORBIDDEN), text
        assert clean.published == datetime.fromtimestamp(now, UTC)
        assert clean.link in ("", "http://127.0.0.1/ok", "http://127.0.0.1/ok2")
    # both constructors clean: the FeedEx wire and a record's entry object
    wire = from_wire(to_wire(hostile("w", now)), "http://127.0.0.1/feed", now)
    record = entry_from_record({"key": "k", "title": "<b onclick=alert(1)>T</b>",
                                "link": "javascript:alert(2)",
                                "summary": "<iframe src=//evil.example></iframe>ok",
                                "published": "2100-01-01T00:00:00+00:00"}, None, "", now)
    assert record is not None
    assert (record.title, record.link, record.summary) == ("T", "", "ok")
    assert record.published == datetime.fromtimestamp(now, UTC)
    for entry in wire:
        assert "alert" not in entry.title + entry.summary and "script" not in entry.link
    # an honest date is kept as declared, a slightly fast clock too
    honest = Entry(key="k", published=datetime.fromtimestamp(now + 60, UTC))
    assert clean_foreign(honest, "", now).published == honest.published


async def test_hostile_entries_from_a_neighbour_are_served_clean(mesh):
    feed = BUSY[0]
    url = mesh.url(feed)
    reader = await mesh.peer(0, [feed], LAZY)
    liar = await mesh.peer(1, [feed], LAZY)
    await eventually(lambda: linked(reader, liar), what="the link is held at both ends")
    liar_address = f"{liar.feedex.address[0]}:{liar.feedex.address[1]}"
    liar.feedex.fetched(url, hostile("fx", mesh.clock.now()))
    await eventually(lambda: reader.archive.received.get(liar_address, 0) >= 5,
                     what="the neighbour's bundle is archived")
    feed_id = reader.archive.feed_id(url)
    async with aiohttp.ClientSession() as session:
        assert_clean(await served(session, reader.proxy, feed_id), "fx", mesh.clock.now())


@pytest.mark.timeout(120)
async def test_hostile_records_from_a_republisher_are_served_clean(tmp_path: Path) -> None:
    async with (Fetcher(LOOPBACK) as fetcher, site(tmp_path, "keys") as republisher,
                peer(tmp_path, 0, fetcher, [republisher.url]) as reader):
        await eventually(lambda: [f["pushed"] for f in scribe(reader)["feeds"]] == [True],
                         timeout=30)
        for entry in hostile("mc", reader.clock.now()):
            republisher.republisher.multicast(LEGACY, entry)
        feed_id = reader.archive.feed_id(republisher.url)

        async def all_kept() -> bool:
            rows = await reader.archive.entries(feed_id, 100)
            return sum(row.entry.key.startswith("urn:hostile:mc:") for row in rows) == 5
        await eventually(all_kept, what="the five signed records are archived", timeout=30)
        async with aiohttp.ClientSession() as session:
            assert_clean(await served(session, reader.proxy, feed_id), "mc",
                         reader.clock.now())
