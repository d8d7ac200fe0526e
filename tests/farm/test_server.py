"""The farm over real loopback HTTP: hosts, OPML, conditional GET, deltas, compression, the log."""

from __future__ import annotations

import asyncio
import gzip
import json

import brotli
import feedparser
import pytest
from lxml import etree

from feedmesh.clock import ManualClock
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.farm.testing import TEST_ORIGIN
from tests.eventually import eventually

from .helpers import fetch, find_feed

HOUR = 3600.0


@pytest.fixture
def farm_config() -> FarmConfig:
    return FarmConfig(feeds=300, seed=7, faults="none", origin=TEST_ORIGIN)


@pytest.fixture
async def manual_farm(farm_config):
    clock = ManualClock(TEST_ORIGIN)
    async with FarmServer(farm_config, clock=clock) as server:
        yield server, clock


async def test_feeds_live_on_their_own_loopback_host(farm_factory):
    async with farm_factory(feeds=9, hosts=3, faults="none") as farm:
        assert farm.addresses == ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
        assert len({url.rsplit(":", 1)[1] for url in farm.base_urls}) == 1  # one port
        for feed_id in range(9):
            status, _, body = await fetch(farm.feed_url(feed_id))
            assert status == 200 and body
            assert farm.feed_url(feed_id).startswith(farm.base_urls[feed_id % 3])
        wrong = farm.base_urls[1] + "/feeds/0"
        status, _, body = await fetch(wrong)
        assert status == 404 and b"served by 127.0.1.1" in body
        hosts = {r.host for r in farm.requests()}
        assert hosts == {"127.0.1.1", "127.0.1.2", "127.0.1.3"}


async def test_opml_lists_every_feed_with_host_title_and_format(farm):
    status, headers, body = await fetch(farm.opml_url)
    assert status == 200 and headers["Content-Type"].startswith("text/x-opml")
    outlines = etree.fromstring(body).findall(".//outline")
    assert len(outlines) == farm.config.feeds
    for outline in outlines:
        feed_id = int(outline.get("xmlUrl").rsplit("/", 1)[1])
        spec = farm.model.spec(feed_id)
        assert outline.get("xmlUrl") == farm.feed_url(feed_id)
        assert outline.get("title") == spec.title and outline.get("format") == spec.format
        assert outline.get("host") == spec.host


async def test_etag_only_feed(farm):
    feed = find_feed(farm.model, validators="etag")
    status, headers, _ = await fetch(farm.feed_url(feed))
    etag = headers["ETag"]
    assert status == 200 and "Last-Modified" not in headers
    status, headers, body = await fetch(farm.feed_url(feed), {"If-None-Match": etag})
    assert (status, body, headers["ETag"]) == (304, b"", etag)
    status, _, _ = await fetch(farm.feed_url(feed), {"If-None-Match": f'"x", W/{etag}'})
    assert status == 304  # weak comparison, lists
    status, _, _ = await fetch(farm.feed_url(feed), {"If-None-Match": '"something-else"'})
    assert status == 200


async def test_last_modified_only_feed(farm):
    feed = find_feed(farm.model, validators="last_modified")
    status, headers, _ = await fetch(farm.feed_url(feed))
    stamp = headers["Last-Modified"]
    assert status == 200 and "ETag" not in headers
    status, _, body = await fetch(farm.feed_url(feed), {"If-Modified-Since": stamp})
    assert (status, body) == (304, b"")
    older = farm.model.document(feed, farm.clock.now()).posts[0].time - 1
    from email.utils import formatdate
    status, _, _ = await fetch(farm.feed_url(feed),
                               {"If-Modified-Since": formatdate(older, usegmt=True)})
    assert status == 200
    status, _, _ = await fetch(farm.feed_url(feed), {"If-Modified-Since": "not a date"})
    assert status == 200


async def test_if_none_match_takes_precedence_over_if_modified_since(farm):
    feed = find_feed(farm.model, validators="both")
    _, headers, _ = await fetch(farm.feed_url(feed))
    stale = {"If-None-Match": '"7-0-1.1"', "If-Modified-Since": headers["Last-Modified"]}
    status, _, _ = await fetch(farm.feed_url(feed), stale)
    assert status == 200
    fresh = {"If-None-Match": headers["ETag"], "If-Modified-Since": headers["Last-Modified"]}
    assert (await fetch(farm.feed_url(feed), fresh))[0] == 304


