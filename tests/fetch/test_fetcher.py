"""The fetcher against a real loopback server: politeness, limits, and typed failures."""

from __future__ import annotations

import asyncio
import re
import resource
import socket
import time

import msgspec
import pytest

from feedmesh import PROJECT_URL
from feedmesh.fetch import Fetcher, FetchRequest, FetchSettings, StaticResolver
from feedmesh.model import FetchOutcome

from .conftest import ETAG, FEED, LAST_MODIFIED, LOOPBACK


async def test_conditional_get_echoes_validators_exactly(server, fetcher):
    base, rec = server
    first = await fetcher.fetch(f"{base}/conditional")
    assert first.outcome == FetchOutcome.OK and first.status == 200
    assert first.body == FEED and first.decoded_bytes == len(FEED)
    assert first.etag == ETAG and first.last_modified == LAST_MODIFIED
    assert first.max_age_s == 600

    second = await fetcher.fetch(FetchRequest(url=f"{base}/conditional", etag=first.etag,
                                              last_modified=first.last_modified))
    assert second.outcome == FetchOutcome.NOT_MODIFIED and second.body == b""
    assert second.etag == ETAG and second.last_modified == LAST_MODIFIED
    sent = rec.requests[-1].headers
    assert sent["If-None-Match"] == ETAG  # weak validator and quotes untouched
    assert sent["If-Modified-Since"] == LAST_MODIFIED
    assert sent["A-IM"] == "feed"
    assert "If-None-Match" not in rec.requests[0].headers


async def test_last_modified_alone(server, fetcher):
    base, rec = server
    result = await fetcher.fetch(FetchRequest(url=f"{base}/conditional",
                                              last_modified=LAST_MODIFIED))
    assert result.outcome == FetchOutcome.NOT_MODIFIED
    assert "A-IM" not in rec.requests[-1].headers  # a delta needs an ETag to be relative to


async def test_rfc3229_delta(server, fetcher):
    base, _ = server
    result = await fetcher.fetch(FetchRequest(url=f"{base}/delta", etag='"v1"'))
    assert result.outcome == FetchOutcome.DELTA and result.status == 226
    assert result.ok and result.body == FEED and result.etag == '"v2"'


@pytest.mark.parametrize("path", ["/gzip", "/deflate", "/raw-deflate", "/br"])
async def test_compressed_bodies_are_decoded(server, fetcher, path):
    base, _ = server
    result = await fetcher.fetch(f"{base}{path}")
    assert result.outcome == FetchOutcome.OK, result.error
    assert result.body == FEED
    assert result.wire_bytes != result.decoded_bytes


async def test_accept_encoding_and_user_agent(server):
    base, rec = server
    async with Fetcher(LOOPBACK) as fetcher:
        await fetcher.fetch(FetchRequest(url=f"{base}/echo", subscribers=42))
    headers = rec.requests[-1].headers
    assert headers["Accept-Encoding"] == "gzip, deflate, br"
    assert PROJECT_URL in headers["User-Agent"] and "42 subscribers" in headers["User-Agent"]
    assert headers["User-Agent"].startswith("feedmesh/")


async def test_extra_headers_are_sent_and_checked(server):
    base, rec = server
    settings = msgspec.structs.replace(LOOPBACK, headers=(("FeedEx-Peer", "8400"),))
    async with Fetcher(settings) as fetcher:
        await fetcher.fetch(f"{base}/echo")
    assert rec.requests[-1].headers["FeedEx-Peer"] == "8400"
    for bad in (("Bad Name", "x"), ("X-Split", "a\r\nInjected: 1"), ("", "x")):
        with pytest.raises(ValueError, match=r"FetchSettings\.headers"):
            FetchSettings(headers=(bad,))


@pytest.mark.parametrize("path", ["/gzip-bomb", "/br-bomb"])
async def test_compression_bomb_is_stopped_not_inflated(server, fetcher, path):
    base, _ = server
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = await fetcher.fetch(f"{base}{path}")
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert result.outcome == FetchOutcome.TOO_LARGE
    assert "compression bomb" in result.error.message
    assert result.body == b""
    assert grown_kb < 32 * 1024  # never held the 64 MB it would inflate to


async def test_invalid_compressed_data(server, fetcher):
    base, _ = server
    result = await fetcher.fetch(f"{base}/bad-gzip")
    assert result.outcome == FetchOutcome.PROTOCOL_ERROR
    assert "invalid compressed data" in result.error.message


