"""A private feed's archive (RFC 5005): a reader that follows ``prev-archive`` from the feed
(JSON Feed: ``next_url``) collects every match of the subscription's query in the store exactly
once, in every format; archive pages do not change as new matches arrive; keys the hub did not
make answer 404; the pages come from the store, not from a reflector; the feed's ``ttl`` follows
its own match rate. The hub crawls a real farm over loopback; nothing is mocked."""

from __future__ import annotations

import json
import re

import msgspec
import pytest
from lxml import etree
from multidict import CIMultiDict

from feedmesh.hub.front.archive import feed_ttl_minutes
from feedmesh.hub.web import WebLimits
from feedmesh.match import parse_query
from tests.eventually import eventually
from tests.hub.web.conftest import (
    FARM_QUERY,
    ROOMY_LIMITS,
    assert_error,
    feed_version,
    filled_subscription,
    unchanged,
)

PAGE = 6
SCAN = 30
ATOM = "{http://www.w3.org/2005/Atom}"
FH = "{http://purl.org/syndication/history/1.0}"


@pytest.fixture
def web_limits() -> WebLimits:
    # Small pages and a small scan, so a farm's store makes many pages, some of them cut by
    # the scan (fewer than PAGE matches) rather than by the page size.
    return msgspec.structs.replace(ROOMY_LIMITS, archive_page_entries=PAGE, archive_scan_ids=SCAN)


async def _get(env, url: str, headers: dict[str, str] | None = None
               ) -> tuple[int, CIMultiDict, bytes]:
    async with env.session.get(url, headers={"Accept-Encoding": "identity", **(headers or {})},
                               auto_decompress=False) as response:
        return response.status, CIMultiDict(response.headers), await response.read()


def _entry_number(item_id: str) -> int:
    found = re.search(r"entry-(\d+)", item_id)  # (then the feed's own mark)
    assert found, item_id
    return int(found.group(1))


def _read(kind: str, body: bytes) -> tuple[list[int], str, bool, int | None]:
    """(entry ids, the older page's URL or "", whether it is an archive page, ttl) of a
    document, read with lxml / json (not our parser)."""
    if kind == "json":
        doc = json.loads(body)
        hints = doc.get("_feedmesh", {})
        return ([_entry_number(i["id"]) for i in doc["items"]], doc.get("next_url", ""),
                bool(hints.get("archive")), hints.get("ttl_minutes"))
    root = etree.fromstring(body)
    if kind == "rss":
        ids = [_entry_number(g.text) for g in root.iter("guid")]
        ttl = root.findtext("channel/ttl")
    else:
        ids = [_entry_number(e.findtext(f"{ATOM}id")) for e in root.iter(f"{ATOM}entry")]
        ttl = None
    older = [link.get("href") for link in root.iter(f"{ATOM}link")
             if link.get("rel") == "prev-archive"]
    assert len(older) <= 1
    archive = bool(list(root.iter(f"{FH}archive")))
    return ids, older[0] if older else "", archive, int(ttl) if ttl else None


async def _follow(env, kind: str, url: str) -> tuple[list[int], list[list[int]], list[str]]:
    """The feed's entry ids, then each archive page's, following prev-archive to the end."""
    status, _, body = await _get(env, url)
    assert status == 200, body[:300]
    held, older, archive, _ = _read(kind, body)
    assert not archive
    pages, urls = [], []
    while older:
        assert older not in urls, "prev-archive loops"
        urls.append(older)
        status, headers, body = await _get(env, older)
        assert status == 200, body[:300]
        assert headers["Cache-Control"] == "private, max-age=86400"
        ids, older, archive, _ = _read(kind, body)
        assert archive, "an archive page says it is one (fh:archive)"
        assert len(ids) <= PAGE
        pages.append(ids)
        assert len(urls) < 10_000
    return held, pages, urls


async def _store_matches(env, query: str) -> list[int]:
    """Every stored entry the query matches, by the preview's matching (a different path)."""
    count = env.hub.store.entry_count()
    _, found = await env.hub.front.recent_matches(parse_query(query), count + 1000)
    return sorted(m.item.id for m in found)


async def test_following_prev_archive_collects_every_match_once_in_every_format(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=10)

    async def read() -> dict:
        return {kind: await _follow(hub_env, kind, url)
                for kind, url in sub["feed_urls"].items()}

    followed = await unchanged(hub_env, sub["id"], read)
    expected = await _store_matches(hub_env, FARM_QUERY)
    collected = {}
    for kind, (held, pages, urls) in followed.items():
        everything = held + [i for page in pages for i in page]
        assert len(everything) == len(set(everything)), f"{kind}: an entry twice"
        assert everything == sorted(everything, reverse=True), f"{kind}: not newest first"
        newest = max(held)
        assert sorted(everything) == [i for i in expected if i <= newest], kind
        # Many pages, some cut by the scan rather than full: a rare query's pages stay cheap.
        assert len(urls) >= 5, (kind, len(urls))
        assert any(len(page) < PAGE for page in pages[:-1]), (kind, [len(p) for p in pages])
        collected[kind] = everything
    assert collected["rss"] == collected["atom"] == collected["json"]
    assert len(collected["rss"]) > 10  # more than the feed keeps: the archive held the rest


