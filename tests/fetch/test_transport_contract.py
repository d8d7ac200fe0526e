"""What every Transport must do (:mod:`feedmesh.fetch.transport`): one GET as asked, the
response as sent, nothing followed or decoded. Run against each implementation: the function
transport in-process, and aiohttp against a real server on loopback that answers with the same
function.
"""

from __future__ import annotations

import gzip
import socket
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from feedmesh.fetch import (
    AiohttpTransport,
    FetchFailure,
    HandlerResponse,
    HandlerTransport,
    Transport,
    TransportRequest,
)
from feedmesh.fetch.guard import AddressGuard
from feedmesh.fetch.transport import Timeouts
from feedmesh.model import FetchOutcome

TIMEOUTS = Timeouts(total_s=5.0, connect_s=5.0)
Handler = Callable[[TransportRequest], HandlerResponse]


def answer(request: TransportRequest) -> HandlerResponse:
    path = request.url.path
    if path == "/moved":
        return HandlerResponse(301, headers={"Location": "/elsewhere"})
    if path == "/gzip":
        return HandlerResponse(200, gzip.compress(b"hello" * 100), {"Content-Encoding": "gzip"})
    if path == "/echo":
        return HandlerResponse(200, request.headers.get("X-Probe", "").encode(),
                               {"Content-Type": "text/plain", "ETag": '"e1"'})
    if path == "/big":
        return HandlerResponse(200, bytes(range(256)) * 1024)
    return HandlerResponse(404, b"missing", reason="Not Found")


async def _aiohttp(handler: Handler) -> AsyncIterator[tuple[Transport, str]]:
    async def route(request: web.Request) -> web.Response:
        reply = handler(TransportRequest(request.url, request.headers))
        headers = {k: v for k, v in reply.headers.items() if k.lower() != "content-length"}
        return web.Response(status=reply.status, body=reply.body, headers=headers,
                            reason=reply.reason or None)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", route)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    transport = AiohttpTransport(AddressGuard(allow_networks=("127.0.0.0/8",)))
    try:
        yield transport, f"http://127.0.0.1:{port}"
    finally:
        await transport.close()
        await runner.cleanup()


async def _in_process(handler: Handler) -> AsyncIterator[tuple[Transport, str]]:
    transport = HandlerTransport(handler)
    yield transport, "http://feeds.example"
    await transport.close()


@pytest.fixture(params=["aiohttp", "function"])
async def served(request) -> AsyncIterator[tuple[Transport, str]]:
    serve = _aiohttp if request.param == "aiohttp" else _in_process
    async for pair in serve(answer):
        yield pair


async def get(transport: Transport, url: str,
              **headers: str) -> tuple[int, CIMultiDict[str], bytes]:
    response = await transport.send(TransportRequest(URL(url), headers), TIMEOUTS)
    try:
        body = b"".join([chunk async for chunk in response.chunks(4096)])
        return response.status, CIMultiDict(response.headers), body
    finally:
        await response.release()


async def test_the_request_headers_arrive_and_the_response_comes_back_as_sent(served):
    transport, base = served
    status, headers, body = await get(transport, f"{base}/echo", **{"X-Probe": "abc"})
    assert (status, body) == (200, b"abc")
    assert headers["etag"] == headers["ETag"] == '"e1"'  # names are case-insensitive
    assert headers["Content-Type"].startswith("text/plain")


async def test_a_redirect_is_returned_not_followed(served):
    transport, base = served
    status, headers, _ = await get(transport, f"{base}/moved")
    assert status == 301 and headers["Location"] == "/elsewhere"


async def test_bodies_stay_encoded_and_arrive_whole_in_chunks(served):
    transport, base = served
    _, headers, body = await get(transport, f"{base}/gzip")
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(body) == b"hello" * 100
    response = await transport.send(TransportRequest(URL(f"{base}/big"), {}), TIMEOUTS)
    sizes = [len(chunk) async for chunk in response.chunks(64 * 1024)]
    assert response.content_length == 256 * 1024 == sum(sizes) and max(sizes) <= 64 * 1024
    await response.release()


async def test_an_error_status_is_a_response_with_its_reason(served):
    transport, base = served
    response = await transport.send(TransportRequest(URL(f"{base}/nothing"), {}), TIMEOUTS)
    assert (response.status, response.reason) == (404, "Not Found")
    response.abort()  # dropping an unread body is allowed


async def test_no_response_is_a_fetch_failure_naming_the_url():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = AiohttpTransport(AddressGuard(allow_networks=("127.0.0.0/8",)))
    url = f"http://127.0.0.1:{port}/feed"
    with pytest.raises(FetchFailure) as failure:
        await transport.send(TransportRequest(URL(url), {}), TIMEOUTS)
    await transport.close()
    assert failure.value.outcome == FetchOutcome.CONNECTION_ERROR
    assert failure.value.message.startswith(url)

    def refuse(request: TransportRequest) -> HandlerResponse:
        raise FetchFailure(FetchOutcome.CONNECTION_ERROR, f"{request.url}: refused")

    with pytest.raises(FetchFailure, match="refused"):
        await HandlerTransport(refuse).send(TransportRequest(URL(url), {}), TIMEOUTS)
