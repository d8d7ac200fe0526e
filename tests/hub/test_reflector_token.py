"""The reflector's internal API asks for its bearer token, on a real loopback socket: attacked as
another user of the machine would (no token, a wrong one, a prefix of the right one, bytes that
are not ASCII), then used as the hub's processes do, with the token read from a file 0600."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from feedmesh.bus.memory import MemoryBus
from feedmesh.clock import ManualClock
from feedmesh.compose.lifecycle import application
from feedmesh.compose.reflector import ReflectorRole
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector_api import PREFIX
from feedmesh.hub.reflector_client import ReflectorClient, ReflectorUnavailable
from feedmesh.hub.tiers.reflector import Reflector
from feedmesh.secret_file import SecretFileError, new_token, read_token, write_secret
from feedmesh.store.sqlite_reflector import SQLiteReflectorLog


@pytest.fixture
async def guarded(tmp_path):
    """A reflector holding feed 1, its API on a loopback port asking for the token in
    ``tmp_path/secrets/reflector.token``; yields the server, the token file and the token."""
    token_file = write_secret(tmp_path / "secrets" / "reflector.token", new_token() + b"\n")
    token = read_token(token_file, "reflector token")
    reflector = Reflector(0, SQLiteReflectorLog(tmp_path / "r.db"), MemoryBus(),
                          ManualClock(100.0), HubMetrics())
    reflector.register(1, keep=10, generation=0, modified=1.0)
    role = ReflectorRole(reflector, state=None, metrics=HubMetrics(), api=True,  # type: ignore[arg-type]
                         token=token)
    role.ready.set()  # as its process serves it once loaded
    server = TestServer(application([role]), host="127.0.0.1")
    await server.start_server()
    yield server, token_file, token
    await server.close()
    reflector.close()


async def raw_get(server: TestServer, path: str, authorization: bytes | None) -> tuple[int, bytes]:
    """A GET written byte by byte (an HTTP client would refuse a header that is not ASCII)."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    request = b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    if authorization is not None:
        request += b"Authorization: " + authorization + b"\r\n"
    writer.write(request + b"\r\n")
    await writer.drain()
    answer = await reader.read()
    writer.close()
    status = int(answer.split(b" ", 2)[1])
    return status, answer


@pytest.mark.parametrize("path", [PREFIX + "/feeds/1/items", PREFIX + "/feeds/1/0",
                                  PREFIX + "/watermarks", PREFIX + "/status", "/metrics"])
async def test_every_path_answers_401_without_the_token(guarded, path):
    server, _, token = guarded
    wrong = bytearray(token)
    wrong[-1] ^= 1
    for authorization in (None, b"", b"Bearer", b"Bearer " + bytes(wrong),
                          b"Bearer " + token[:-1], b"Bearer " + token + b"x", token,
                          b"bearer " + token, b"Bearer \xff\xfe" + token[2:],
                          "Bearer é".encode() + token):
        status, answer = await raw_get(server, path, authorization)
        assert status == 401, (authorization, answer[:200])
        assert b"WWW-Authenticate: Bearer" in answer
        assert len(answer) < 400  # a stranger earns a few hundred bytes, nothing looked up
    assert (await raw_get(server, path, b"Bearer " + token))[0] == 200


async def test_a_post_without_the_token_is_refused_before_its_body_is_read(guarded):
    server, _, _ = guarded
    async with aiohttp.ClientSession() as session, session.post(
            str(server.make_url(PREFIX + "/versions")), data=b"\x91\x92\x01\x00") as answer:
        assert answer.status == 401


async def test_the_client_with_the_token_from_its_file_reads_the_feed(guarded):
    server, token_file, _ = guarded
    client = ReflectorClient(0, str(server.make_url("")),
                             token=read_token(token_file, "reflector token"))
    try:
        assert await client.items(1) == []
        assert (await client.feed_version(1, 0)).modified == 1.0
        assert await client.feed_versions([(1, 0), (2, 0)]) == [
            await client.feed_version(1, 0), None]
    finally:
        await client.close()


async def test_a_client_without_the_token_is_told_it_was_refused(guarded):
    server, _, _ = guarded
    for token in (None, new_token()):
        client = ReflectorClient(0, str(server.make_url("")), token=token)
        try:
            with pytest.raises(ReflectorUnavailable, match="answered 401"):
                await client.items(1)
        finally:
            await client.close()


def test_a_token_file_others_can_read_is_refused(tmp_path):
    path = write_secret(tmp_path / "reflector.token", new_token())
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    path.chmod(0o640)
    with pytest.raises(SecretFileError, match=r"others may read it \(mode 0640\)"):
        read_token(path, "reflector token")
    path.chmod(0o600)
    path.write_bytes(b"short\n")
    with pytest.raises(SecretFileError, match="too short"):
        read_token(path, "reflector token")
    with pytest.raises(SecretFileError, match="cannot open it"):
        read_token(tmp_path / "missing", "reflector token")
