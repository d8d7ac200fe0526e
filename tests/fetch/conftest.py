"""A real HTTP server on loopback whose routes misbehave in every way a feed server can."""

from __future__ import annotations

import asyncio
import functools
import gzip
import zlib
from collections.abc import AsyncIterator

import brotli
import pytest
from aiohttp import web

from feedmesh.fetch import Fetcher, FetchSettings

FEED = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
        b"<item><guid>1</guid><title>one</title></item></channel></rss>")
ETAG = 'W/"v1-abc"'
LAST_MODIFIED = "Sun, 22 Nov 2026 04:00:00 GMT"


@functools.cache
def _bomb(coding: str) -> bytes:
    """64 MB of zeros, compressed once per test process (kilobytes on the wire)."""
    zeros = b"\0" * (64 * 1024 * 1024)
    if coding == "gzip":
        return gzip.compress(zeros, compresslevel=6)
    return brotli.compress(zeros, quality=1)


class Recorder:
    def __init__(self) -> None:
        self.requests: list[web.Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.starts: list[float] = []


def build_app(rec: Recorder) -> web.Application:
    async def record(request: web.Request) -> None:
        rec.requests.append(request)

    async def conditional(request: web.Request) -> web.Response:
        await record(request)
        if request.headers.get("If-None-Match") == ETAG:
            return web.Response(status=304, headers={"ETag": ETAG})
        if request.headers.get("If-Modified-Since") == LAST_MODIFIED:
            return web.Response(status=304)
        return web.Response(body=FEED, content_type="application/rss+xml",
                            headers={"ETag": ETAG, "Last-Modified": LAST_MODIFIED,
                                     "Cache-Control": "public, max-age=600"})

    async def delta(request: web.Request) -> web.Response:
        await record(request)
        if request.headers.get("A-IM") == "feed" and request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=226, body=FEED, headers={"IM": "feed", "ETag": '"v2"'})
        return web.Response(body=FEED, headers={"ETag": '"v1"'})

    def encoded(coding: str, data: bytes) -> web.Response:
        return web.Response(body=data, headers={"Content-Encoding": coding,
                                                "Content-Type": "text/xml"})

    async def gz(request: web.Request) -> web.Response:
        await record(request)
        return encoded("gzip", gzip.compress(FEED))

    async def deflate(request: web.Request) -> web.Response:
        return encoded("deflate", zlib.compress(FEED))

    async def raw_deflate(request: web.Request) -> web.Response:
        c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        return encoded("deflate", c.compress(FEED) + c.flush())

    async def br(request: web.Request) -> web.Response:
        return encoded("br", brotli.compress(FEED))

    bomb = _bomb("gzip")

    async def gzip_bomb(request: web.Request) -> web.Response:
        return encoded("gzip", bomb)

    brotli_bomb = _bomb("br")

    async def br_bomb(request: web.Request) -> web.Response:
        return encoded("br", brotli_bomb)

    async def bad_gzip(request: web.Request) -> web.Response:
        return encoded("gzip", b"this is not gzip at all")

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/xml"})
        await response.prepare(request)
        chunk = b"<item>" * 10000
        try:
            while True:
                await response.write(chunk)
        except (ConnectionError, RuntimeError):
            pass
        return response

    async def slow_body(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/xml"})
        await response.prepare(request)
        try:
            for _ in range(1000):
                await response.write(b"<")
                await asyncio.sleep(0.05)
        except (ConnectionError, RuntimeError):
            pass
        return response

    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(60)
        return web.Response(text="late")

    async def big_declared(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": str(100 * 1024 * 1024)})
        await response.prepare(request)
        return response

    async def status(request: web.Request) -> web.Response:
        code = int(request.match_info["code"])
        headers = {}
        if "retry" in request.query:
            headers["Retry-After"] = request.query["retry"]
        return web.Response(status=code, text="nope", headers=headers)

    async def redirect(request: web.Request) -> web.Response:
        await record(request)
        code = int(request.match_info["code"])
        return web.Response(status=code, headers={"Location": request.query["to"]})

    async def loop_a(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "/loop/b"})

    async def loop_b(request: web.Request) -> web.Response:
        return web.Response(status=301, headers={"Location": "/loop/a"})

    async def chain(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n == 0:
            return web.Response(body=FEED)
        return web.Response(status=301, headers={"Location": f"/chain/{n - 1}"})

    async def no_location(request: web.Request) -> web.Response:
        return web.Response(status=301)

    async def headers_echo(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(body=FEED)

    async def counted(request: web.Request) -> web.Response:
        rec.in_flight += 1
        rec.max_in_flight = max(rec.max_in_flight, rec.in_flight)
        rec.starts.append(asyncio.get_running_loop().time())
        try:
            await asyncio.sleep(0.05)
            return web.Response(body=FEED)
        finally:
            rec.in_flight -= 1

    app = web.Application()
    app.add_routes([
        web.get("/conditional", conditional), web.get("/delta", delta), web.get("/gzip", gz),
        web.get("/deflate", deflate), web.get("/raw-deflate", raw_deflate), web.get("/br", br),
        web.get("/gzip-bomb", gzip_bomb), web.get("/br-bomb", br_bomb),
        web.get("/bad-gzip", bad_gzip), web.get("/endless", endless),
        web.get("/slow-body", slow_body), web.get("/hang", hang),
        web.get("/big-declared", big_declared), web.get("/status/{code}", status),
        web.get("/redirect/{code}", redirect), web.get("/loop/a", loop_a),
        web.get("/loop/b", loop_b), web.get("/chain/{n}", chain),
        web.get("/no-location", no_location), web.get("/echo", headers_echo),
        web.get("/counted", counted),
    ])
    return app


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, Recorder]]:
    rec = Recorder()
    runner = web.AppRunner(build_app(rec), handle_signals=False, shutdown_timeout=0.25)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", rec
    finally:
        await runner.cleanup()


LOOPBACK = FetchSettings(allow_networks=("127.0.0.0/8",), total_timeout_s=2.0,
                         connect_timeout_s=1.0, max_body_bytes=1024 * 1024,
                         max_decoded_bytes=4 * 1024 * 1024)


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(LOOPBACK) as f:
        yield f
