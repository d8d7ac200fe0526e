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


def test_the_crawler_s_articles_carry_their_tokens_and_older_forms_still_read():
    from feedmesh.hub.messages import article_of
    from feedmesh.match import article_from_entry, tokenize_article
    from feedmesh.match.packed import unpack_tokens
    from feedmesh.store import IngestedEntry

    entry = Entry(key="k", title="Net neutrality", summary="<p>e-mail &amp; law</p>")
    item = IngestedEntry(id=4, feed_id=2, entry=entry, first_seen_at=3.0)
    sent = article_of(item, "http://www.example.org/feed", "X", "en")
    received = decode(encode(sent))
    assert received == sent
    expected = tokenize_article(article_from_entry(entry, "http://www.example.org/feed", "en"))
    got = unpack_tokens(received.tokens)
    assert (got.sequences, got.aliases, got.site, got.lang) == (
        expected.sequences, expected.aliases, expected.site, expected.lang)
    assert article_of(item, "http://x/f", "X", tokenized=False).tokens is None

    class OlderArticle(msgspec.Struct, frozen=True, tag="article", kw_only=True):
        """The article as a filter from before the packed tokens reads it."""

        entry_id: int
        feed_id: int
        feed_url: str
        feed_title: str
        feed_language: str = ""
        entry: Entry
        first_seen_at: float
        updated: bool = False

    older = msgspec.msgpack.decode(encode(sent), type=OlderArticle)
    assert (older.entry_id, older.entry) == (4, entry)
    assert decode(msgspec.msgpack.encode(older)) == msgspec.structs.replace(sent, tokens=None)
