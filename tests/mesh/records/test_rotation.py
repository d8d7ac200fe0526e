"""Key succession out of band (issue 14 section 2): the signed rotation statements a feed's
``<subscribe>`` carries let a subscriber that bootstraps after a rotation, or whose gap held the
``rotate`` record, accept the current key without the log from seq 1."""

from __future__ import annotations

import pytest
from nacl.signing import SigningKey

from feedmesh.mesh.keys import KeyStore
from feedmesh.mesh.records import FeedLog
from feedmesh.mesh.records.record import encode_key
from feedmesh.mesh.records.rotation import key_succession, sign_statement

URL = "http://127.0.4.1/feed.xml"


def rotated_log(tmp_path, rotations: int = 1):
    """A key folder whose log of URL has records 1-3, then per rotation a ``rotate`` record and
    two records by the new key. Returns (store, wires in seq order)."""
    store = KeyStore(tmp_path / "keys")
    store.make(1.0)
    writer = store.writer(URL)
    wires = [writer.append({"id": str(n)}) for n in (1, 2, 3)]
    store.save_head(writer)
    for turn in range(rotations):
        store.rotate(2.0 + turn)
        wires += [path.read_bytes() for path in store.outbox()]
        for path in store.outbox():
            path.unlink()
        writer = store.writer(URL)
        wires += [writer.append({"id": f"r{turn}-{n}"}) for n in (1, 2)]
        store.save_head(writer)
    return store, wires


def test_a_subscriber_after_a_rotation_accepts_the_current_key(tmp_path):
    store, wires = rotated_log(tmp_path, rotations=2)      # seqs 1-3, 4 rot, 5-6, 7 rot, 8-9
    current = store.keyring()["current"]
    plain = FeedLog(store.identity(), URL)
    assert plain.receive(wires[7]).refused == "wrong-key"  # without the chain: refused

    log = FeedLog(store.identity(), URL)
    log.learn_rotations(store.rotations())
    verdict = log.receive(wires[7])                        # seq 8, by the current key: held
    assert verdict.refused is None and verdict.missing == tuple(range(1, 8))
    assert [r.seq for r in log.skip_gap().delivered] == [8]   # the gap went to HTTP
    assert log.key == current
    assert [r.seq for r in log.receive(wires[8]).delivered] == [9]
    # keys before the current one stay refused, even though they were valid once
    stale = FeedLog(store.identity(), URL)
    stale.learn_rotations(store.rotations())
    stale.receive(wires[7])
    stale.skip_gap()
    assert stale.receive(wires[2]).refused == "replayed"


def test_a_gap_that_held_the_rotate_record_no_longer_refuses_the_new_key(tmp_path):
    store, wires = rotated_log(tmp_path)                   # 1-3, 4 rotate, 5-6 by the new key
    log = FeedLog(store.identity(), URL)
    for wire in wires[:3]:
        log.receive(wire)
    assert log.receive(wires[4]).refused == "wrong-key"    # the rotate record (4) was lost
    log.learn_rotations(store.rotations())                 # the HTTP document's element
    assert log.receive(wires[4]).missing == (4,)
    assert [r.seq for r in log.skip_gap().delivered] == [5]
    assert [r.seq for r in log.receive(wires[5]).delivered] == [6]
    assert log.key == store.keyring()["current"] and log.skipped == 1


def test_the_chain_in_order_through_the_log_also_teaches_the_succession(tmp_path):
    store, wires = rotated_log(tmp_path)
    log = FeedLog(store.identity(), URL)
    assert [r.seq for w in wires for r in log.receive(w).delivered] == [1, 2, 3, 4, 5, 6]
    log.learn_rotations(store.rotations())                 # the same chain: nothing changes
    assert log.key == store.keyring()["current"]


def test_broken_chains_are_refused_with_the_reason():
    identity, other = SigningKey.generate(), SigningKey.generate()
    ident = encode_key(identity.verify_key)
    new = SigningKey.generate()
    newkey = encode_key(new.verify_key)
    good = sign_statement(identity, {"v": 1, "type": "rotate", "feed": ident, "old": ident,
                                     "new": newkey, "at": 1.0})
    assert key_succession(ident, [good]).keys == (ident, newkey)
    forged = sign_statement(other, {"v": 1, "type": "rotate", "feed": ident, "old": ident,
                                    "new": newkey, "at": 1.0})
    with pytest.raises(ValueError, match="rotation 1: the announcement's signature"):
        key_succession(ident, [forged])
    with pytest.raises(ValueError, match="rotation 1 belongs to another feed"):
        key_succession(newkey, [good])
    skipping = sign_statement(new, {"v": 1, "type": "rotate", "feed": ident, "old": newkey,
                                    "new": ident, "at": 2.0})
    with pytest.raises(ValueError, match="rotation 1 retires"):
        key_succession(ident, [skipping])
    revoke = sign_statement(new, {"v": 1, "type": "revoke", "feed": ident, "old": newkey,
                                  "at": 2.0})
    assert key_succession(ident, [good, revoke]).revoked
    log = FeedLog(ident, URL)
    with pytest.raises(ValueError, match="rotation 1"):
        log.learn_rotations([forged])
    assert log.key == ident