async def test_feed_without_validators_always_sends_the_document(farm):
    feed = find_feed(farm.model, validators="none")
    status, headers, body = await fetch(farm.feed_url(feed))
    assert status == 200 and "ETag" not in headers and "Last-Modified" not in headers
    doc = farm.model.document(feed, farm.clock.now())
    conditional = {"If-None-Match": doc.etag, "If-Modified-Since": "Sun, 01 Jan 2090 00:00:00 GMT"}
    status, _, again = await fetch(farm.feed_url(feed), conditional)
    assert status == 200 and again == body


async def test_rfc3229_delta_holds_only_the_new_entries(manual_farm):
    farm, clock = manual_farm
    feed = next(i for i in range(farm.config.feeds) if farm.model.spec(i).delta
                and farm.model.spec(i).rate_per_day > 3
                and not farm.model.spec(i).format.startswith("rss0"))
    url = farm.feed_url(feed)
    _, headers, _ = await fetch(url, {"Accept-Encoding": "identity"})
    old_etag = headers["ETag"]
    old = farm.model.document(feed, clock.now())
    # Move the clock past at least two new posts (but not so far that the old version scrolls off).
    clock.set(old.valid_until + 1)
    clock.set(farm.model.document(feed, clock.now()).valid_until + 1)
    new = farm.model.document(feed, clock.now())
    fresh = [p for p in new.posts if p.order > old.newest]
    assert len(fresh) >= 2 and old.newest >= new.oldest
    status, headers, body = await fetch(url, {"If-None-Match": old_etag, "A-IM": "feed",
                                              "Accept-Encoding": "identity"})
    assert status == 226 and headers["IM"] == "feed" and headers["ETag"] == new.etag
    parsed = feedparser.parse(body) if not body.startswith(b"{") else None
    ids = ([e["id"] for e in json.loads(body)["items"]] if parsed is None
           else [e.get("id") or e.get("link") for e in parsed.entries])
    assert ids == [farm.model.guid(feed, p) if farm.model.spec(feed).format != "rss0.91"
                   else farm.model.base_url(feed) + f"/feeds/{feed}/posts/{p.key}" for p in fresh]
    # Without A-IM, or from a version the document no longer lists: the whole document.
    status, _, full = await fetch(url, {"If-None-Match": old_etag, "Accept-Encoding": "identity"})
    assert status == 200 and full == new.body
    status, _, _ = await fetch(url, {"If-None-Match": f'"7-{feed}-1.0"', "A-IM": "feed"})
    assert status == 200
    status, _, _ = await fetch(url, {"If-None-Match": new.etag, "A-IM": "feed"})
    assert status == 304


async def test_feeds_without_delta_ignore_a_im(manual_farm):
    farm, clock = manual_farm
    feed = find_feed(farm.model, delta=False, validators="etag")
    _, headers, _ = await fetch(farm.feed_url(feed))
    clock.set(farm.model.document(feed, clock.now()).valid_until + 1)
    status, headers2, _ = await fetch(farm.feed_url(feed), {"If-None-Match": headers["ETag"],
                                                            "A-IM": "feed"})
    assert status == 200 and headers2["ETag"] != headers["ETag"]


@pytest.mark.parametrize("compression, accept, expected", [
    ("gzip", "gzip, deflate", "gzip"), ("gzip", "identity", None), ("gzip", "br", None),
    ("gzip", "gzip;q=0, br", None), ("br", "gzip, deflate, br", "br"), ("br", "gzip", None),
    ("gzip+br", "gzip, br", "br"), ("gzip+br", "gzip", "gzip"), ("gzip+br", "*", "br"),
    ("none", "gzip, br", None)])
async def test_content_coding_follows_accept_encoding(farm, compression, accept, expected):
    feed = find_feed(farm.model, compression=compression)
    status, headers, body = await fetch(farm.feed_url(feed), {"Accept-Encoding": accept})
    identity = farm.model.document(feed, farm.clock.now()).body
    assert status == 200 and headers.get("Content-Encoding") == expected
    decoded = {"gzip": gzip.decompress, "br": brotli.decompress, None: bytes}[expected](body)
    assert decoded == identity and int(headers["Content-Length"]) == len(body)
    assert (headers.get("Vary") == "Accept-Encoding") == (compression != "none")


