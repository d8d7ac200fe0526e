"""The Cobra-style workload generator: seeded, deterministic, shaped as section 4 describes."""

from __future__ import annotations

from collections import Counter

import numpy as np

from feedmesh.match import STOP_WORDS, parse_query, tokenize
from feedmesh.match.workload import ARTICLE_SIZES, COBRA_QUERY_LENGTHS, Workload, english_words


def test_words_come_from_the_english_frequency_list() -> None:
    words = english_words()
    assert len(words.words) == 50_000
    assert set(words.words[:29]) == STOP_WORDS
    assert words.words[29] == "an"  # the most frequent word a subscription may use
    assert all(tokenize(word).tokens == [word] for word in words.words[:2000])


def test_same_seed_same_workload_and_sizes_nest() -> None:
    first, second = Workload(seed=11), Workload(seed=11)
    assert first.subscriptions(1000) == second.subscriptions(1000)
    assert first.subscriptions(250_000)[:100_000] == second.subscriptions(100_000)
    assert first.articles(3, 61) == second.articles(3, 61)
    assert Workload(seed=12).subscriptions(50) != first.subscriptions(50)


def test_subscription_lengths_follow_cobra() -> None:
    queries = Workload(seed=1).subscriptions(100_000)
    lengths = Counter(len(query.split()) for query in queries)
    shares = [lengths[n] / len(queries) for n in range(1, 9)]
    assert np.allclose(shares, COBRA_QUERY_LENGTHS, atol=0.01)
    assert max(lengths) == 8 and sorted(len(q.split()) for q in queries)[50_000] == 3
    assert not any(word in STOP_WORDS for query in queries for word in query.split())


def test_every_generated_query_is_accepted() -> None:
    workload = Workload(seed=2)
    for variant in ("conjunctive", "mixed"):
        for text in workload.subscriptions(3000, variant):
            assert parse_query(text).conjunctions
    mixed = " ".join(workload.subscriptions(3000, "mixed"))
    for feature in (" OR ", " -", '"', "*", "title:", "site:"):
        assert feature in mixed


def test_articles_have_the_requested_number_of_words() -> None:
    workload = Workload(seed=3)
    assert ARTICLE_SIZES == (61, 637, 2000)
    for size in ARTICLE_SIZES:
        for article in workload.articles(3, size):
            assert len(tokenize(article.title).tokens) + len(tokenize(article.text).tokens) == size
    mixed = workload.articles(20, 637, "mixed")
    assert len({article.site for article in mixed}) > 1
    phrases = workload.collocations
    assert any(any(p in article.text.lower() for p in phrases) for article in mixed)
    texts = workload.article_texts(2, 61)
    assert all(len(tokenize(text).tokens) == 61 for text in texts)
