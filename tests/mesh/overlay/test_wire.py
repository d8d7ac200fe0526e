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
    s.Adopt(G, True),
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


def test_repeated_datagrams_come_from_the_caches_and_stay_exact() -> None:
    """The second encode of an equal (sender, message) is the same bytes object, the second decode
    of the same bytes the same message; both equal what the codec computes afresh."""
    from feedmesh.mesh.overlay import wire
    sender = Handle(42, ("127.0.4.9", 7001))
    ping = m.LeafPing((H,))
    first = encode_datagram(sender, ping)
    assert encode_datagram(sender, m.LeafPing((H,))) is first
    assert first == MAGIC + wire._encoder.encode([wire._to_wire(sender), wire._to_wire(ping)])
    decoded = decode_datagram(first)
    assert decoded == (sender, ping)
    assert decode_datagram(bytes(first)) is decoded
    # a different message from the same sender is not confused with the cached one
    assert decode_datagram(encode_datagram(sender, m.LeafPing()))[1] == m.LeafPing()


def test_a_cached_message_still_obeys_the_size_limit() -> None:
    data = encode_datagram(H, m.LeafPing((H,)))
    with pytest.raises(WireError, match="over the 20-byte datagram limit"):
        encode_datagram(H, m.LeafPing((H,)), max_bytes=20)
    assert encode_datagram(H, m.LeafPing((H,))) == data


def test_the_caches_are_bounded(monkeypatch) -> None:
    from feedmesh.mesh.overlay import wire
    monkeypatch.setattr(wire, "CACHE_ENTRIES", 8)
    for n in range(50):
        decode_datagram(encode_datagram(H, m.RowRequest(n)))
    assert len(wire._encoded) <= 8 and len(wire._decoded) <= 8


def test_fields_added_with_a_default_keep_versions_talking() -> None:
    # Adopt gained `repay` (False by default): an older sender's one-field Adopt decodes, and
    # ours leaves the default out so an older receiver decodes it too
    assert decode(ext(CODE[s.Adopt], [5])) == s.Adopt(5, False)
    assert decode(encode(s.Adopt(5))) == s.Adopt(5)
    assert msgspec.msgpack.decode(encode(s.Adopt(5))[len(MAGIC):]).data == \
        msgspec.msgpack.encode([5])
    assert decode(encode(s.Adopt(5, True))) == s.Adopt(5, True)
    with pytest.raises(WireError, match="Adopt has 2 fields, got 3"):
        decode(ext(CODE[s.Adopt], [5, True, 1]))
