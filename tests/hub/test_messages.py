"""The hub's messages as every bus carries them: MessagePack bytes, one decoder for all kinds."""

from __future__ import annotations

import msgspec
import pytest

from feedmesh.hub.messages import (
    Article,
    Matched,
    SubscriptionAdded,
    SubscriptionRemoved,
    decode,
    encode,
)
from feedmesh.model import Entry


def article(n: int, body: str = "", content_hash: str = "h") -> Article:
    return Article(entry_id=n, feed_id=1, feed_url="http://x/feed", feed_title="X",
                   entry=Entry(key=f"k{n}", title=f"t{n}", summary=body,
                               content_hash=content_hash), first_seen_at=float(n))


@pytest.mark.parametrize("message", [
    article(5, "<p>body</p>"),
    Matched(article=article(6), sub_ids=b"\x01\x02", shard=1, matched_at=2.5),
    Matched(article=article(7), sub_ids=None),
    SubscriptionAdded(sub_id=3, query="a AND b", reflector=1, keep=20, generation=2),
    SubscriptionRemoved(sub_id=3, reflector=1),
])
def test_every_message_round_trips_through_msgpack(message):
    assert decode(encode(message)) == message


def test_bytes_that_are_not_a_message_raise_a_value_error():
    with pytest.raises(ValueError):
        decode(b"\xc1 not msgpack")
    with pytest.raises(msgspec.ValidationError):
        decode(encode(SubscriptionRemoved(sub_id=1, reflector=0))[:-1] + b"\xa1x")