async def test_endless_body_is_cut_at_the_cap(server, fetcher):
    base, _ = server
    result = await fetcher.fetch(f"{base}/endless")
    assert result.outcome == FetchOutcome.TOO_LARGE
    assert "exceeds the 1048576-byte limit" in result.error.message
    assert result.wire_bytes <= LOOPBACK.max_body_bytes + 64 * 1024


async def test_declared_length_over_cap_is_refused_before_reading(server, fetcher):
    base, _ = server
    result = await fetcher.fetch(f"{base}/big-declared")
    assert result.outcome == FetchOutcome.TOO_LARGE
    assert "Content-Length 104857600" in result.error.message


@pytest.mark.parametrize("path", ["/hang", "/slow-body"])
async def test_total_deadline(server, fetcher, path):
    base, _ = server
    result = await fetcher.fetch(f"{base}{path}")
    assert result.outcome == FetchOutcome.TIMEOUT, result.error
    # Our deadline ended it, not the server (which answers after 60 s, or finishes its body after
    # 50 s): the message names the limit that fired, no longer than the total deadline.
    limit = re.search(r"within ([0-9.]+) s", result.error.message)
    assert limit and 0 < float(limit[1]) <= LOOPBACK.total_timeout_s, result.error.message


@pytest.mark.parametrize(("code", "outcome"), [
    (404, FetchOutcome.NOT_FOUND), (410, FetchOutcome.GONE), (500, FetchOutcome.SERVER_ERROR),
    (502, FetchOutcome.SERVER_ERROR), (503, FetchOutcome.SERVER_ERROR),
    (403, FetchOutcome.CLIENT_ERROR), (429, FetchOutcome.RATE_LIMITED),
])
async def test_status_codes(server, fetcher, code, outcome):
    base, _ = server
    result = await fetcher.fetch(f"{base}/status/{code}")
    assert result.outcome == outcome and result.status == code
    assert f"HTTP {code}" in result.error.message and f"/status/{code}" in result.error.message


async def test_retry_after_seconds_and_date(server, fetcher):
    base, _ = server
    result = await fetcher.fetch(f"{base}/status/429?retry=120")
    assert result.outcome == FetchOutcome.RATE_LIMITED and result.retry_after_s == 120
    assert "retry after 120 s" in result.error.message
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 3600))
    result = await fetcher.fetch(f"{base}/status/503?retry={future}")
    assert result.outcome == FetchOutcome.RATE_LIMITED
    assert 3500 < result.retry_after_s <= 3600


async def test_permanent_redirect_is_reported(server, fetcher):
    base, _ = server
    result = await fetcher.fetch(f"{base}/redirect/301?to=/conditional")
    assert result.outcome == FetchOutcome.OK
    assert result.final_url == f"{base}/conditional"
    assert result.permanent_redirect == f"{base}/conditional"
    result = await fetcher.fetch(f"{base}/redirect/308?to=/conditional")
    assert result.permanent_redirect == f"{base}/conditional"


@pytest.mark.parametrize("code", [302, 307])
async def test_temporary_redirect_is_not_permanent(server, fetcher, code):
    base, _ = server
    result = await fetcher.fetch(f"{base}/redirect/{code}?to=/conditional")
    assert result.outcome == FetchOutcome.OK and result.final_url.endswith("/conditional")
    assert result.permanent_redirect == ""


async def test_chain_moves_only_as_far_as_its_permanent_hops(server, fetcher):
    base, _ = server
    result = await fetcher.fetch(f"{base}/redirect/301?to=/redirect/302%3Fto%3D/conditional")
    assert result.outcome == FetchOutcome.OK and result.final_url == f"{base}/conditional"
    # The feed moved for good to the 301's target, which then redirects only temporarily.
    assert result.permanent_redirect == f"{base}/redirect/302?to=/conditional"
    result = await fetcher.fetch(f"{base}/redirect/302?to=/redirect/301%3Fto%3D/conditional")
    assert result.permanent_redirect == ""


async def test_redirect_loop_and_limit(server, fetcher):
    base, _ = server
    result = await fetcher.fetch(f"{base}/loop/a")
    assert result.outcome == FetchOutcome.REDIRECT_ERROR
    assert "redirect loop" in result.error.message
    assert (await fetcher.fetch(f"{base}/chain/5")).outcome == FetchOutcome.OK
    result = await fetcher.fetch(f"{base}/chain/6")
    assert result.outcome == FetchOutcome.REDIRECT_ERROR
    assert "more than 5 redirects" in result.error.message
    result = await fetcher.fetch(f"{base}/no-location")
    assert result.outcome == FetchOutcome.PROTOCOL_ERROR and "Location" in result.error.message


