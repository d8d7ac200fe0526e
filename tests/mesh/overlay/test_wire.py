"""Datagram codec: every overlay message round-trips; anything else is a WireError, never another
exception (the UDP endpoint counts it as malformed)."""

from __future__ import annotations

import msgspec
import pytest

from feedmesh.mesh.overlay import messages as m
from feedmesh.mesh.overlay import scribe as s
from feedmesh.mesh.overlay.ids import Handle
from feedmesh.mesh.overlay.wire import (
    MAGIC,
    MESSAGE_TYPES,
    WireError,
    decode,
    decode_datagram,
    encode,
    encode_datagram,
)

H = Handle((1 << 128) - 1, ("127.0.4.1", 7000))
G = 0x8000_0000_0000_0000_0000_0000_0000_0001

MESSAGES = [
    m.Route(G, s.Subscribe(G, H), H, 7, 3), m.Route(0, m.JoinPayload(H), H, 1),
    m.Route(G, s.Publish(G, 9, b"\x00signed"), H, 2), m.RouteAck(5), m.StateRows((H, H)),
    m.JoinDone(()), m.Announce(), m.LeafPing(), m.LeafPing((H,)), m.LeafRequest(),
    m.LeafReply((H,)), m.RowRequest(3), m.Leaving(), m.Probe(12.5), m.Pong(0.25),
    s.JoinAck(G, (1, G), 4), s.Item(G, 1, b"r", True), s.Redirect(G, H), s.Adopt(G),
    s.Heartbeat(G, (), 0), s.Refresh(G), s.Unsubscribe(G), s.Recover(G, (1, 2, 3)),
    s.Rumour((G, 7), (3, 0), True), s.Vouch(G, (4,)),
]


def test_every_message_type_is_covered() -> None:
    payloads = {type(x.payload) for x in MESSAGES if type(x) is m.Route}
    assert {type(x) for x in MESSAGES} | payloads | {Handle} == set(MESSAGE_TYPES)


@pytest.mark.parametrize("message", MESSAGES, ids=lambda x: type(x).__name__)
def test_round_trip(message) -> None:
    assert decode(encode(message)) == message
    assert decode_datagram(encode_datagram(H, message)) == (H, message)


def ext(code: int, fields) -> bytes:
    return MAGIC + msgspec.msgpack.encode(msgspec.msgpack.Ext(code, msgspec.msgpack.encode(fields)))


CODE = {cls: 16 + i for i, cls in enumerate(MESSAGE_TYPES)}
BAD = [
    (b"", "magic"), (b"GET / HTTP/1.1", "magic"), (MAGIC, "MessagePack"),
    (MAGIC + b"\xc1", "MessagePack"), (MAGIC + msgspec.msgpack.encode(42), "not a message"),
    (ext(99, []), "unknown message code"), (ext(CODE[s.Refresh], []), "1 fields"),
    (ext(CODE[s.Refresh], ["x"]), "Refresh.group"), (ext(CODE[m.Probe], ["soon"]), "sent_at"),
    (ext(CODE[s.Recover], [1, [1, "2"]]), "Recover.seqs"),
    (ext(CODE[s.Rumour], [[1], [2], "yes"]), "Rumour.reply"),
    (ext(CODE[m.StateRows], [[1]]), "StateRows.handles"),
    (ext(CODE[Handle], [1, ["127.0.4.1"]]), "Handle.addr"),
    (ext(CODE[Handle], [1, ["127.0.4.1", 1]]), "not a message"),
    (MAGIC + msgspec.msgpack.encode(msgspec.msgpack.Ext(1, b"\x01")), "16 bytes"),
    (MAGIC + b"\x91" * 5000, "MessagePack"),
]


@pytest.mark.parametrize(("data", "words"), BAD, ids=[w for _, w in BAD])
def test_garbage_is_a_wire_error(data: bytes, words: str) -> None:
    with pytest.raises(WireError, match=words.replace("(", r"\(")):
        decode(data)
    with pytest.raises(WireError):
        decode_datagram(data)


def test_a_message_too_big_to_send_is_refused() -> None:
    with pytest.raises(WireError, match="over the 1000-byte datagram limit"):
        encode_datagram(H, s.Item(G, 1, bytes(2000)), max_bytes=1000)
