"""The private feeds as a reader sees them: valid RSS 2.0 and Atom 1.0 (checked with feedparser, an
independent parser) and JSON Feed 1.1 (checked against the spec's schema, see :mod:`.jsonfeed`),
the same entries in all three, stable ids, conditional GET, gzip and Cache-Control. The hub crawls
a real farm over loopback; nothing is mocked."""

from __future__ import annotations

import gzip
import json
from datetime import datetime

import feedparser
from multidict import CIMultiDict

from feedmesh.hub.entry_ids import entry_id_in
from tests.eventually import eventually
from tests.hub.web.conftest import filled_subscription, unchanged
from tests.hub.web.jsonfeed import validate_json_feed

VERSIONS = {"rss": "rss20", "atom": "atom10", "json": "json11"}


async def _get(env, url: str, headers: dict[str, str] | None = None
               ) -> tuple[int, CIMultiDict, bytes]:
    """One GET as sent on the wire: no compression unless asked, the body as received."""
    headers = {"Accept-Encoding": "identity", **(headers or {})}
    async with env.session.get(url, headers=headers, auto_decompress=False) as response:
        return response.status, CIMultiDict(response.headers), await response.read()


async def _hub_items(env, sub_id: int) -> list:
    return await env.hub.front.feed_items(sub_id)


def _entries(kind: str, body: bytes, headers: CIMultiDict) -> list[tuple[str, str, str]]:
    """(id, title, link) of each entry, read by a parser that is not ours."""
    if kind == "json":
        assert headers["Content-Type"] == "application/feed+json; charset=utf-8"
        doc = validate_json_feed(body)
        return [(i["id"], i.get("title", ""), i.get("url", "")) for i in doc["items"]]
    feed = feedparser.parse(body)
    assert not feed.bozo, (kind, feed.get("bozo_exception"))
    assert feed.version == VERSIONS[kind]
    assert feed.feed.title.startswith("feedmesh: ")
    return [(e.id, e.title, e.link) for e in feed.entries]


async def test_three_formats_are_valid_and_hold_the_same_entries(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=3)

    async def read() -> tuple[dict, dict, dict]:
        served, bodies = {}, {}
        for kind, url in sub["feed_urls"].items():
            status, headers, body = await _get(hub_env, url)
            assert status == 200, body[:300]
            served[kind] = _entries(kind, body, headers)
            bodies[kind] = body
        own = await hub_env.hub.front.subscription(sub["id"])
        held = {entry_id_in(own, i.entry_id): i for i in await _hub_items(hub_env, sub["id"])}
        return served, bodies, held

    served, bodies, held = await unchanged(hub_env, sub["id"], read)
    assert len(served["rss"]) == len(held) >= 3
    assert served["rss"] == served["atom"] == served["json"]
    for entry_id, title, link in served["rss"]:
        assert title == held[entry_id].entry.title
        assert link == held[entry_id].entry.link
        assert link.startswith(hub_env.farm.base_url)
    # The source feed's title and the author travel with each entry.
    for kind in ("rss", "atom"):
        for entry in feedparser.parse(bodies[kind]).entries:
            item = held[entry.id]
            assert item.feed_title and entry.source.title == item.feed_title, kind
            if item.entry.authors:
                assert entry.author_detail.name == item.entry.authors[0].name, kind
    for doc_item in json.loads(bodies["json"])["items"]:
        item = held[doc_item["id"]]
        assert doc_item["_feedmesh"]["source_title"] == item.feed_title
        if item.entry.authors:
            assert doc_item["authors"][0]["name"] == item.entry.authors[0].name


async def test_json_feed_1_1_fields(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=2, name="watch")
    status, _headers, body = await _get(hub_env, sub["feed_urls"]["json"])
    assert status == 200
    doc = validate_json_feed(body)
    assert doc["title"] == "feedmesh: watch"
    assert doc["feed_url"] == sub["feed_urls"]["json"]
    assert doc["home_page_url"] == hub_env.base + "/"
    assert len(doc["items"]) >= 2
    for item in doc["items"]:
        assert item["id"].startswith("tag:feedmesh,2026:entry-")
        assert item["url"].startswith("http://127.0.0.1") and item["title"]
        assert datetime.fromisoformat(item["date_published"]).tzinfo is not None


async def test_format_from_accept_header(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=1)
    bare = sub["feed_urls"]["rss"].rsplit(".", 1)[0]
    for accept, content_type, version in (
            ("application/atom+xml", "application/atom+xml", "atom10"),
            ("application/feed+json", "application/feed+json", "json11"),
            ("application/rss+xml", "application/rss+xml", "rss20"),
            ("*/*", "application/rss+xml", "rss20")):
        status, headers, body = await _get(hub_env, bare, {"Accept": accept})
        assert status == 200
        assert headers["Content-Type"].split(";")[0] == content_type
        if version == "json11":
            validate_json_feed(body)
        else:
            assert feedparser.parse(body).version == version


async def _held_ids(env, sub_id: int) -> set[int]:
    return {item.entry_id for item in await _hub_items(env, sub_id)}


async def _wait_for_a_new_entry(env, sub_id: int) -> None:
    """The feed is full (keep entries from the first crawl's backlog); wait until a newly
    posted farm entry replaces one."""
    before = await _held_ids(env, sub_id)

    async def changed() -> bool:
        return await _held_ids(env, sub_id) != before

    await eventually(changed, timeout=90.0)


