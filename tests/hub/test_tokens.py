"""Private feed tokens: an HMAC that hides the subscription it names."""

from __future__ import annotations

import base64
import secrets

from feedmesh.hub.tokens import FeedTokens


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
