"""The article message in both its forms, on every bus: an older crawler's (the entry alone) and
the packed one (the entry and its tokens, versioned). A filter shard matches both alike, an
unknown version falls back to the entry, and what goes on to a reflector that does not match
carries no tokens.

Parametrized by the ``bus`` fixture (tests/bus/conftest.py): the in-process bus and JetStream.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from feedmesh.clock import ManualClock
from feedmesh.hub.idcodec import decode_ids
from feedmesh.hub.messages import Article, Matched, article_of, as_matched, decode, encode
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.tiers.filter import FilterTier
from feedmesh.match.packed import PACKED_VERSION
from feedmesh.model import Entry
from feedmesh.store import IngestedEntry
from tests.eventually import eventually


def ingested(n: int, title: str, body: str) -> IngestedEntry:
    return IngestedEntry(id=n, feed_id=1, entry=Entry(key=str(n), title=title, summary=body),
                         first_seen_at=1.0, updated=False)


@pytest.mark.parametrize("delivery", ["ids", "article"])
async def test_old_packed_and_unknown_forms_match_alike(bus, delivery):
    shard = FilterTier(0, 1, bus, ManualClock(5.0), HubMetrics(), delivery=delivery)
    for sub_id, query in ((1, "privacy"), (2, '"net neutrality"'), (3, "copyr* law"),
                          (4, "title:straße"), (5, "site:example.org")):
        shard.add(sub_id, query, reflector=0)
    reflector = await bus.consumer("matches.0", "reflector-0")
    task = asyncio.create_task(shard.run())
    try:
        await eventually(lambda: shard.stream_joined.is_set())
        items = [ingested(1, "Straße privacy", "on net neutrality and copyright law"),
                 ingested(2, "nothing", "net and neutrality, copyrights law"),
                 ingested(3, "STRASSE", "<p>privacy &amp; copyright law</p>")]
        packed = [article_of(item, "http://www.example.org/feed", "X", "de") for item in items]
        assert all(a.tokens is not None and a.tokens.version == PACKED_VERSION for a in packed)
        old = [msgspec.structs.replace(a, tokens=None, entry_id=a.entry_id + 10) for a in packed]
        future = [msgspec.structs.replace(a, entry_id=a.entry_id + 20, tokens=msgspec.structs
                                          .replace(a.tokens, version=PACKED_VERSION + 1))
                  for a in packed]
        for article in (*packed, *old, *future):
            await bus.publish("articles", encode(article))
        got: dict[int, list[int] | None] = {}
        while len(got) < 9:
            message = await reflector.get(10.0)
            assert message is not None, f"only {sorted(got)} reached the reflector"
            for matched in as_matched(decode(message.data)):
                assert isinstance(matched, Matched) and isinstance(matched.article, Article)
                if delivery == "ids":
                    assert matched.article.tokens is None  # the reflector never reads them
                    got[matched.article.entry_id] = decode_ids(matched.sub_ids).tolist()
                else:  # the reflector re-matches: it gets the tokens the filter got
                    sent = {a.entry_id: a
                            for a in (*packed, *old, *future)}[matched.article.entry_id]
                    assert matched.article.tokens == sent.tokens
                    got[matched.article.entry_id] = None
            await message.ack()
        if delivery == "ids":
            assert got[1] == [1, 2, 3, 4, 5] and got[2] == [3, 5] and got[3] == [1, 3, 4, 5]
            for n in (1, 2, 3):
                assert got[n] == got[n + 10] == got[n + 20]
        else:
            assert sorted(got) == [1, 2, 3, 11, 12, 13, 21, 22, 23]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
