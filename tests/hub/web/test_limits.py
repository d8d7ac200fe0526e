"""Limits on what one account may hold and on what an OPML upload may be: hostile documents (XML
bombs, 100k outlines, oversize bodies) get a precise 4xx before any work is done, and outlines
that are not feeds are skipped and reported, never silently kept."""

from __future__ import annotations

import pytest

from feedmesh.hub.web import WebLimits
from tests.eventually import eventually
from tests.hub.web.conftest import ROOMY_LIMITS, assert_error, subscribe

LIMITS = WebLimits(**{**{f: getattr(ROOMY_LIMITS, f) for f in ROOMY_LIMITS.__struct_fields__},
                      "max_subscriptions_per_account": 3, "max_sources_per_account": 45})
XML = {"Content-Type": "text/xml"}


@pytest.fixture
def web_limits() -> WebLimits:
    return LIMITS


def opml(*outlines: str, head: str = "") -> bytes:
    body = "\n".join(outlines)
    return (f'<?xml version="1.0"?>\n{head}<opml version="2.0"><head><title>t</title></head>'
            f"<body>\n{body}\n</body></opml>").encode()


async def _source_count(client) -> int:
    status, body = await client.call("GET", "/api/sources")
    assert status == 200
    return len(body["sources"])


async def test_subscriptions_per_account(hub_env, ann, bob):
    subs = [await subscribe(ann, f"law{n}") for n in range(3)]
    status, body = await ann.call("POST", "/api/subscriptions", {"query": "one more"})
    error = assert_error(status, body, 403, "limit_reached")
    assert "at most 3 subscriptions" in error["message"]
    await subscribe(bob, "privacy")  # the limit is per account
    status, _ = await ann.call("DELETE", f"/api/subscriptions/{subs[0]['id']}")
    assert status == 204
    await subscribe(ann, "one more")


async def test_sources_per_account(hub_env, ann):
    assert await hub_env.add_farm_sources(ann) == 40
    more = opml(*(f'<outline xmlUrl="http://127.0.0.1:9/more/{n}"/>' for n in range(6)))
    status, body = await ann.call("POST", "/api/opml", data=more, headers=XML)
    error = assert_error(status, body, 403, "limit_reached")
    assert "at most 45 source feeds" in error["message"] and "you follow 40" in error["message"]
    assert await _source_count(ann) == 40
    # Importing the same list again adds nothing, so it is no step towards the limit.
    assert await hub_env.add_farm_sources(ann) == 0
    assert await _source_count(ann) == 40


async def test_opml_over_the_size_limit(hub_env, ann):
    padding = "x" * 200
    big = opml(*(f'<outline text="{padding}" xmlUrl="http://127.0.0.1:9/f/{n}"/>'
                 for n in range(12_000)))
    assert len(big) > LIMITS.max_opml_bytes
    status, body = await ann.call("POST", "/api/opml", data=big, headers=XML)
    assert_error(status, body, 413, "body_too_large")

    async def chunks():  # no Content-Length: the cap must hold while reading
        for start in range(0, len(big), 64 * 1024):
            yield big[start:start + 64 * 1024]

    status, body = await ann.call("POST", "/api/opml", data=chunks(), headers=XML)
    assert_error(status, body, 413, "body_too_large")
    assert await _source_count(ann) == 0


async def test_opml_with_100k_outlines(hub_env, ann):
    outlines = [f'<outline xmlUrl="http://127.0.0.1:9/{n}"/>' for n in range(100_000)]
    status, body = await ann.call("POST", "/api/opml", data=opml(*outlines), headers=XML)
    assert_error(status, body, 413, "body_too_large")  # 3.7 MB: refused by size first
    # Small enough in bytes but one outline too many: refused by count, naming the line.
    fits = opml(*outlines[: LIMITS.max_opml_outlines + 1])
    assert len(fits) < LIMITS.max_opml_bytes
    status, body = await ann.call("POST", "/api/opml", data=fits, headers=XML)
    error = assert_error(status, body, 400, "invalid_opml")
    assert f"more than {LIMITS.max_opml_outlines} feeds" in error["message"]
    assert f"line {LIMITS.max_opml_outlines + 3}" in error["message"]
    assert await _source_count(ann) == 0


BILLION_LAUGHS = """<!DOCTYPE opml [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
"""
EXTERNAL_ENTITY = """<!DOCTYPE opml [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
"""


@pytest.mark.parametrize("document, reason", [
    (opml('<outline title="&lol9;" xmlUrl="http://127.0.0.1:9/a"/>', head=BILLION_LAUGHS),
     "declares entities"),
    (opml('<outline title="&xxe;" xmlUrl="http://127.0.0.1:9/a"/>', head=EXTERNAL_ENTITY),
     "declares entities"),
    (opml("<outline>" * 5000 + "</outline>" * 5000), "not well-formed XML at line"),
    (b"<html><body>not opml</body></html>", "root element is <html>"),
    (b'<opml version="2.0"><head></head><body><outline xmlUrl="x"></body></opml>',
     "not well-formed XML at line 1"),
    (b"", "not well-formed"),
])
async def test_hostile_or_broken_opml(hub_env, ann, document, reason):
    status, body = await ann.call("POST", "/api/opml", data=document, headers=XML)
    error = assert_error(status, body, 400, "invalid_opml")
    assert reason in error["message"]
    assert await _source_count(ann) == 0


async def test_outlines_that_are_not_feeds_are_skipped_and_reported(hub_env, ann):
    feed = hub_env.farm.feed_url(0)
    html_page = hub_env.base + "/"  # an http URL, but a web page: the crawler reports it
    document = opml(
        f'<outline text="good" xmlUrl="{feed}"/>',
        '<outline text="js" xmlUrl="javascript:alert(1)"/>',
        '<outline text="file" xmlUrl="file:///etc/passwd"/>',
        '<outline text="ftp" xmlUrl="ftp://example.org/feed.xml"/>',
        '<outline text="relative" xmlUrl="feed.xml"/>',
        f'<outline text="twice" xmlUrl="{feed}"/>',
        '<outline text="a folder"><outline text="page" xmlUrl="' + html_page + '"/></outline>')
    status, body = await ann.call("POST", "/api/opml", data=document, headers=XML)
    assert status == 200, body
    assert body["added"] == 2
    assert sorted(s["url"] for s in body["sources"]) == sorted([feed, html_page])
    skipped = body["skipped"]
    assert len(skipped) == 5, skipped
    for line, text in ((4, "javascript:alert(1)"), (5, "file:///etc/passwd"),
                       (6, "ftp://example.org/feed.xml"), (7, "'feed.xml' is not an http(s)")):
        assert any(s.startswith(f"line {line}:") and text in s for s in skipped), (line, skipped)
    assert any(s.startswith("line 8:") and "listed twice" in s for s in skipped), skipped

    async def page_reported() -> bool:
        _status, body = await ann.call("GET", "/api/sources")
        page = next(s for s in body["sources"] if s["url"] == html_page)
        return bool(page["last_error"])

    await eventually(page_reported, timeout=60.0)
    status, body = await ann.call("GET", "/api/sources")
    by_url = {s["url"]: s for s in body["sources"]}
    assert by_url[html_page]["last_outcome"] == "not_a_feed"
    assert by_url[feed]["last_error"] == ""