async def test_archive_pages_do_not_change_as_new_matches_arrive(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=10)
    url = sub["feed_urls"]["atom"]
    _, _, body = await _get(hub_env, url)
    _, first_page, _, _ = _read("atom", body)
    status, headers, before = await _get(hub_env, first_page)
    assert status == 200
    held = await feed_version(hub_env, sub["id"])

    async def changed() -> bool:  # the farm posts: new matches push old ones out of the feed
        return await feed_version(hub_env, sub["id"]) != held

    await eventually(changed, timeout=90.0)
    status, again_headers, after = await _get(hub_env, first_page)
    assert status == 200
    assert after == before
    assert again_headers["ETag"] == headers["ETag"]
    status, _, _ = await _get(hub_env, first_page, {"If-None-Match": headers["ETag"]})
    assert status == 304
    # The feed now links a newer page: the matches it let go are there, the old page is not.
    _, _, body = await _get(hub_env, url)
    _, newest_page, _, _ = _read("atom", body)
    assert newest_page != first_page


async def test_page_keys_the_hub_did_not_make_are_404(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=3)
    other = await filled_subscription(hub_env, ann, entries=3, query="music")
    _, _, body = await _get(hub_env, sub["feed_urls"]["rss"])
    page = _read("rss", body)[1]
    assert (await _get(hub_env, page))[0] == 200
    base, _, name = page.rpartition("/")
    key, _, ext = name.partition(".")
    boundary, _, tag = key.partition("-")
    other_base = other["feed_urls"]["rss"].removesuffix(".rss") + "/archive"
    flipped = "0" if tag[-1] != "0" else "1"
    forged = [
        f"{base}/{int(boundary) + 1}-{tag}.{ext}",  # another boundary, the same MAC
        f"{base}/{boundary}-{tag[:-1]}{flipped}.{ext}",  # a MAC one digit off
        f"{base}/0{boundary}-{tag}.{ext}",  # another spelling of the same boundary
        f"{base}/{boundary}.{ext}",  # no MAC at all
        f"{base}/{boundary}-{tag}x.{ext}",
        f"{base}/-{tag}.{ext}",
        f"{base}/{'9' * 30}-{tag}.{ext}",
        f"{other_base}/{key}.{ext}",  # a real key, of another feed
    ]
    for url in forged:
        status, _, body = await _get(hub_env, url)
        assert_error(status, json.loads(body), 404, "not_found")
    assert (await _get(hub_env, f"{base}/{key}.xml"))[0] == 404
    # A changed query changes what the pages would hold: its old keys stop working.
    status, _ = await ann.call("PATCH", f"/api/subscriptions/{sub['id']}",
                               {"query": "government"})
    assert status == 200
    status, _, body = await _get(hub_env, page)
    assert_error(status, json.loads(body), 404, "not_found")


async def test_archive_pages_come_from_the_store_not_the_reflectors(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=10)
    _, _, body = await _get(hub_env, sub["feed_urls"]["json"])
    held, older, _, _ = _read("json", body)
    front = hub_env.hub.front
    asked = []
    original = front.holders.items

    async def counted(sub_id: int) -> list:
        asked.append(sub_id)
        return await original(sub_id)

    front.holders.items = counted
    scanned = front.metrics.archive_entries_scanned._value.get()
    reflector = hub_env.hub.reflectors[(await front.subscription(sub["id"])).reflector]
    try:
        archived: list[int] = []
        while older:
            status, _, body = await _get(hub_env, older)
            assert status == 200
            ids, older, _, _ = _read("json", body)
            archived += ids
    finally:
        front.holders.items = original
    assert asked == [], "an archive page asked a reflector"
    assert front.metrics.archive_entries_scanned._value.get() > scanned
    assert archived and not set(archived) & set(held)
    # What the pages showed is not held by the reflector that serves the feed.
    assert not set(archived) & set(reflector.topk.newest_ids(sub["id"], 1000))


async def test_ttl_follows_the_feeds_own_match_rate(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=10, keep=10)

    async def read() -> tuple[int | None, list]:
        _, _, body = await _get(hub_env, sub["feed_urls"]["rss"])
        return _read("rss", body)[3], await hub_env.hub.front.feed_items(sub["id"])

    ttl, items = await unchanged(hub_env, sub["id"], read)
    assert ttl == feed_ttl_minutes([i.first_seen_at for i in items], 10)
    status, body = await ann.call("GET", f"/api/subscriptions/{sub['id']}")
    assert status == 200
    feed = body["subscription"]["feed"]
    assert feed["holds"] == 10
    oldest = min(e.first_seen_at for e in hub_env.hub.store.entries_after(0, 1))
    assert feed["archive_since"] == oldest
    assert 1 <= feed["ttl_minutes"] <= 24 * 60


def test_ttl_is_half_the_time_keep_matches_take():
    every = [60.0 * i for i in range(10)]  # a match a minute
    assert feed_ttl_minutes(every, 10) == 5
    assert feed_ttl_minutes(every, 100) == 50
    assert feed_ttl_minutes([3600.0 * i for i in range(10)], 10) == 300  # one an hour
    assert feed_ttl_minutes([1.0 * i for i in range(10)], 10) == 1  # clamped: 1 minute
    assert feed_ttl_minutes([86_400.0 * i for i in range(3)], 10) == 24 * 60  # clamped: a day
    assert feed_ttl_minutes([5.0], 10) == 60  # no rate yet
    assert feed_ttl_minutes([], 10) == 60
