"""Private feed tokens: an HMAC that hides the subscription it names."""

from __future__ import annotations

import base64
import logging
import secrets

import pytest

from feedmesh.hub.front.tokens import FeedTokens
from feedmesh.store import StoreError


def test_feed_tokens_round_trip_and_hide_the_subscription():
    tokens = FeedTokens(secrets.token_bytes(32))
    one, two = tokens.make(1, 0), tokens.make(2, 0)
    assert tokens.read(one) == (1, 0) and tokens.read(two) == (2, 0)
    assert len(one) == FeedTokens.LENGTH
    plain = base64.urlsafe_b64encode((1).to_bytes(8, "big")).decode()[:8]
    assert plain not in one  # not "AAAAAAAAAAE...": the id is encrypted
    assert one[:6] != two[:6]
    assert tokens.read(tokens.make(1, 1)) == (1, 1) and tokens.make(1, 1) != one


def test_feed_tokens_refuse_forgeries_and_other_spellings():
    tokens = FeedTokens(secrets.token_bytes(32))
    good = tokens.make(7, 3)
    flipped = good[:-1] + ("A" if good[-1] != "A" else "B")
    assert tokens.read(flipped) is None
    assert tokens.read(FeedTokens(secrets.token_bytes(32)).make(7, 3)) is None  # other secret
    raw = base64.urlsafe_b64decode(good + "==")
    assert tokens.read(base64.b64encode(raw).decode().rstrip("=")) in (None, (7, 3))
    # The last character carries 4 spare bits: other values decode to the same bytes.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    same_bytes = [good[:-1] + c for c in alphabet if c != good[-1]
                  and base64.urlsafe_b64decode(good[:-1] + c + "==") == raw]
    assert same_bytes and all(tokens.read(t) is None for t in same_bytes)
    for bad in ("", "x" * 38, good + "A", "é" * 38, good[:-1] + "="):
        assert tokens.read(bad) is None


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_rotated_out_key_still_reads_the_urls_it_made_and_new_ones_use_the_new_key():
    old, new = secrets.token_bytes(32), secrets.token_bytes(32)
    given = FeedTokens(old).make(7, 0)
    tokens = FeedTokens(new, [old])
    assert tokens.read(given) == (7, 0)
    assert tokens.make(7, 0) == FeedTokens(new).make(7, 0) != given
    assert FeedTokens(new).read(given) is None  # retired: the old URL stops working
    assert tokens.fingerprints[0] != tokens.fingerprints[1]
    with pytest.raises(ValueError, match="at least 32 bytes"):
        FeedTokens(new, [b"short"])


def test_running_processes_read_the_keys_again_after_a_rotation_and_a_retirement(caplog):
    old, new = secrets.token_bytes(32), secrets.token_bytes(32)
    stored = [old]
    loads = []
    clock = ManualClock()

    def load() -> list[bytes]:
        loads.append(clock.now)
        return list(stored)

    tokens = FeedTokens(old, load=load, clock=clock, recheck_s=5.0, refresh_s=60.0)
    given = tokens.make(1, 0)
    stored[:] = [new, old]  # `url-key rotate`, by another process
    from_new = FeedTokens(new).make(2, 0)  # a URL made by a process that read the new key
    clock.now = 1.0
    assert tokens.read(from_new) == (2, 0)  # no key held reads it: the keys are read again
    assert loads == [1.0]
    assert tokens.make(3, 0) == FeedTokens(new).make(3, 0)
    assert tokens.make(1, 0) == FeedTokens(new).make(1, 0) != given  # not the one cached
    assert tokens.read(given) == (1, 0)  # read again under the old key, still held
    forged = FeedTokens(secrets.token_bytes(32)).make(4, 0)
    for _ in range(100):  # a flood of bad tokens reads the keys at most every recheck_s
        assert tokens.read(forged) is None
    assert loads == [1.0]
    clock.now = 6.5
    assert tokens.read(forged) is None and loads == [1.0, 6.5]
    stored[:] = [new]  # `url-key retire`
    assert tokens.read(given) == (1, 0)  # the old key is still held ...
    clock.now = 70.0
    assert tokens.read(given) is None  # ... until the next refresh
    assert loads == [1.0, 6.5, 70.0]

    def broken() -> list[bytes]:
        raise StoreError("the hub database at postgresql://x is down")

    tokens._load = broken
    clock.now = 200.0
    with caplog.at_level(logging.WARNING):
        assert tokens.read(from_new) == (2, 0)  # the keys held are kept
    assert "feed_url_keys_not_read" in caplog.text and "is down" in caplog.text


def test_tokens_loaded_later_hold_no_key_until_the_hub_has_made_one():
    stored: list[bytes] = []
    clock = ManualClock()

    def load() -> list[bytes]:
        if not stored:
            raise StoreError("no key for private feed URLs in the hub database")
        return list(stored)

    tokens = FeedTokens.loaded_later(load, clock=clock)  # a reflector, before its crawler
    assert not tokens.has_keys
    key = secrets.token_bytes(32)
    given = FeedTokens(key).make(5, 1)
    assert tokens.read(given) is None
    assert not tokens.refresh() and not tokens.has_keys
    with pytest.raises(StoreError, match="no key for private feed URLs"):
        tokens.make(5, 1)
    stored.append(key)  # the crawler made it
    clock.now = 61.0
    assert tokens.refresh() and tokens.has_keys and tokens.changes == 1
    assert tokens.read(given) == (5, 1) and tokens.make(5, 1) == given
