"""Every fault, over real loopback HTTP. Redirect targets outside loopback are read, never
followed."""

from __future__ import annotations

import asyncio
import calendar
import struct
import time
import zlib
from email.utils import parsedate_to_datetime

import aiohttp
import feedparser
import pytest
from lxml import etree

from feedmesh.clock import ManualClock
from feedmesh.farm import FarmConfig, FarmServer, Fault
from feedmesh.farm.faultbodies import gzip_bomb
from feedmesh.farm.testing import TEST_ORIGIN
from tests.eventually import eventually

from .helpers import fetch

FAULTS = [f for f in Fault if f is not Fault.NONE]


def fault_config(**extra) -> FarmConfig:
    """Feed i (for i < len(FAULTS)) has FAULTS[i]; the rest are healthy. All RSS 2.0."""
    overrides = {i: fault.value for i, fault in enumerate(FAULTS)}
    fields = {"feeds": len(FAULTS) + 4, "seed": 7, "faults": "none", "fault_overrides": overrides,
              "format_mix": {"rss2.0": 1.0}, "compression_mix": {"none": 1.0},
              "origin": TEST_ORIGIN, "slow_delay_s": 0.3, "trickle_bytes": 512,
              "trickle_interval_s": 0.01, "bomb_bytes": 64 << 20}
    fields.update(extra)
    return FarmConfig(**fields)


def feed_of(fault: Fault) -> int:
    return FAULTS.index(fault)


@pytest.fixture
async def faulty():
    clock = ManualClock(TEST_ORIGIN)
    async with FarmServer(fault_config(), clock=clock) as server:
        yield server


def test_every_fault_kind_is_in_the_default_mix():
    from feedmesh.farm.faults import DEFAULT_FAULT_MIX
    assert set(DEFAULT_FAULT_MIX) == set(FAULTS)


async def test_slow_response_delays_the_headers(faulty):
    url = faulty.feed_url(feed_of(Fault.SLOW))
    started = time.perf_counter()
    status, _, body = await fetch(url)
    assert status == 200 and body and time.perf_counter() - started >= 0.29
    with pytest.raises(asyncio.TimeoutError):
        await fetch(url, timeout=0.1)


async def test_slow_body_trickles(faulty):
    feed = feed_of(Fault.SLOW_BODY)
    started = time.perf_counter()
    status, headers, body = await fetch(faulty.feed_url(feed))
    pieces = len(body) // 512
    assert status == 200 and body == faulty.model.document(feed, faulty.clock.now()).body
    assert int(headers["Content-Length"]) == len(body)
    assert time.perf_counter() - started >= 0.9 * pieces * 0.01


async def test_timeout_never_answers_and_is_logged(faulty):
    feed = feed_of(Fault.TIMEOUT)
    with pytest.raises(asyncio.TimeoutError):
        await fetch(faulty.feed_url(feed), timeout=0.3)
    (record,) = await eventually(lambda: faulty.requests(feed=feed), what="the request is logged")
    assert record.status == 0 and record.fault == "timeout"


@pytest.mark.parametrize("fault, status", [(Fault.HTTP_500, 500), (Fault.HTTP_502, 502),
                                           (Fault.HTTP_503, 503), (Fault.NOT_FOUND, 404),
                                           (Fault.GONE, 410)])
async def test_error_statuses(faulty, fault, status):
    got, headers, _ = await fetch(faulty.feed_url(feed_of(fault)))
    assert got == status
    if status == 503:
        assert headers["Retry-After"] == "120"


async def test_rate_limit_until_the_client_waits_retry_after(faulty):
    url = faulty.feed_url(feed_of(Fault.RATE_LIMIT))
    clock = faulty.clock
    status, headers, _ = await fetch(url)
    assert (status, headers["Retry-After"]) == (429, "120")
    clock.advance(60)
    status, headers, _ = await fetch(url)
    assert (status, headers["Retry-After"]) == (429, "60")
    clock.advance(61)
    assert (await fetch(url))[0] == 200
    assert (await fetch(url))[0] == 429  # too soon again


async def test_rate_limit_with_an_http_date(faulty):
    status, headers, _ = await fetch(faulty.feed_url(feed_of(Fault.RATE_LIMIT_DATE)))
    assert status == 429
    when = parsedate_to_datetime(headers["Retry-After"]).timestamp()
    assert when == pytest.approx(faulty.clock.now() + 120, abs=1)


