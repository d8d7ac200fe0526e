"""A peer refuses bad calls on its socket with a clear error and counts them against the sender:
bytes that are not a FeedEx message, bodies over the cap, floods from one host."""

from __future__ import annotations

import aiohttp
import msgspec

from feedmesh.mesh.feedex import decode, encode
from feedmesh.mesh.feedex.messages import (
    MAX_MESSAGE_BYTES,
    Bundle,
    Entry,
    Error,
    GetNeighbors,
    PutEntries,
)
from feedmesh.mesh.peer import TransportSettings
from feedmesh.mesh.peer.transport import PATH, PORT_HEADER
from tests.mesh.peer.conftest import BUSY, LAZY

ATTACKER = "127.0.3.99"
ATTACKER_PORT = 9999


def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(ATTACKER, 0)))


async def _post(session, url: str, body: bytes) -> tuple[int, Error | None]:
    async with session.post(url, data=body, headers={PORT_HEADER: str(ATTACKER_PORT)}) as r:
        data = await r.read()
    error = decode(data).body if data else None
    return r.status, error


async def test_malformed_and_oversized_calls_are_refused_and_counted(mesh):
    peer = await mesh.peer(0, [BUSY[0]], LAZY)
    url = peer.feedex.transport.url + PATH
    node = peer.feedex.node
    async with _session() as session:
        status, error = await _post(session, url, b"\x93not feedex")
        assert status == 400 and isinstance(error, Error) and error.code == "malformed"
        assert "msgpack" in error.detail or "invalid" in error.detail
        # a valid envelope of another protocol version is refused just as clearly
        other = msgspec.msgpack.encode({"v": 2, "port": ATTACKER_PORT,
                                        "body": {"type": "get_neighbors", "want": 1}})
        status, error = await _post(session, url, other)
        assert status == 400 and "version 2" in error.detail
        status, error = await _post(session, url, b"x" * (MAX_MESSAGE_BYTES + 1))
        assert status == 413 and error.code == "too_large"
        # a good call from the same host still works
        status, reply = await _post(session, url, encode(GetNeighbors(5), ATTACKER_PORT))
        assert status == 200 and type(reply).__name__ == "Neighbors"
    stats = peer.feedex.transport.stats
    assert stats["malformed"] == 2 and stats["oversized"] == 1
    assert node.stats["malformed"] == 3
    assert node.standing.score((ATTACKER, ATTACKER_PORT)) == -3.0  # 1 per bad call


async def test_a_flood_from_one_host_is_rate_limited(mesh):
    peer = await mesh.peer(0, [BUSY[0]], LAZY, transport=TransportSettings(
        max_requests_per_minute=20))
    url = peer.feedex.transport.url + PATH
    statuses = []
    async with _session() as session:
        for _ in range(30):
            status, _ = await _post(session, url, encode(GetNeighbors(1), ATTACKER_PORT))
            statuses.append(status)
    assert statuses[:20] == [200] * 20
    assert statuses[20:] == [429] * 10
    assert peer.feedex.transport.stats["rate_limited"] == 10


async def test_a_large_valid_call_is_read_whole(mesh):
    """A body of several hundred KB arrives in parts; the peer reads all of it (one read of the
    stream returned only what had arrived, and an honest sender's big put_entries was refused
    as malformed and counted against it)."""
    peer = await mesh.peer(0, [BUSY[0]], LAZY)
    url = peer.feedex.transport.url + PATH
    text = "x" * 16_000
    entries = [Entry(f"k{i}", 1.0, text, "", text) for i in range(10)]
    bundles = [Bundle(bytes([b]) * 20, "http://127.0.0.1:1/feed", entries) for b in range(2)]
    body = encode(PutEntries(bundles), ATTACKER_PORT)
    assert 600_000 < len(body) < MAX_MESSAGE_BYTES
    async with _session() as session:
        status, reply = await _post(session, url, body)
    # decoded, then refused because the caller is not a neighbour: not malformed
    assert status == 200 and reply.code == "not_neighbour"
    assert peer.feedex.transport.stats["malformed"] == 0
    assert peer.feedex.node.standing.score((ATTACKER, ATTACKER_PORT)) == 0.0
