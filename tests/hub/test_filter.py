"""A filter shard matches each article once as far as the reflectors can tell: an article the bus
delivers again (the shard died before acknowledging it) is matched again, and its matches,
published under the article's number on the bus, are dropped as copies."""

from __future__ import annotations

import numpy as np

from feedmesh.bus.memory import MemoryBus
from feedmesh.clock import ManualClock
from feedmesh.hub.idcodec import decode_ids
from feedmesh.hub.messages import Article, as_matched, decode, encode
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.tiers.filter import FilterTier
from feedmesh.model import Entry


def article(n: int, title: str) -> Article:
    return Article(entry_id=n, feed_id=1, feed_url="http://x/f", feed_title="X",
                   entry=Entry(key=str(n), title=title), first_seen_at=1.0)


async def test_a_redelivered_article_reaches_the_reflector_once():
    bus = MemoryBus()
    shard = FilterTier(0, 1, bus, ManualClock(5.0), HubMetrics())
    shard.add(7, "privacy", reflector=0)
    shard.add(8, "law", reflector=0)
    reflector = await bus.consumer("matches.0", "reflector-0")
    articles = await bus.consumer("articles", "filter-0")
    await bus.publish("articles", encode(article(1, "privacy law")))
    await bus.publish("articles", encode(article(2, "law")))
    first = await articles.get(1.0)
    await shard.process(decode(first.data), first.seq)
    await first.nak()  # the shard "died" before acknowledging: the article comes again
    again = await articles.get(1.0)
    assert again.seq == first.seq and again.redeliveries == 1
    await shard.process(decode(again.data), again.seq)
    second = await articles.get(1.0)
    await shard.process(decode(second.data), second.seq)
    got = []
    while (delivery := await reflector.get(0.05)) is not None:
        for matched in as_matched(decode(delivery.data)):
            got.append((matched.article.entry_id, decode_ids(matched.sub_ids).tolist()))
    assert got == [(1, [7, 8]), (2, [8])]
    assert np.array_equal(shard.routes.reflector[[7, 8]], [0, 0])


async def test_an_article_that_breaks_the_filter_is_retried_then_parked(monkeypatch, caplog):
    import asyncio

    import feedmesh.hub.deliveries as deliveries
    from tests.eventually import eventually

    monkeypatch.setattr(deliveries, "RETRY_BASE_S", 0.001)
    bus = MemoryBus()
    metrics = HubMetrics()
    shard = FilterTier(0, 1, bus, ManualClock(5.0), metrics)
    shard.add(7, "privacy", reflector=0)
    match = shard.index.match_entry
    attempts = []

    def breaks_on_poison(entry, feed_url, language="", tokens=None):
        if entry.title == "poison":
            attempts.append(entry.key)
            raise RuntimeError("a bug meets this article")
        return match(entry, feed_url, language, tokens)

    shard.index.match_entry = breaks_on_poison
    reflector = await bus.consumer("matches.0", "reflector-0")
    task = asyncio.create_task(shard.run())
    await eventually(lambda: "articles/filter-0" in bus.depths())
    await bus.publish("articles", encode(article(1, "poison")))
    await bus.publish("articles", encode(article(2, "privacy")))
    delivered = await reflector.get(10.0)  # the next article went through meanwhile
    assert [m.article.entry_id for m in as_matched(decode(delivered.data))] == [2]
    await eventually(lambda: "message_parked" in caplog.text)
    assert len(attempts) == deliveries.MAX_DELIVERIES
    await eventually(lambda: bus.depths()["articles/filter-0"] == (0, 0))  # nothing stuck
    [parked] = await bus.parked()  # kept for an operator, with who and why
    assert (parked.subject, parked.seq, parked.group) == ("articles", 1, "filter-0")
    assert decode(parked.data).entry.title == "poison"
    assert "failed 5 times: RuntimeError: a bug meets this article" in parked.reason
    assert metrics.parked.labels("filter-0")._value.get() == 1
    # Bytes that are not a message at all are parked at once, and the stream goes on.
    await bus.publish("articles", b"\x00 not msgpack")
    await bus.publish("articles", encode(article(3, "privacy")))
    delivered = await reflector.get(10.0)
    assert [m.article.entry_id for m in as_matched(decode(delivered.data))] == [3]
    newest = (await bus.parked())[0]
    assert newest.data == b"\x00 not msgpack" and newest.reason.startswith("not a message")
    assert metrics.parked.labels("filter-0")._value.get() == 2
    task.cancel()