@pytest.mark.parametrize("fault, status", [(Fault.REDIRECT_301, 301), (Fault.REDIRECT_302, 302),
                                           (Fault.REDIRECT_307, 307), (Fault.REDIRECT_308, 308)])
async def test_redirects_lead_to_a_stable_path_serving_the_same_feed(faulty, fault, status):
    feed = feed_of(fault)
    got, headers, _ = await fetch(faulty.feed_url(feed))
    assert got == status and headers["Location"] == faulty.feed_url(feed) + "/moved"
    got, _, body = await fetch(headers["Location"])
    assert got == 200 and body == faulty.model.document(feed, faulty.clock.now()).body
    assert (await fetch(faulty.feed_url(len(FAULTS)) + "/moved"))[0] == 404  # healthy: not moved


async def test_redirect_loop(faulty):
    url = faulty.feed_url(feed_of(Fault.REDIRECT_LOOP))
    seen = []
    for _ in range(4):
        status, headers, _ = await fetch(url)
        assert status == 302
        seen.append(url)
        url = headers["Location"]
    assert seen[0] == seen[2] and seen[1] == seen[3] and seen[0] != seen[1]


async def test_redirect_to_a_private_address(faulty):
    feed = feed_of(Fault.REDIRECT_PRIVATE)
    status, headers, _ = await fetch(faulty.feed_url(feed))
    expected = "http://10.1.2.3/" if feed % 2 == 0 else "http://169.254.169.254/"
    assert status == 302 and headers["Location"].startswith(expected)


async def test_malformed_xml_is_recoverable_but_not_well_formed(faulty):
    status, _, body = await fetch(faulty.feed_url(feed_of(Fault.MALFORMED)))
    assert status == 200
    with pytest.raises(etree.XMLSyntaxError):
        etree.fromstring(body)
    parsed = feedparser.parse(body)
    assert parsed.bozo and len(parsed.entries) >= 1


async def test_html_instead_of_a_feed(faulty):
    status, headers, body = await fetch(faulty.feed_url(feed_of(Fault.HTML)))
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert body.startswith(b"<!DOCTYPE html>") and feedparser.parse(body).version == ""


async def test_endless_body_keeps_coming(faulty):
    feed = feed_of(Fault.ENDLESS)
    async with (
        aiohttp.ClientSession() as session,
        session.get(faulty.feed_url(feed)) as response,
    ):
        assert response.status == 200 and "Content-Length" not in response.headers
        assert response.headers["Transfer-Encoding"] == "chunked"
        received = 0
        async for chunk in response.content.iter_chunked(65536):
            received += len(chunk)
            if received > 4_000_000:
                break
    assert received > 4_000_000
    await eventually(lambda: faulty.requests(feed=feed)[0].body_bytes >= 4_000_000,
                     what="the request log counts what was sent")


async def test_hundred_megabyte_body(faulty):
    async with (
        aiohttp.ClientSession() as session,
        session.get(faulty.feed_url(feed_of(Fault.HUGE))) as response,
    ):
        assert int(response.headers["Content-Length"]) == 100_000_000
        received = 0
        first = b""
        async for chunk in response.content.iter_chunked(1 << 20):
            first = first or chunk
            received += len(chunk)
    assert received == 100_000_000 and first.startswith(b"<?xml")


async def test_gzip_bomb_is_tiny_on_the_wire_and_huge_inflated(faulty):
    status, headers, body = await fetch(faulty.feed_url(feed_of(Fault.GZIP_BOMB)),
                                        {"Accept-Encoding": "gzip"})
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    inflater = zlib.decompressobj(31)
    inflated = 0
    data = body
    while data:
        inflated += len(inflater.decompress(data, 1 << 22))
        data = inflater.unconsumed_tail
    inflated += len(inflater.flush())
    assert inflated >= 64 << 20 and inflated > 900 * len(body) and inflater.eof


def test_default_gzip_bomb_declares_gigabytes():
    bomb = gzip_bomb(2 << 30)
    (size,) = struct.unpack("<I", bomb[-4:])
    assert len(bomb) < 3_000_000 and size >= (2 << 30) % (1 << 32)  # ISIZE is the size mod 2**32


