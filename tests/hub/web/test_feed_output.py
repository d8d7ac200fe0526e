"""The private feeds as a reader sees them: valid RSS 2.0, Atom 1.0 and JSON Feed 1.1 (checked with
feedparser, an independent parser), the same entries in all three, stable ids, conditional GET,
gzip and Cache-Control. The hub crawls a real farm over loopback; nothing is mocked."""

from __future__ import annotations

import gzip
import json
from datetime import datetime

import feedparser
from multidict import CIMultiDict

from tests.hub.web.conftest import filled_subscription

VERSIONS = {"rss": "rss20", "atom": "atom10", "json": "json11"}


async def _get(env, url: str, headers: dict[str, str] | None = None
               ) -> tuple[int, CIMultiDict, bytes]:
    """One GET as sent on the wire: no compression unless asked, the body as received."""
    headers = {"Accept-Encoding": "identity", **(headers or {})}
    async with env.session.get(url, headers=headers, auto_decompress=False) as response:
        return response.status, CIMultiDict(response.headers), await response.read()


def _parse(body: bytes, headers: CIMultiDict) -> feedparser.FeedParserDict:
    """feedparser reads JSON Feed only when told the content type, as a reader would be."""
    return feedparser.parse(body, response_headers={"content-type": headers["Content-Type"]})


async def _hub_items(env, sub_id: int) -> list:
    sub = env.hub.db.subscription(sub_id)
    return await env.hub.reflectors[sub.reflector].items(sub_id)


async def _held_ids(env, sub_id: int) -> set[int]:
    return {item.entry_id for item in await _hub_items(env, sub_id)}


async def _wait_for_a_new_entry(env, sub_id: int) -> None:
    """The feed is full (keep entries from the first crawl's backlog); wait until a newly
    posted farm entry replaces one."""
    before = await _held_ids(env, sub_id)

    async def changed() -> bool:
        return await _held_ids(env, sub_id) != before

    await env.wait_for(changed, timeout=90.0)


async def test_gzip_when_asked_and_cache_control_always(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=3)
    url = sub["feed_urls"]["rss"]
    status, plain_headers, plain = await _get(hub_env, url, {"Accept-Encoding": "identity"})
    assert status == 200 and "Content-Encoding" not in plain_headers
    for accept in ("gzip", "gzip, deflate", "deflate, gzip, br"):
        status, headers, body = await _get(hub_env, url, {"Accept-Encoding": accept})
        assert status == 200
        assert headers["Content-Encoding"] == "gzip", accept
        assert headers["Cache-Control"] == "private, max-age=60"
        assert "Accept-Encoding" in headers["Vary"]
        assert gzip.decompress(body) == plain
        assert len(body) < len(plain)
    status, headers, body = await _get(hub_env, url, {"Accept-Encoding": "br;q=1, gzip;q=0"})
    assert status == 200 and headers.get("Content-Encoding") != "gzip"
    assert plain_headers["Cache-Control"] == "private, max-age=60"
