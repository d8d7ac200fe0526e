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
    assert np.array_equal(shard.reflector_of[[7, 8]], [0, 0])


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


def test_a_batch_reaches_each_reflector_as_its_articles_would_one_by_one():
    """Routing a batch in one pass gives each reflector what matching and routing each article
    alone gives: its active subscriptions' ids, none removed, each article in order."""
    import random

    rng = random.Random(4)
    words = ["privacy", "law", "court", "data", "cloud", "rust", "python", "market"]
    shard = FilterTier(0, 1, MemoryBus(), ManualClock(5.0), HubMetrics())
    reflector_of = {}
    for sub_id in range(1, 400):
        query = " ".join(rng.sample(words, rng.randint(1, 2)))
        reflector_of[sub_id] = rng.randrange(3)
        shard.add(sub_id, query, reflector=reflector_of[sub_id])
    for sub_id in rng.sample(sorted(reflector_of), 60):
        shard.remove(sub_id)
        del reflector_of[sub_id]
    articles = [article(n, " ".join(rng.sample(words, rng.randint(0, 4)))) for n in range(1, 40)]
    expected: dict[int, list[tuple[int, list[int]]]] = {}
    for a in articles:
        ids = shard.index.match_entry(a.entry, a.feed_url).tolist()
        for reflector in range(3):
            mine = [i for i in ids if reflector_of.get(i) == reflector]
            if mine:
                expected.setdefault(reflector, []).append((a.entry_id, mine))
    matched = [(a, found) for a in articles if (found := shard.match(a)) is not None]
    # A subscription removed from the routes while its article was being matched: dropped.
    late = next(i for i in matched[0][1].tolist() if i in reflector_of)
    shard.set_route(late, -1)
    expected = {r: [(e, [i for i in ids if i != late]) for e, ids in lists]
                for r, lists in expected.items()}
    expected = {r: [(e, ids) for e, ids in lists if ids] for r, lists in expected.items()}
    outgoing = shard.route_batch(matched, list(range(1, len(articles) + 1)))
    got = {}
    for message in outgoing:
        reflector = int(message.subject.split(".")[1])
        got[reflector] = [(m.article.entry_id, decode_ids(m.sub_ids).tolist())
                          for m in as_matched(decode(message.data))]
    assert got == {r: lists for r, lists in expected.items() if lists}
    assert len(expected) == 3 and all(len(lists) > 5 for lists in expected.values())


async def test_a_packed_batch_is_matched_at_once_and_a_broken_article_alone(caplog,
                                                                           monkeypatch):
    """Articles in the crawler's packed form are matched in one call per batch, each reflector
    getting what matching them one by one gives; an article whose packed form is not whole
    (the batch cannot be matched at once) is handed back alone, then parked, and the others of
    its batch go through."""
    import asyncio

    import msgspec

    import feedmesh.hub.deliveries as deliveries
    from feedmesh.match import article_from_entry
    from feedmesh.match.packed import pack_tokens
    from tests.eventually import eventually

    def packed(n: int, title: str) -> Article:
        a = article(n, title)
        return msgspec.structs.replace(a, tokens=pack_tokens(article_from_entry(a.entry,
                                                                                a.feed_url)))

    caplog.set_level("ERROR")
    monkeypatch.setattr(deliveries, "RETRY_BASE_S", 0.001)
    bus = MemoryBus()
    metrics = HubMetrics()
    shard = FilterTier(0, 1, bus, ManualClock(5.0), metrics)
    shard.add(7, "privacy", reflector=0)
    shard.add(8, "law", reflector=1)
    batches = []
    many = shard.index.match_packed_many
    shard.index.match_packed_many = lambda tokens: batches.append(len(tokens)) or many(tokens)
    broken = msgspec.structs.replace(packed(3, "privacy"), tokens=msgspec.structs.replace(
        packed(3, "privacy").tokens, bounds=(0, 1, 1, 1, 9)))
    reflectors = [await bus.consumer(f"matches.{r}", f"reflector-{r}") for r in (0, 1)]
    group = await bus.consumer("articles", "filter-0")
    for a in (packed(1, "privacy law"), packed(2, "law"), broken, packed(4, "privacy")):
        await bus.publish("articles", encode(a))
    await shard.process_batch([await group.get(1.0) for _ in range(4)])
    assert batches == [4]  # tried at once, refused for the broken one, then one by one
    task = asyncio.create_task(shard.run())  # the broken one again, until parked
    await eventually(lambda: "message_parked" in caplog.text)
    task.cancel()
    got = {}
    for r, consumer in enumerate(reflectors):
        while (delivery := await consumer.get(0.05)) is not None:
            got.setdefault(r, []).extend((m.article.entry_id, decode_ids(m.sub_ids).tolist())
                                         for m in as_matched(decode(delivery.data)))
    assert got == {0: [(1, [7]), (4, [7])], 1: [(1, [8]), (2, [8])]}
    assert metrics.matches._value.get() == 4
    [parked] = await bus.parked()
    assert decode(parked.data).entry_id == 3 and "do not split" in parked.reason
    for a in (packed(5, "law privacy"), packed(6, "privacy")):  # a whole batch: at once
        await bus.publish("articles", encode(a))
    await shard.process_batch([await group.get(1.0) for _ in range(2)])
    assert batches[-1] == 2 and metrics.matches._value.get() == 7
    got = [[(m.article.entry_id, decode_ids(m.sub_ids).tolist())
            for m in as_matched(decode((await consumer.get(1.0)).data))]
           for consumer in reflectors]
    assert got == [[(5, [7]), (6, [7])], [(5, [8])]]
    assert bus.depths()["articles/filter-0"] == (0, 0)


