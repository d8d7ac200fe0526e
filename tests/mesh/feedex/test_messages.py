"""The wire format: every message round-trips; bad bytes give a clear MessageError, never a
crash."""

from __future__ import annotations

import msgspec
import pytest

from feedmesh.mesh.feedex.messages import (
    MAX_MESSAGE_BYTES,
    Bundle,
    CheckDid,
    Connect,
    ConnectReply,
    DidStatus,
    Disconnect,
    Entry,
    Envelope,
    Error,
    GetNeighbors,
    Holder,
    MessageError,
    Neighbors,
    PutEntries,
    QueryAnswer,
    QueryFeed,
    UpdateSubset,
    decode,
    encode,
)

DID = bytes(range(20))
FEED = "http://pub.test/feed"
BUNDLE = Bundle(DID, FEED, [Entry("k", 1.5, "t", "http://pub.test/k", "s")],
                [("127.0.3.1", 8400)], 12.0)

MESSAGES = [
    GetNeighbors(12), Neighbors([("127.0.3.1", 8400), ("127.0.3.2", 8401)]),
    Connect({FEED: 0, "http://pub.test/other": 2}, {FEED: 100.0}, {FEED: [1.0, 2.0]}, 3),
    ConnectReply(True, {FEED: 1}), ConnectReply(False, reason="full"),
    UpdateSubset({FEED: 0}, ["http://pub.test/gone"]), UpdateSubset(), Disconnect("bye"),
    CheckDid([DID]), DidStatus([DID], []), PutEntries([BUNDLE]),
    QueryFeed(b"12345678", FEED, 1.0, None, 3),
    QueryAnswer(b"12345678", [Holder(("127.0.3.9", 8400), 4, 9.0)]), Error("full", "why"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips_with_version_and_port(message):
    envelope = decode(encode(message, 8400))
    assert envelope == Envelope(1, 8400, message)


@pytest.mark.parametrize("data, says", [
    (b"", "not a msgpack"),
    (b"\xc1", "not a msgpack"),
    (msgspec.msgpack.encode({"v": 1, "port": 1, "body": {"type": "nope"}}), "invalid"),
    (msgspec.msgpack.encode({"v": 1, "port": 0, "body": {"type": "disconnect"}}), "port"),
    (msgspec.msgpack.encode({"v": 2, "port": 1, "body": {"type": "disconnect"}}), "version 2"),
    (msgspec.msgpack.encode({"v": 1, "port": 1, "body": {"type": "check_did",
                                                         "dids": [b"short"]}}), "dids"),
    (msgspec.msgpack.encode({"v": 1, "port": 1, "body": {"type": "connect",
                                                         "subset": {FEED: 65}}}), "subset"),
])
def test_malformed_input_raises_a_clear_error(data, says):
    with pytest.raises(MessageError, match=says):
        decode(data)


def test_truncated_messages_are_refused():
    data = encode(PutEntries([BUNDLE]), 8400)
    for cut in range(len(data)):
        with pytest.raises(MessageError):
            decode(data[:cut])


def test_caps_on_size_and_counts():
    with pytest.raises(MessageError, match="cap"):
        decode(b"\x00" * (MAX_MESSAGE_BYTES + 1))
    huge = Entry("k", None, "", "", "x" * 16_000)
    many = PutEntries([Bundle(DID, FEED, [huge] * 70)])
    with pytest.raises(MessageError, match="cap"):
        encode(many, 8400)
    too_many = msgspec.msgpack.encode({"v": 1, "port": 1, "body": {
        "type": "check_did", "dids": [DID] * 65}})
    with pytest.raises(MessageError, match="dids"):
        decode(too_many)