async def test_entry_ids_are_stable_across_polls(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=5, keep=20)
    url = sub["feed_urls"]["json"]
    _, _, first = await _get(hub_env, url)
    before = {item["id"]: (item["title"], item["url"]) for item in json.loads(first)["items"]}
    await _wait_for_a_new_entry(hub_env, sub["id"])
    _, _, second = await _get(hub_env, url)
    after = {item["id"]: (item["title"], item["url"]) for item in json.loads(second)["items"]}
    assert after != before
    kept = set(before) & set(after)
    assert kept, "keep=20 and one new entry: most of the first poll is still there"
    for entry_id in kept:
        assert after[entry_id] == before[entry_id]
    # And the same ids in the other formats.
    atom = feedparser.parse((await _get(hub_env, sub["feed_urls"]["atom"]))[2])
    rss = feedparser.parse((await _get(hub_env, sub["feed_urls"]["rss"]))[2])
    assert {e.id for e in atom.entries} == {e.id for e in rss.entries}
    assert kept & {e.id for e in atom.entries}


async def test_conditional_get_answers_304_until_the_feed_changes(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=1)
    url = sub["feed_urls"]["atom"]
    conditionals = ({"If-None-Match": "<etag>"}, {"If-Modified-Since": "<modified>"},
                    {"If-None-Match": '"other", <etag>'})

    async def poll_twice() -> tuple:
        status, headers, body = await _get(hub_env, url)
        assert status == 200
        etag, modified = headers["ETag"], headers["Last-Modified"]
        again = []
        for conditional in conditionals:
            sent = {k: v.replace("<etag>", etag).replace("<modified>", modified)
                    for k, v in conditional.items()}
            again.append(await _get(hub_env, url, sent))
        return etag, modified, body, again

    etag, modified, body, again = await unchanged(hub_env, sub["id"], poll_twice)
    assert etag.startswith('W/"') and modified.endswith("GMT")
    ids = {e.id for e in feedparser.parse(body).entries}
    for conditional, (status, headers_304, body_304) in zip(conditionals, again, strict=True):
        assert status == 304, conditional
        assert body_304 == b""
        assert headers_304["ETag"] == etag
        assert headers_304["Cache-Control"] == "private, max-age=60"
    # Another format has its own validator.
    _, json_headers, _ = await _get(hub_env, sub["feed_urls"]["json"])
    assert json_headers["ETag"] != etag
    status, _, _ = await _get(hub_env, sub["feed_urls"]["json"], {"If-None-Match": etag})
    assert status == 200

    await _wait_for_a_new_entry(hub_env, sub["id"])
    status, new_headers, body = await _get(hub_env, url, {"If-None-Match": etag})
    assert status == 200
    assert new_headers["ETag"] != etag
    assert {e.id for e in feedparser.parse(body).entries} != ids
    status, _, _ = await _get(hub_env, url, {"If-Modified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"})
    assert status == 200


async def test_gzip_when_asked_and_cache_control_always(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=3)
    url = sub["feed_urls"]["rss"]
    for accept in ("gzip", "gzip, deflate", "deflate, gzip, br"):
        async def both(accept: str = accept) -> tuple:
            plain = await _get(hub_env, url, {"Accept-Encoding": "identity"})
            return plain, await _get(hub_env, url, {"Accept-Encoding": accept})

        (status, plain_headers, plain), (status, headers, body) = await unchanged(
            hub_env, sub["id"], both)
        assert "Content-Encoding" not in plain_headers
        assert status == 200
        assert headers["Content-Encoding"] == "gzip", accept
        assert headers["Cache-Control"] == "private, max-age=60"
        assert "Accept-Encoding" in headers["Vary"]
        assert gzip.decompress(body) == plain
        assert len(body) < len(plain)
    status, headers, body = await _get(hub_env, url, {"Accept-Encoding": "br;q=1, gzip;q=0"})
    assert status == 200 and headers.get("Content-Encoding") != "gzip"
    assert plain_headers["Cache-Control"] == "private, max-age=60"


async def test_a_changed_subscription_changes_its_validators(hub_env, ann):
    """Renaming or shrinking a subscription changes its feed (title, length) while no entry
    arrives: a reader holding the old ETag must get the new feed, not 304."""
    sub = await filled_subscription(hub_env, ann, entries=5, name="before")
    url = sub["feed_urls"]["rss"]

    async def rename(name: str, keep: int) -> tuple:
        status, headers, _ = await _get(hub_env, url)
        assert status == 200
        status, _ = await ann.call("PATCH", f"/api/subscriptions/{sub['id']}",
                                   {"name": name, "keep": keep})
        assert status == 200
        return headers["ETag"], await _get(hub_env, url, {"If-None-Match": headers["ETag"]})

    old_etag, (status, headers, body) = await unchanged(hub_env, sub["id"],
                                                        lambda: rename("after", 3))
    assert status == 200, "the old ETag must not validate the renamed feed"
    assert headers["ETag"] != old_etag
    feed = feedparser.parse(body)
    assert feed.feed.title == "feedmesh: after" and len(feed.entries) == 3
    status, _, _ = await _get(hub_env, url, {"If-None-Match": headers["ETag"]})
    assert status == 304