def test_a_shard_of_one_reflector_routes_by_a_bitmap_that_follows_every_change():
    """The bitmap a one-reflector shard routes by is the table's (reflector 0) after every add,
    change of reflector, removal and growth past the table's size; a removed subscription's
    matches go nowhere."""
    import random

    from feedmesh.hub.idcodec import first_reflector_bits

    rng = random.Random(7)
    shard = FilterTier(0, 1, MemoryBus(), ManualClock(5.0), HubMetrics())
    live: set[int] = set()
    for _ in range(600):
        sub_id = rng.randrange(1, 3000)  # past the first table's 1,024
        if sub_id in live and rng.random() < 0.5:
            shard.remove(sub_id)
            live.discard(sub_id)
        else:
            shard.add(sub_id, "privacy", reflector=0)
            live.add(sub_id)
        assert np.array_equal(shard.first, first_reflector_bits(shard.reflector_of))
    matched = [(a, found) for a in [article(1, "privacy")] if (found := shard.match(a)) is not None]
    (message,) = shard.route_batch(matched, [1])
    (got,) = as_matched(decode(message.data))
    assert decode_ids(got.sub_ids).tolist() == sorted(live)


def test_a_shard_whose_subscriptions_all_go_to_one_reflector_routes_without_lookups():
    """While every subscription of the index goes to reflector 0 the shard routes without a
    lookup, the same bytes as by its bitmap; a subscription of the index sent nowhere (or
    elsewhere) turns that off for good, and its ids are dropped."""
    shard = FilterTier(0, 1, MemoryBus(), ManualClock(5.0), HubMetrics())
    for sub_id, query in enumerate(["privacy", "law", "privacy law", "court"], start=1):
        shard.add(sub_id, query, reflector=0)
    shard.remove(4)  # removed from the index and the routes at once: still all routed
    assert shard.every_first
    articles = [article(n, title) for n, title in enumerate(["privacy law", "law"], start=1)]
    matched = [(a, shard.match(a)) for a in articles]
    fast = shard.route_batch(matched, [1, 2])
    shard.every_first = False  # the bitmap's pass, for comparison
    assert shard.route_batch(matched, [1, 2]) == fast
    shard.every_first = True
    shard.set_route(2, -1)  # still in the index, sent nowhere
    assert not shard.every_first
    [message] = shard.route_batch(matched, [1, 2])
    assert [(m.article.entry_id, decode_ids(m.sub_ids).tolist())
            for m in as_matched(decode(message.data))] == [(1, [1, 3])]
    shard.add(5, "law", reflector=0)
    assert not shard.every_first  # not turned on again by a later add