@pytest.mark.parametrize("target", ["http://10.1.2.3/feed", "http://169.254.169.254/latest/",
                                    "http://[::1]:9/x", "http://192.168.0.1/"])
async def test_redirect_to_private_address_is_blocked(server, target):
    base, _rec = server
    settings = FetchSettings(allow_networks=("127.0.0.1/32",), total_timeout_s=2.0)
    async with Fetcher(settings) as fetcher:
        result = await fetcher.fetch(f"{base}/redirect/302?to={target}")
    assert result.outcome == FetchOutcome.BLOCKED
    assert "refused to connect" in result.error.message
    assert result.error.message.endswith(" address")  # which kind; how to allow is the caller's


async def test_guard_blocks_loopback_by_default(server):
    base, rec = server
    async with Fetcher() as fetcher:
        result = await fetcher.fetch(f"{base}/echo")
    assert result.outcome == FetchOutcome.BLOCKED and "loopback" in result.error.message
    assert rec.requests == []  # not a single byte reached the server


async def test_guard_checks_resolved_names():
    resolver = StaticResolver({"intranet.example": "10.0.0.7", "meta.example": "169.254.169.254"})
    async with Fetcher(resolver=resolver) as fetcher:
        for host, reason in (("intranet.example", "private"), ("meta.example", "cloud metadata")):
            result = await fetcher.fetch(f"http://{host}/feed")
            assert result.outcome == FetchOutcome.BLOCKED
            assert reason in result.error.message


async def test_dns_failure_and_names_on_loopback(server):
    base, _ = server
    port = base.rsplit(":", 1)[1]
    resolver = StaticResolver({"feeds.test": "127.0.0.1"})
    async with Fetcher(LOOPBACK, resolver=resolver) as fetcher:
        ok = await fetcher.fetch(f"http://feeds.test:{port}/echo")
        missing = await fetcher.fetch("http://no-such-host.test/feed")
    assert ok.outcome == FetchOutcome.OK
    assert missing.outcome == FetchOutcome.DNS_ERROR
    assert "cannot resolve host 'no-such-host.test'" in missing.error.message


async def test_unreachable_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connections are refused
        async with Fetcher(LOOPBACK) as fetcher:
            result = await fetcher.fetch(f"http://127.0.0.1:{port}/feed")
    assert result.outcome == FetchOutcome.CONNECTION_ERROR
    assert f"cannot connect to 127.0.0.1:{port}" in result.error.message


@pytest.mark.parametrize("url", ["ftp://example.com/feed", "file:///etc/passwd", "not a url",
                                 "http:///nohost"])
async def test_invalid_urls(fetcher, url):
    result = await fetcher.fetch(url)
    assert result.outcome == FetchOutcome.INVALID_URL, result
    assert result.error.message


async def test_per_host_connections_are_capped(server):
    base, rec = server
    settings = FetchSettings(allow_networks=("127.0.0.0/8",), per_host_connections=2)
    async with Fetcher(settings) as fetcher:
        results = await asyncio.gather(*(fetcher.fetch(f"{base}/counted") for _ in range(8)))
        assert fetcher.hosts.in_flight() == 0  # every slot given back
    assert all(r.outcome == FetchOutcome.OK for r in results)
    assert rec.max_in_flight == 2


def test_settings_are_validated():
    with pytest.raises(ValueError, match="total_timeout_s"):
        FetchSettings(total_timeout_s=0)
    with pytest.raises(ValueError, match="not a CIDR block"):
        FetchSettings(allow_networks=("localhost",))
    with pytest.raises(ValueError, match="max_decoded_bytes"):
        FetchSettings(max_body_bytes=4096, max_decoded_bytes=1024)


async def test_connections_leave_from_the_source_address(server):
    base, rec = server
    settings = msgspec.structs.replace(LOOPBACK, source_address="127.0.1.77")
    async with Fetcher(settings) as fetcher:
        result = await fetcher.fetch(f"{base}/conditional")
    assert result.outcome == FetchOutcome.OK
    assert rec.requests[-1].remote == "127.0.1.77"
    async with Fetcher(LOOPBACK) as fetcher:
        await fetcher.fetch(f"{base}/conditional")
    assert rec.requests[-1].remote == "127.0.0.1"


def test_a_source_address_must_be_an_ip_address():
    with pytest.raises(ValueError, match="source_address: 'crawler-1' is not an IP address"):
        FetchSettings(source_address="crawler-1")