async def test_cache_control_max_age_for_some_feeds(farm):
    with_age = [i for i in range(farm.config.feeds) if farm.model.spec(i).max_age_s]
    assert 0.15 < len(with_age) / farm.config.feeds < 0.45
    _, headers, _ = await fetch(farm.feed_url(with_age[0]))
    assert headers["Cache-Control"] == f"max-age={farm.model.spec(with_age[0]).max_age_s}"
    without = next(i for i in range(farm.config.feeds) if not farm.model.spec(i).max_age_s)
    assert "Cache-Control" not in (await fetch(farm.feed_url(without)))[1]


async def test_head_has_the_headers_and_no_body(farm):
    status, headers, body = await fetch(farm.feed_url(2), method="HEAD")
    _, _get_headers, get_body = await fetch(farm.feed_url(2))
    assert status == 200 and body == b"" and headers["Content-Length"] == str(len(get_body))


async def test_request_log_records_what_politeness_tests_need(farm):
    feed = find_feed(farm.model, validators="both")
    sent = {"User-Agent": "feedmesh-test/1 (+https://example.org)", "If-None-Match": '"a"',
            "If-Modified-Since": "Sun, 01 Jan 2090 00:00:00 GMT", "A-IM": "feed",
            "Accept-Encoding": "gzip"}
    start = farm.log.next_seq
    status, _, body = await fetch(farm.feed_url(feed), sent)
    await fetch(farm.base_url + "/_farm/stats")  # the control plane is not logged
    (record,) = farm.requests(start)
    assert (record.feed, record.path, record.method, record.status) == (
        feed, f"/feeds/{feed}", "GET", status)
    assert (record.user_agent, record.if_none_match, record.if_modified_since, record.a_im,
            record.accept_encoding) == tuple(sent.values())
    assert record.body_bytes == len(body) and record.bytes_sent > len(body)
    assert record.host == "127.0.0.1" and record.farm_time == pytest.approx(farm.clock.now(), abs=5)
    _, _, raw = await fetch(f"{farm.base_url}/_farm/requests?since={start}&feed={feed}")
    listed = json.loads(raw)
    assert listed["next"] == start + 1 and listed["requests"][0]["user_agent"] == sent["User-Agent"]
    assert farm.log.count(feed=feed) == 1


async def test_truth_matches_what_the_documents_show(manual_farm):
    farm, clock = manual_farm
    feed = find_feed(farm.model, format="rss2.0", permalink_guids=False)
    clock.advance(3 * 86400)
    truth = farm.truth(feed)
    _, _, raw = await fetch(f"{farm.base_url}/_farm/truth/{feed}")
    listed = json.loads(raw)["posts"]
    assert [p["key"] for p in listed] == [p.key for p in truth]
    assert all(TEST_ORIGIN < p.time <= clock.now() for p in truth)
    _, _, body = await fetch(farm.feed_url(feed))
    shown = [e.id for e in feedparser.parse(body).entries]
    newest_truth = [farm.model.guid(feed, p) for p in reversed(truth)][:len(shown)]
    assert shown[:len(newest_truth)] == newest_truth
    assert (await fetch(f"{farm.base_url}/_farm/truth/99999"))[0] == 404


async def test_stats_and_spec_endpoints(farm):
    await fetch(farm.feed_url(0))
    stats = json.loads((await fetch(farm.base_url + "/_farm/stats"))[2])
    assert stats["feeds"] == farm.config.feeds and stats["requests"] >= 1
    assert stats["by_status"]["200"] >= 1 and stats["cache"]["documents"] >= 1
    spec = json.loads((await fetch(farm.base_url + "/_farm/spec/0"))[2])
    assert spec["url"] == farm.feed_url(0) and spec["fault"] == "none"


async def test_date_header_is_farm_time(manual_farm):
    farm, clock = manual_farm
    clock.set(1_000_000_000.0)
    _, headers, _ = await fetch(farm.feed_url(0))
    assert headers["Date"] == "Sun, 09 Sep 2001 01:46:40 GMT"


