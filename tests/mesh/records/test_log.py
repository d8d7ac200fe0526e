"""A subscriber's log: what it delivers, what it refuses and why, what it asks to recover."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from feedmesh.mesh.records import FeedLog, FeedWriter, InvalidRecord, canonical_bytes, open_record
from feedmesh.mesh.records.record import MAGIC

URL = "https://example.org/feed.xml"


def make_writer(seed: int = 1, **kwargs) -> FeedWriter:
    return FeedWriter(SigningKey(bytes([seed]) * 32), URL, **kwargs)


def entries(writer: FeedWriter, count: int) -> list[bytes]:
    return [writer.append({"id": str(i), "title": f"item {i}"}) for i in range(count)]


def test_records_in_order_are_delivered_with_their_exact_bytes():
    writer = make_writer()
    log = FeedLog(writer.feed, URL)
    wires = entries(writer, 3)
    for seq, wire in enumerate(wires, 1):
        verdict = log.receive(wire)
        assert [r.seq for r in verdict.delivered] == [seq]
        assert verdict.delivered[0].wire == wire
        assert verdict.delivered[0].entry == {"id": str(seq - 1), "title": f"item {seq - 1}"}
    assert log.seq == 3 and not log.refused


def test_a_gap_is_reported_and_filled_records_are_released_in_order():
    writer = make_writer()
    log = FeedLog(writer.feed, URL)
    wires = entries(writer, 5)
    log.receive(wires[0])
    assert log.receive(wires[3]).missing == (2, 3)
    verdict = log.receive(wires[4])
    assert verdict.held and verdict.missing == (2, 3)
    assert log.receive(wires[2]).missing == (2,)
    released = log.receive(wires[1])
    assert [r.seq for r in released.delivered] == [2, 3, 4, 5]
    assert released.missing == () and log.seq == 5


def refusal(log: FeedLog, wire: bytes) -> str | None:
    return log.receive(wire).refused


def test_each_kind_of_bad_item_is_refused_with_its_reason_and_counted():
    writer = make_writer()
    log = FeedLog(writer.feed, URL)
    first, second = entries(writer, 2)
    payload = first[len(MAGIC) + 64:]
    assert log.receive(first).delivered
    assert refusal(log, payload) == "unsigned"
    assert refusal(log, MAGIC + bytes(64) + payload) == "unsigned"
    assert refusal(log, b"garbage") == "malformed"
    tampered = second.replace(b"item 1", b"item 9")
    assert refusal(log, tampered) == "bad-signature"
    assert refusal(log, first) == "replayed"
    forger = FeedWriter(SigningKey(b"\x07" * 32), URL, feed=writer.feed, head=(1, log.head_hash))
    assert refusal(log, forger.append({"id": "x"})) == "wrong-key"
    other_url = FeedWriter(SigningKey(b"\x01" * 32), "https://other.example/feed")
    assert refusal(log, other_url.append({"id": "x"})) == "wrong-feed"
    fork = FeedWriter(SigningKey(b"\x01" * 32), URL, head=(1, "0" * 64))
    assert refusal(log, fork.append({"id": "fork"})) == "out-of-chain"
    assert log.receive(second).delivered
    assert log.refused == {"unsigned": 2, "malformed": 1, "bad-signature": 1, "replayed": 1,
                           "wrong-key": 1, "wrong-feed": 1, "out-of-chain": 1}


def test_non_canonical_payload_is_refused_even_when_its_signature_holds():
    key = SigningKey(b"\x01" * 32)
    writer = FeedWriter(key, URL)
    body = {"v": 1, "feed": writer.feed, "url": URL, "seq": 1, "prev": None, "key": writer.key,
            "type": "entry", "republication": False, "entry": {"id": "1"}}
    spaced = canonical_bytes(body).replace(b",", b", ")
    wire = MAGIC + key.sign(spaced).signature + spaced
    with pytest.raises(InvalidRecord) as caught:
        open_record(wire)
    assert caught.value.reason == "not-canonical"


def test_rotation_is_announced_by_the_old_key_and_the_old_key_then_stops_counting():
    writer = make_writer()
    log = FeedLog(writer.feed, URL)
    log.receive(writer.append({"id": "1"}))
    old = SigningKey(b"\x01" * 32)
    rotation = writer.rotate(SigningKey(b"\x02" * 32))
    assert log.receive(rotation).delivered[0].type == "rotate"
    after = writer.append({"id": "2"})
    stale = FeedWriter(old, URL, feed=writer.feed, head=(2, log.head_hash)).append({"id": "old"})
    assert refusal(log, stale) == "wrong-key"
    assert log.receive(after).delivered and log.key == writer.key


def test_revocation_closes_the_log():
    writer = make_writer()
    log = FeedLog(writer.feed, URL)
    log.receive(writer.append({"id": "1"}))
    attacker_copy = FeedWriter(SigningKey(b"\x01" * 32), URL, head=(writer.seq, writer.prev))
    assert log.receive(writer.revoke()).delivered
    assert refusal(log, attacker_copy.append({"id": "after"})) == "revoked"
    with pytest.raises(ValueError, match="revoked"):
        writer.append({"id": "2"})


def test_out_of_band_revocation_refuses_the_key():
    writer = make_writer()
    log = FeedLog(writer.feed, URL)
    log.revoke_key(writer.key)
    assert refusal(log, writer.append({"id": "1"})) == "revoked"


def test_republication_is_marked_signed_by_the_republisher_and_trusted_only_by_choice():
    republisher = FeedWriter(SigningKey(b"\x05" * 32), URL, republication=True)
    wire = republisher.append({"id": "1"})
    assert open_record(wire).republication is True
    assert refusal(FeedLog(republisher.feed, URL), wire) == "untrusted-republication"
    assert FeedLog(republisher.feed, URL, republication=True).receive(wire).delivered
    assert refusal(FeedLog(make_writer().feed, URL), wire) == "wrong-feed"


def test_records_too_far_ahead_are_refused():
    writer = make_writer()
    log = FeedLog(writer.feed, URL, max_held=4)
    wires = entries(writer, 6)
    assert refusal(log, wires[5]) == "too-far-ahead"


WRITER = make_writer(3)
WIRES = entries(WRITER, 3)


@settings(max_examples=400, deadline=None)
@given(which=st.integers(0, 2), data=st.data())
def test_any_single_byte_change_is_refused(which, data):
    wire = WIRES[which]
    position = data.draw(st.integers(0, len(wire) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda b: b != wire[position]))
    changed = wire[:position] + bytes([value]) + wire[position + 1:]
    log = FeedLog(WRITER.feed, URL)
    for earlier in WIRES[:which]:
        assert log.receive(earlier).delivered
    verdict = log.receive(changed)
    assert verdict.refused is not None and not verdict.delivered
    assert log.seq == which
