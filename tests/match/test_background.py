"""Compaction in the background: the index stays exact while adds and removes keep coming."""

from __future__ import annotations

import asyncio

import pytest

from feedmesh.match import Article, Query, parse_query, tokenize_article
from feedmesh.match.index import IndexSettings, SubscriptionIndex
from feedmesh.match.workload import Workload
from tests.eventually import eventually


async def started(index: SubscriptionIndex) -> None:
    """Until a background compaction is running (checked on every event-loop turn: a small
    build can finish between two slower polls)."""
    await eventually(lambda: index._compaction is not None, interval=0,
                     what="the compaction has started")


def _expected(model: dict[int, Query], article: Article) -> list[int]:
    tokenized = tokenize_article(article)
    return sorted(sub for sub, query in model.items() if query.matches(tokenized))


async def test_changes_during_a_background_compaction_are_kept(backend: str) -> None:
    workload = Workload(seed=5)
    texts = [parse_query(text) for text in workload.subscriptions(30_000)]
    model = dict(enumerate(texts))
    index = SubscriptionIndex.build(model.items(), IndexSettings(backend=backend))
    for sub in range(30_000, 30_400):  # a delta and removals for the compaction to merge
        model[sub] = texts[sub % 1000]
        index.add(sub, model[sub])
    for sub in range(0, 400, 3):
        index.remove(sub)
        del model[sub]
    articles = workload.articles(6, 61)

    compaction = asyncio.create_task(index.compact_in_background())
    await started(index)
    changes = 0
    while not compaction.done():
        sub = 40_000 + changes
        model[sub] = texts[changes % 500]
        index.add(sub, model[sub])
        victim = 1 + 3 * changes
        if victim in model:
            assert index.remove(victim)
            del model[victim]
        model[7] = index.add(7, "replaced query")  # replacing a main-index subscription
        article = articles[changes % len(articles)]
        assert index.match(article, observe=False).tolist() == _expected(model, article)
        changes += 1
        await asyncio.sleep(0.001)
    await compaction
    assert changes > 0, "the compaction finished before any change could race it"
    assert len(index) == len(model)
    for article in articles:
        assert index.match(article).tolist() == _expected(model, article)
    stats = index.stats()
    assert stats.delta_subscriptions <= changes + 1  # only what arrived during the build


async def test_a_second_request_joins_the_running_compaction() -> None:
    index = SubscriptionIndex.build((sub, f"w{sub}") for sub in range(20_000))
    index.add(99_999, "extra")
    first = asyncio.create_task(index.compact_in_background())
    second = asyncio.create_task(index.compact_in_background())
    await started(index)
    with pytest.raises(RuntimeError, match="background compaction is running"):
        index.compact()
    await asyncio.gather(first, second)
    assert index.stats().delta_subscriptions == 0
    assert index.match(Article(text="extra")).tolist() == [99_999]
    index.compact()  # allowed again once it is done


async def test_cancelling_a_caller_does_not_abandon_the_compaction() -> None:
    index = SubscriptionIndex.build((sub, f"w{sub}") for sub in range(20_000))
    index.add(99_999, "extra")
    caller = asyncio.create_task(index.compact_in_background())
    await started(index)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    index.add(99_998, "late")  # logged: the compaction is still running
    await index.compact_in_background()  # joins (or follows) the running one
    await eventually(lambda: index._compaction is None, what="no compaction is left running")
    assert index.match(Article(text="extra late")).tolist() == [99_998, 99_999]
    assert 99_998 in index and len(index) == 20_002
