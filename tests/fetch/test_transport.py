"""The fetcher over a transport that is a function: everything a polite fetch decides (validators,
redirects hop by hop, decoding and its caps, the guard on IP literals, what a status means) holds
without a socket."""

from __future__ import annotations

import gzip

from feedmesh.fetch import (
    Fetcher,
    FetchFailure,
    FetchRequest,
    FetchSettings,
    HandlerResponse,
    HandlerTransport,
    TransportRequest,
)
from feedmesh.model import FetchOutcome

FEED = b'<rss version="2.0"><channel><title>t</title></channel></rss>'


def site(request: TransportRequest) -> HandlerResponse:
    path = request.url.path
    if path == "/feed":
        if request.headers.get("If-None-Match") == '"v1"':
            return HandlerResponse(304, headers={"ETag": '"v1"'})
        return HandlerResponse(200, FEED, {"ETag": '"v1"', "Content-Type": "application/rss+xml"})
    if path == "/moved":
        return HandlerResponse(301, headers={"Location": "/feed"})
    if path == "/gzip":
        return HandlerResponse(200, gzip.compress(FEED), {"Content-Encoding": "gzip"})
    if path == "/bomb":
        return HandlerResponse(200, gzip.compress(b"\0" * 4_000_000),
                               {"Content-Encoding": "gzip"})
    if path == "/down":
        raise FetchFailure(FetchOutcome.CONNECTION_ERROR, f"{request.url}: refused (played)")
    return HandlerResponse(404, b"no")


async def test_conditional_get_and_redirects_without_a_socket():
    requests: list[TransportRequest] = []

    def recorded(request: TransportRequest) -> HandlerResponse:
        requests.append(request)
        return site(request)

    async with Fetcher(transport=HandlerTransport(recorded)) as fetcher:
        first = await fetcher.fetch("http://feeds.example/moved")
        assert first.outcome == FetchOutcome.OK and first.body == FEED
        assert first.permanent_redirect == "http://feeds.example/feed" and first.etag == '"v1"'
        again = await fetcher.fetch(FetchRequest(url="http://feeds.example/feed", etag='"v1"'))
        assert again.outcome == FetchOutcome.NOT_MODIFIED
    assert [str(r.url) for r in requests] == ["http://feeds.example/moved",
                                              "http://feeds.example/feed",
                                              "http://feeds.example/feed"]
    assert requests[-1].headers["If-None-Match"] == '"v1"'
    assert requests[0].headers["User-Agent"].startswith("feedmesh/")


async def test_decoding_caps_and_failures_hold_for_any_transport():
    settings = FetchSettings(max_body_bytes=64 * 1024, max_decoded_bytes=1024 * 1024)
    async with Fetcher(settings, transport=HandlerTransport(site)) as fetcher:
        assert (await fetcher.fetch("http://feeds.example/gzip")).body == FEED
        bomb = await fetcher.fetch("http://feeds.example/bomb")
        assert bomb.outcome == FetchOutcome.TOO_LARGE and "compression bomb" in bomb.error.message
        down = await fetcher.fetch("http://feeds.example/down")
        assert down.outcome == FetchOutcome.CONNECTION_ERROR
        assert down.error.message == "http://feeds.example/down: refused (played)"
        assert (await fetcher.fetch("http://feeds.example/nope")).outcome == \
            FetchOutcome.NOT_FOUND


async def test_the_address_guard_still_refuses_ip_literals():
    called = []
    async with Fetcher(transport=HandlerTransport(lambda r: called.append(r) or site(r))) as f:
        result = await f.fetch("http://127.0.0.1/feed")
    assert result.outcome == FetchOutcome.BLOCKED and "loopback" in result.error.message
    assert called == []  # refused before anything was sent


async def test_an_async_handler_is_awaited():
    async def handler(request: TransportRequest) -> HandlerResponse:
        return HandlerResponse(200, FEED)

    async with Fetcher(transport=HandlerTransport(handler)) as fetcher:
        assert (await fetcher.fetch("http://feeds.example/x")).body == FEED
