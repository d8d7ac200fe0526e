"""The kept-alive channel a node calls its peers on (mesh/peer/channel.py), against real servers on
loopback: aiohttp's (what peers run) and small raw ones that misbehave on purpose."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from feedmesh.mesh.peer.channel import Channels
from tests.mesh.peer.conftest import free_port

CLIENT = "127.0.3.201"
SERVER = "127.0.3.202"
HEADERS = {"Content-Type": "application/octet-stream", "FeedEx-Port": "1"}


def _channels(**overrides) -> Channels:
    settings = {"connect_timeout_s": 3.0, "call_timeout_s": 5.0, "max_body_bytes": 1 << 20}
    settings.update(overrides)
    return Channels(CLIENT, **settings)


async def _aiohttp_server(handler) -> tuple[web.AppRunner, tuple[str, int]]:
    app = web.Application(client_max_size=2 << 20)
    app.router.add_post("/call", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port(SERVER)
    await web.TCPSite(runner, SERVER, port).start()
    return runner, (SERVER, port)


async def test_calls_to_one_peer_share_one_connection_and_get_their_own_answers():
    peers_seen = set()

    async def echo(request: web.Request) -> web.Response:
        peers_seen.add(request.remote)
        body = await request.read()
        if body == b"empty":
            return web.Response(status=204)
        return web.Response(body=body[::-1] + request.headers["FeedEx-Port"].encode())

    runner, address = await _aiohttp_server(echo)
    channels = _channels()
    try:
        bodies = [f"call {i} ".encode() * (1 + i % 50) for i in range(200)]
        answers = await asyncio.gather(*(channels.post(address, "/call", b, HEADERS)
                                         for b in bodies))
        assert answers == [(200, b[::-1] + b"1") for b in bodies]
        assert await channels.post(address, "/call", b"empty", HEADERS) == (204, b"")
        big = bytes(range(256)) * 2000  # 512 KB each way, in many TCP segments
        assert await channels.post(address, "/call", big, HEADERS) == (200, big[::-1] + b"1")
        assert channels.connections_made == 1
        assert peers_seen == {CLIENT}  # the calls come from the node's own address
    finally:
        await channels.close()
        await runner.cleanup()


class RawServer:
    """A TCP server whose connections run ``serve(reader, writer, nth connection)``."""

    def __init__(self, serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter, int],
                                       Awaitable[None]]) -> None:
        self.serve = serve
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> tuple[str, int]:
        async def accept(reader, writer):
            self.connections += 1
            try:
                await self.serve(reader, writer, self.connections)
            finally:
                writer.close()

        port = free_port(SERVER)
        self.server = await asyncio.start_server(accept, SERVER, port)
        return SERVER, port

    async def __aexit__(self, *exc) -> None:
        assert self.server is not None
        self.server.close()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    return await reader.readexactly(length)


def _answer(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


async def test_a_call_on_a_kept_connection_the_peer_dropped_is_sent_again_on_a_new_one():
    async def serve(reader, writer, nth):
        writer.write(_answer(await _read_request(reader)))  # answers one call,
        await _read_request(reader)  # then drops the connection as the next call arrives

    async with RawServer(serve) as address:
        channels = _channels()
        try:
            assert await channels.post(address, "/call", b"first", HEADERS) == (200, b"first")
            assert await channels.post(address, "/call", b"second", HEADERS) == (200, b"second")
            assert channels.connections_made == 2
        finally:
            await channels.close()


async def test_a_peer_that_drops_a_new_connection_is_not_called_again():
    async def serve(reader, writer, nth):
        await _read_request(reader)

    async with RawServer(serve) as address:
        channels = _channels()
        try:
            with pytest.raises(ConnectionError, match="closed the connection"):
                await channels.post(address, "/call", b"x", HEADERS)
            assert channels.connections_made == 1
        finally:
            await channels.close()


async def test_a_peer_that_does_not_answer_times_out_and_the_calls_behind_fail():
    async def serve(reader, writer, nth):
        await reader.read(1 << 20)
        await asyncio.sleep(30)

    async with RawServer(serve) as address:
        channels = _channels(call_timeout_s=0.3)
        try:
            first = asyncio.ensure_future(channels.post(address, "/call", b"1", HEADERS))
            await asyncio.sleep(0)  # let the first call claim the connection first
            second = asyncio.ensure_future(channels.post(address, "/call", b"2", HEADERS))
            with pytest.raises(TimeoutError, match=r"did not answer within 0\.3 s"):
                await first
            with pytest.raises(ConnectionError, match="timed out"):
                await second
        finally:
            await channels.close()


async def test_refused_garbled_and_oversized_answers_fail_with_a_clear_error():
    channels = _channels(max_body_bytes=1000)
    try:
        with pytest.raises(ConnectionError, match="cannot connect"):
            await channels.post((SERVER, free_port(SERVER)), "/call", b"x", HEADERS)

        async def garble(reader, writer, nth):
            await _read_request(reader)
            writer.write(b"SMTP ready\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(1)

        async with RawServer(garble) as address:
            with pytest.raises(ConnectionError, match="not HTTP"):
                await channels.post(address, "/call", b"x", HEADERS)

        async def flood(reader, writer, nth):
            await _read_request(reader)
            writer.write(_answer(b"y" * 5000))
            await writer.drain()
            await asyncio.sleep(1)

        async with RawServer(flood) as address:
            with pytest.raises(ConnectionError, match="over 1000 bytes"):
                await channels.post(address, "/call", b"x", HEADERS)
    finally:
        await channels.close()


@pytest.mark.parametrize("case", [
    test_calls_to_one_peer_share_one_connection_and_get_their_own_answers,
    test_a_call_on_a_kept_connection_the_peer_dropped_is_sent_again_on_a_new_one,
    test_a_peer_that_drops_a_new_connection_is_not_called_again,
    test_a_peer_that_does_not_answer_times_out_and_the_calls_behind_fail,
    test_refused_garbled_and_oversized_answers_fail_with_a_clear_error,
], ids=lambda case: case.__name__.removeprefix("test_")[:40])
def test_on_uvloop(case):
    """The same cases on uvloop, which the emulation benchmark's workers run on (its transports
    are not asyncio's classes)."""
    pytest.importorskip("uvloop").run(case())


async def test_a_connect_that_gets_no_answer_fails_as_a_timeout_not_a_refusal():
    """A peer whose accept queue is full drops our SYN: the connect times out. The transport
    counts a TimeoutError as a timeout (the peer may be alive, only slow), a ConnectionError
    saying "cannot connect" as a refusal."""
    port = free_port(SERVER)
    listener = socket.socket()
    fillers = []
    try:
        listener.bind((SERVER, port))
        listener.listen(0)  # never accepted: the queue fills, later SYNs are dropped
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex((SERVER, port))
            fillers.append(filler)
        channels = _channels(connect_timeout_s=0.5)
        try:
            with pytest.raises(TimeoutError, match=r"cannot connect .* no answer within 0\.5 s"):
                await channels.post((SERVER, port), "/call", b"x", HEADERS)
        finally:
            await channels.close()
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