async def test_wrong_charset_declares_utf8_but_is_windows_1252(faulty):
    _status, headers, body = await fetch(faulty.feed_url(feed_of(Fault.WRONG_CHARSET)))
    assert "utf-8" in headers["Content-Type"] and b'encoding="utf-8"' in body[:60]
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")
    assert "\u201c" in body.decode("cp1252")


async def test_utf16_with_byte_order_mark(faulty):
    _status, _, body = await fetch(faulty.feed_url(feed_of(Fault.UTF16)))
    assert body[:2] == b"\xff\xfe"
    text = body.decode("utf-16")
    assert text.startswith('<?xml version="1.0" encoding="UTF-16"?>')
    parsed = feedparser.parse(body)
    assert parsed.version == "rss20" and parsed.entries


async def test_changing_guids_on_every_fetch(faulty):
    url = faulty.feed_url(feed_of(Fault.CHANGING_GUIDS))
    first = feedparser.parse((await fetch(url))[2]).entries
    second = feedparser.parse((await fetch(url))[2]).entries
    assert [e.title for e in first] == [e.title for e in second]
    assert not {e.id for e in first} & {e.id for e in second}


async def test_duplicate_guids(faulty):
    response = await fetch(faulty.feed_url(feed_of(Fault.DUPLICATE_GUIDS)))
    entries = feedparser.parse(response[2]).entries
    assert len(entries) >= 2 and len({e.id for e in entries}) == 1


async def test_missing_dates(faulty):
    _, _, body = await fetch(faulty.feed_url(feed_of(Fault.MISSING_DATES)))
    parsed = feedparser.parse(body)
    assert parsed.entries and b"<pubDate>" not in body and b"<lastBuildDate>" not in body


async def test_future_dates(faulty):
    feed = feed_of(Fault.FUTURE_DATES)
    parsed = feedparser.parse((await fetch(faulty.feed_url(feed)))[2])
    posts = faulty.model.document(feed, faulty.clock.now()).posts
    assert len(parsed.entries) == len(posts) >= 1
    for entry, post in zip(parsed.entries, posts, strict=True):
        assert calendar.timegm(entry.published_parsed) == post.time + 365 * 86400


async def test_flood_serves_ten_thousand_new_entries_at_once(faulty):
    feed = feed_of(Fault.FLOOD)
    assert faulty.model.cached(feed, faulty.clock.now()) is not None  # rendered before serving
    _, _, body = await fetch(faulty.feed_url(feed))
    items = etree.fromstring(body).findall("./channel/item")
    assert len(items) == 10_000 and len({i.findtext("guid") for i in items}) == 10_000
    assert len({i.findtext("pubDate") for i in items}) == 1
    assert len(faulty.truth(feed, since=TEST_ORIGIN - 400 * 86400)) % 10_000 == 0
    # The next burst is rendered off the event loop: other feeds keep being answered meanwhile.
    faulty.clock.set(faulty.model.cached(feed, faulty.clock.now()).valid_until + 1)
    asked = len(faulty.requests())
    flood = asyncio.ensure_future(fetch(faulty.feed_url(feed)))
    await eventually(lambda: [r.status for r in faulty.requests(asked, feed=feed)] == [0],
                     what="the flood request arrived and is being rendered")
    healthy = await fetch(faulty.feed_url(len(FAULTS)))
    assert healthy[0] == 200 and not flood.done()
    status, _, again = await flood
    assert status == 200 and again != body


async def test_default_mix_spreads_faults_by_share(farm_factory):
    async with farm_factory(feeds=20_000, faults="default") as farm:
        faults = farm.model.catalog.faults
        share = sum(f is not Fault.NONE for f in faults) / len(faults)
        assert 0.09 < share < 0.14
        assert 0.015 < faults.count(Fault.NOT_FOUND) / len(faults) < 0.025


async def test_changing_guid_feeds_never_answer_304(faulty):
    url = faulty.feed_url(feed_of(Fault.CHANGING_GUIDS))
    _, headers, _ = await fetch(url)
    assert "ETag" not in headers and "Last-Modified" not in headers
    status, _, _ = await fetch(url, {"If-Modified-Since": "Sun, 01 Jan 2090 00:00:00 GMT"})
    assert status == 200