async def test_keep_alive_pipelining_and_bad_requests(farm):
    host, port = farm.addresses[0], farm.port
    reader, writer = await asyncio.open_connection(host, port)

    async def read_response(with_body: bool = True) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        if with_body:
            await reader.readexactly(length)
        return head

    writer.write(b"GET /feeds/1 HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"HEAD /feeds/2 HTTP/1.1\r\nHost: x\r\n\r\n")
    first = await read_response()
    second = await read_response(with_body=False)
    assert first.startswith(b"HTTP/1.1 200") and second.startswith(b"HTTP/1.1 200")
    writer.write(b"POST /feeds/1 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await read_response()).startswith(b"HTTP/1.1 405")
    writer.write(b"NONSENSE\r\n\r\n")
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 400")
    assert await reader.read() == b""  # and the farm closed that connection
    writer.close()


async def test_same_config_same_documents_in_two_farms(farm_config):
    bodies = []
    for _ in range(2):
        async with FarmServer(farm_config, clock=ManualClock(TEST_ORIGIN + 5000)) as farm:
            _, _, body = await fetch(farm.feed_url(4))
            bodies.append(body.replace(str(farm.port).encode(), b"PORT"))
    assert bodies[0] == bodies[1]


async def test_speed_runs_the_farm_clock_faster(farm_factory):
    from email.utils import parsedate_to_datetime
    async with farm_factory(feeds=5, faults="none", speed=86_400.0) as farm:  # a day per second
        assert farm.origin == pytest.approx(TEST_ORIGIN, abs=86_400)
        _, first, _ = await fetch(farm.feed_url(0))

        async def a_quarter_day_on() -> bool:  # by the farm's own Date (its clock may be in
            _, later, _ = await fetch(farm.feed_url(0))  # another process, started later)
            elapsed = parsedate_to_datetime(later["Date"]) - parsedate_to_datetime(first["Date"])
            return elapsed.total_seconds() > 0.25 * 86_400

        await eventually(a_quarter_day_on, what="the farm's Date a quarter of a day on")
        records = farm.requests(feed=0)
        # Farm time runs at the farm's speed, as the log's two clocks show for the same requests.
        farm_s = records[-1].farm_time - records[0].farm_time
        real_s = records[-1].real_time - records[0].real_time
        assert farm_s / real_s == pytest.approx(86_400.0, rel=1e-3)


async def test_request_log_pages_over_http(farm):
    for feed_id in range(5):
        await fetch(farm.feed_url(feed_id))
    seen, since = [], 0
    while True:
        page = json.loads((await fetch(f"{farm.base_url}/_farm/requests?since={since}&limit=2"))[2])
        seen += [r["feed"] for r in page["requests"]]
        if not page["requests"]:
            break
        since = page["next"]
    assert seen == [0, 1, 2, 3, 4] and page["dropped"] == 0


async def test_an_entrys_link_opens_its_article(manual_farm):
    """A reader clicks an entry: its link answers 200 with a small page of that article (issue
    33, item 15); a post not yet made or an unknown key answers 404."""
    farm, clock = manual_farm
    clock.advance(2 * 86400)
    for fmt in ("rss2.0", "atom1.0"):
        feed = find_feed(farm.model, format=fmt)
        _, _, body = await fetch(farm.feed_url(feed))
        entries = feedparser.parse(body).entries
        assert entries
        for entry in entries[:3]:
            status, headers, page = await fetch(entry.link)
            assert status == 200, (entry.link, page[:200])
            assert headers["Content-Type"] == "text/html; charset=utf-8"
            title = etree.HTML(page).findtext(".//h1")
            assert title == entry.title
            assert f"/feeds/{feed}".encode() in page
    feed = find_feed(farm.model, format="rss2.0")
    future = farm.model.process(feed).posts_between(clock.now(), clock.now() + 30 * 86400)[0]
    base = f"{farm.model.base_url(feed)}/feeds/{feed}/posts"
    assert (await fetch(f"{base}/{future.key}"))[0] == 404
    for key in ("0.999999", "x.1", "1", "1.2.3.4", "99999999999999.1"):
        assert (await fetch(f"{base}/{key}"))[0] == 404, key
    assert (await fetch(f"{base.rsplit('/posts', 1)[0]}/moved/{future.key}"))[0] == 404
