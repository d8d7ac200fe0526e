"""The subscription index: behaviour, incremental changes and bad input, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

from feedmesh.match import Article, QueryError, SubscriptionIdError, parse_query, tokenize_article
from feedmesh.match.index import IndexSettings, SubscriptionIndex, TermStatistics
from feedmesh.match.workload import english_words

QUERIES = {
    1: "law internet",
    2: "law",
    3: '"net neutrality"',
    4: "copyr*",
    5: "law -patent",
    6: "title:economy",
    7: "e-mail spam",
    8: "site:bbc.co.uk",
    9: "(privacy OR security) internet",
    10: "lang:en politics",
    11: "law internet",  # identical to 1: stored once, two owners
    12: 'author:"jane doe"',
    13: "category:politics",
    14: 'internet -"net neutrality"',
}

ARTICLES = [
    Article(
        title="Economy news",
        text="The law of the internet. Net neutrality and copyright! Email spam is bad.",
        authors=("Jane Doe", "John Roe"),
        categories=("Politics", "Tech"),
        site="www.bbc.co.uk",
        language="en-GB",
    ),
    Article(title="Patent law", text="patent disputes over law and internet politics",
            language="en"),
    Article(text="neutrality of the net; e mail about spam and security on the internet"),
    Article(authors=("Jane", "Doe"), text="doe jane: nothing else"),
    Article(),
]


def expected(queries: dict[int, str], article: Article) -> list[int]:
    return sorted(sub for sub, text in queries.items() if parse_query(text).matches(article))


def make_index(backend: str, **settings: object) -> SubscriptionIndex:
    return SubscriptionIndex(IndexSettings(backend=backend, **settings))  # type: ignore[arg-type]


@pytest.mark.parametrize("bulk", [True, False], ids=["bulk", "add"])
def test_matches_agree_with_the_reference(backend: str, bulk: bool) -> None:
    if bulk:
        index = SubscriptionIndex.build(QUERIES.items(), IndexSettings(backend=backend))
    else:
        index = make_index(backend)
        for sub, text in QUERIES.items():
            index.add(sub, text)
    assert [index.match(a).tolist() for a in ARTICLES] == [expected(QUERIES, a) for a in ARTICLES]
    assert index.match(ARTICLES[0]).tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13]
    assert index.match(ARTICLES[2]).tolist() == [7, 9, 14]
    assert index.match(ARTICLES[3]).tolist() == []  # author phrase must not span two authors


def test_results_are_sorted_unique_int32(backend: str) -> None:
    index = SubscriptionIndex.build(QUERIES.items(), IndexSettings(backend=backend))
    result = index.match(ARTICLES[0])
    assert result.dtype == np.int32
    assert (np.diff(result) > 0).all()


def test_identical_queries_are_stored_once(backend: str) -> None:
    index = SubscriptionIndex.build(
        [(sub, "law internet") for sub in range(50)] + [(99, "internet LAW  law")],
        IndexSettings(backend=backend),
    )
    assert index.stats().conjunctions == 1
    assert index.match(Article(text="law of the internet")).tolist() == [*range(50), 99]


def test_add_remove_replace_while_matching(backend: str) -> None:
    index = SubscriptionIndex.build(QUERIES.items(), IndexSettings(backend=backend))
    article = ARTICLES[0]
    assert index.remove(2) is True
    assert index.remove(2) is False  # already gone
    assert index.remove(12345) is False  # never there
    index.add(20, "neutrality")
    index.add(1, "patent")  # replaces subscription 1's query
    assert 2 not in index and 20 in index and 1 in index
    assert len(index) == len(QUERIES)
    model = {**QUERIES, 20: "neutrality", 1: "patent"}
    del model[2]
    assert index.match(article).tolist() == expected(model, article)
    index.add(2, "economy")  # back again, now in the delta
    model[2] = "economy"
    for a in ARTICLES:
        assert index.match(a).tolist() == expected(model, a)
    index.compact()
    assert index.stats().delta_subscriptions == 0 and index.stats().removed_pending == 0
    for a in ARTICLES:
        assert index.match(a).tolist() == expected(model, a)


def test_invalid_input_is_refused_with_typed_errors(backend: str) -> None:
    index = make_index(backend)
    with pytest.raises(QueryError):
        index.add(1, "law AND (")
    for bad_id in (-1, 2**31, "7", 1.0, True, None):
        with pytest.raises(SubscriptionIdError):
            index.add(bad_id, "law")  # type: ignore[arg-type]
        with pytest.raises(SubscriptionIdError):
            index.remove(bad_id)  # type: ignore[arg-type]
    assert len(index) == 0
    with pytest.raises(SubscriptionIdError, match="given twice"):
        SubscriptionIndex.build([(1, "law"), (1, "internet")])
    with pytest.raises(ValueError, match="backend"):
        make_index("fortran")


def test_empty_huge_and_binary_articles(backend: str) -> None:
    queries = {1: "law", 2: "tail", 3: '"alpha beta"', 4: "ÿ"}
    index = SubscriptionIndex.build(queries.items(), IndexSettings(backend=backend))
    assert index.match(Article()).tolist() == []
    huge = Article(text="law " * 2_500_000 + "tail")  # 10 MB
    tokenized = tokenize_article(huge)
    assert tokenized.truncated
    assert index.match(huge).tolist() == [1]  # the tail is beyond the searched part
    binary = Article(text=bytes(range(256)).decode("latin-1") * 100 + "\ud800 alpha beta")
    # "ÿ" is inside a run of Latin-1 letters there, so it is not a token of its own.
    assert index.match(binary).tolist() == expected(queries, binary) == [3]


def test_one_million_identical_subscriptions(backend: str) -> None:
    index = SubscriptionIndex.build(
        ((sub, "net neutrality") for sub in range(1_000_000)), IndexSettings(backend=backend)
    )
    assert index.stats().conjunctions == 1
    result = index.match(Article(text="Net neutrality, again"))
    assert len(result) == 1_000_000 and result[0] == 0 and result[-1] == 999_999
    assert index.match(Article(text="neutrality only")).tolist() == []


def test_a_subscription_per_vocabulary_word(backend: str) -> None:
    words = english_words().words[29:]  # all 49,971 words a subscription may use alone
    index = SubscriptionIndex.build(enumerate(words), IndexSettings(backend=backend))
    assert index.stats().conjunctions == len(words)
    article = Article(text=" ".join(words[::7]))
    assert index.match(article).tolist() == list(range(0, len(words), 7))
    everything = Article(text=" ".join(words))
    assert len(index.match(everything)) == len(words)


def test_statistics_choose_the_access_term() -> None:
    # With a flat prior, observed articles decide which word is selective.
    flat = TermStatistics(prior=lambda field, kind, text: 0.5, prior_weight=1.0)
    index = SubscriptionIndex(statistics=flat)
    index.add(1, "common rare")
    for _ in range(50):
        index.match(Article(text="common words everywhere"))
    index.compact()
    vocabulary = index.vocabulary
    rare = vocabulary.words[0]["rare"]
    common = vocabulary.words[0]["common"]
    estimates = index.statistics.estimates()
    assert estimates[rare] < estimates[common]
    main = index._main
    assert main.post_start[rare + 1] - main.post_start[rare] == 1  # filed under "rare"
    assert main.post_start[common + 1] - main.post_start[common] == 0


def test_maintenance_is_due_when_the_delta_grows() -> None:
    index = SubscriptionIndex(IndexSettings(delta_limit=3))
    index.add(1, "a1")
    index.add(2, "a2")
    assert not index.maintenance_due()
    index.add(3, "a3")
    assert index.maintenance_due()
    index.compact()
    assert not index.maintenance_due()
    index.remove(1)
    assert index.maintenance_due()  # a third of the main index is pending removal


def test_stats_report_sizes() -> None:
    index = SubscriptionIndex.build((sub, f"w{sub} x") for sub in range(1000))
    stats = index.stats()
    assert stats.subscriptions == stats.main_subscriptions == 1000
    assert stats.conjunctions == 1000 and stats.terms == 1001
    assert 0 < stats.index_bytes < 60_000 and stats.vocabulary_bytes > 0
