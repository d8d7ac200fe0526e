"""Log lines are one event each: a request the web server cannot parse is one warning line."""

from __future__ import annotations

import asyncio
import io
import logging

import pytest
from aiohttp import web

from feedmesh.logs import setup_logging


@pytest.fixture
def log_stream():
    stream = io.StringIO()
    setup_logging("info", stream)
    yield stream
    for name in ("feedmesh", "aiohttp.server"):
        logger = logging.getLogger(name)
        logger.handlers[:], logger.filters[:], logger.propagate = [], [], True


async def test_a_request_that_cannot_be_parsed_is_one_line(log_stream):
    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", ok)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Probe: \x00\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(4096), 10)
        writer.close()
    finally:
        await runner.cleanup()
    assert answer.split(b" ", 2)[1] == b"400"
    lines = [line for line in log_stream.getvalue().splitlines() if line]
    assert len(lines) == 1, lines
    assert "level=warning" in lines[0] and "malformed_request" in lines[0]
    assert "Traceback" not in lines[0] and "Invalid header value" in lines[0]
