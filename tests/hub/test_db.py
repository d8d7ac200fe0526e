"""Secrets of the hub database: API tokens and private feed tokens."""

from __future__ import annotations

import base64
import secrets

import pytest

from feedmesh.hub.db import FeedTokens, HubDB


@pytest.fixture
def db(tmp_path):
    hub_db = HubDB(tmp_path / "hub.db")
    yield hub_db
    hub_db.close()


def test_api_tokens_authenticate_rotate_and_refuse_garbage(db):
    account, token = db.create_account("ann", 1.0)
    assert db.authenticate(token).id == account.id
    rotated = db.rotate_token(account.id)
    assert db.authenticate(token) is None and db.authenticate(rotated).id == account.id
    for bad in ("", "fm_", "fm_1_", "xx_1_abc", "fm_²_abc", "fm_1" + "0" * 30 + "_abc",
                f"fm_{account.id}_{'a' * 300}", f"fm_{account.id + 1}_{rotated.split('_', 2)[2]}"):
        assert db.authenticate(bad) is None, bad


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
