"""Articles tokenized once and packed (the crawler's form): the same term ids and the same matches
as tokenizing in the filter, with and without the compiled term table."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from feedmesh.match import Article, SubscriptionIndex, tokenize_article
from feedmesh.match.index.prepare import prepare_article
from feedmesh.match.index.term_table import new_term_table, prepare_packed
from feedmesh.match.packed import PACKED_VERSION, PackedTokens, pack_tokens, unpack_tokens
from feedmesh.match.workload import Workload

from .test_index import ARTICLES, QUERIES

UNICODE_QUERIES = {
    101: "straße*",
    102: "résumé",
    103: '"東京 タワー"',
    104: "δημοκρ* news",
    105: "title:résu*",
    106: "author:ore*",
    107: "category:pol*",
    108: "emai*",
    109: "lang:zh tower",
    110: 'title:"economy news"',
    111: "２０２４",  # noqa: RUF001 - fullwidth input is the point
}

UNICODE_ARTICLES = [
    Article(title="Résumé of Straßenbahn", text="Die STRASSE und die Straßenbahn; résumés",
            authors=("O'Reilly", "Ünal"), categories=("Politics & Law",)),
    Article(title="東京タワー", text="東京 タワー 東京タワーの夜景 ２０２４年 Δημοκρατία news",
            language="zh-Hant-TW", site="news.example.co.jp"),
    # A non-breaking hyphen and mathematical bold letters: the look-alikes are the input.
    Article(text="e-mail, e‑mail and emails: 1,000 cases; 𠀀 astral 𝐀𝐁 letters 🙂"),  # noqa: RUF001
    Article(title="", text="", authors=("",), categories=()),
]


def _index(queries: dict[int, str]) -> SubscriptionIndex:
    index = SubscriptionIndex()
    for sub_id, query in queries.items():
        index.add(sub_id, query)
    return index


def _same(left, right) -> None:
    assert left.terms.dtype == right.terms.dtype == np.int32
    assert left.terms.tolist() == right.terms.tolist()
    assert left.seq.tolist() == right.seq.tolist()
    assert left.bounds.tolist() == right.bounds.tolist()


@pytest.mark.parametrize("article", ARTICLES + UNICODE_ARTICLES)
def test_unpacking_gives_back_the_tokenized_article(article: Article) -> None:
    tokenized = tokenize_article(article)
    packed = msgspec.msgpack.decode(msgspec.msgpack.encode(pack_tokens(article)),
                                    type=PackedTokens)
    unpacked = unpack_tokens(packed)
    assert unpacked.sequences == tokenized.sequences
    assert unpacked.aliases == tokenized.aliases
    assert (unpacked.site, unpacked.lang) == (tokenized.site, tokenized.lang)


@pytest.mark.parametrize("with_table", [True, False], ids=["table", "unpacked"])
def test_packed_articles_prepare_to_the_same_term_ids(with_table: bool) -> None:
    index = _index({**QUERIES, **UNICODE_QUERIES})
    table = new_term_table(index.vocabulary) if with_table else None
    if with_table and table is None:
        pytest.skip("numba is not installed")
    for article in ARTICLES + UNICODE_ARTICLES:
        _same(prepare_packed(pack_tokens(article), index.vocabulary, table),
              prepare_article(tokenize_article(article), index.vocabulary))


def test_a_workload_matches_the_same_packed_or_not_as_the_vocabulary_grows() -> None:
    workload = Workload(seed=3)
    queries = workload.subscriptions(4000, "mixed")
    index = SubscriptionIndex.build(enumerate(queries[:3000]))
    texts = workload.article_texts(60, 300)
    articles = [Article(title=text[:60], text=text, site="news3.example") for text in texts]
    packed = [pack_tokens(article) for article in articles]
    matched = 0
    for round_ in range(2):
        for article, tokens in zip(articles, packed, strict=True):
            expected = index.match(article, observe=False)
            assert index.match_packed(tokens, observe=False).tolist() == expected.tolist()
            matched += len(expected)
        if round_ == 0:  # terms added after the table was filled are found too
            terms = len(index.vocabulary)
            for sub_id, query in enumerate(queries[3000:], start=3000):
                index.add(sub_id, query)
            assert len(index.vocabulary) > terms
    assert matched > 0


def test_an_unknown_version_is_refused_and_match_entry_falls_back_to_the_entry() -> None:
    from feedmesh.match import article_from_entry
    from feedmesh.model import Entry

    index = _index(QUERIES)
    entry = Entry(key="1", title="Patent law", summary="patent disputes over law and internet")
    article = article_from_entry(entry, "http://example.com/feed")
    expected = index.match(article).tolist()
    assert expected == [1, 2, 11, 14]
    wrong = msgspec.structs.replace(pack_tokens(Article(text="spam")), version=PACKED_VERSION + 1)
    with pytest.raises(ValueError, match="version"):
        index.match_packed(wrong)
    url = "http://example.com/feed"
    assert index.match_entry(entry, url, tokens=wrong).tolist() == expected
    assert index.match_entry(entry, url, tokens=pack_tokens(article)).tolist() == expected


@pytest.mark.parametrize("broken, why", [
    ({"seq": b"\x01\x00\x00"}, "whole int32"),
    ({"bounds": (0, 1, 1, 1, 9)}, "do not split"),
    ({"seq": np.array([5], "<i4").tobytes(), "bounds": (0, 1, 1, 1, 1)}, "points past"),
    ({"aliases": np.array([-2], "<i4").tobytes(), "alias_bounds": (0, 1, 1, 1, 1)}, "points past"),
])
def test_a_broken_packed_form_is_refused_precisely(broken: dict, why: str) -> None:
    index = _index(QUERIES)
    packed = msgspec.structs.replace(pack_tokens(Article(text="law internet")), **broken)
    with pytest.raises(ValueError, match=why):
        index.match_packed(packed)


def test_a_batch_matches_and_counts_as_its_articles_one_by_one() -> None:
    """``match_packed_many`` gives each article what ``match_packed`` gives it alone, and leaves
    the term statistics as observing them one at a time would, decays (every 7 articles
    here) included."""
    from feedmesh.match import TermStatistics

    workload = Workload(seed=5)
    queries = list(enumerate(workload.subscriptions(2000, "mixed")))
    texts = workload.article_texts(40, 120)
    packed = [pack_tokens(Article(title=text[:50], text=text)) for text in texts]
    alone = SubscriptionIndex.build(queries, statistics=TermStatistics(half_life_articles=7))
    batched = SubscriptionIndex.build(queries, statistics=TermStatistics(half_life_articles=7))
    expected = [alone.match_packed(tokens).tolist() for tokens in packed]
    got = [ids.tolist() for ids in batched.match_packed_many(packed[:3])]
    got += [ids.tolist() for ids in batched.match_packed_many(packed[3:])]
    assert got == expected and sum(map(len, got)) > 0
    for index in (alone, batched):
        assert index.statistics.observations == 40
    assert batched.statistics.articles == alone.statistics.articles
    for mine, theirs in zip(batched.statistics.arrays(), alone.statistics.arrays(), strict=True):
        assert np.array_equal(mine, theirs)
    assert batched.match_packed_many([]) == []


def test_a_batch_with_a_broken_article_is_refused_and_counts_nothing() -> None:
    index = _index(QUERIES)
    good = pack_tokens(Article(text="law internet"))
    broken = msgspec.structs.replace(good, bounds=(0, 1, 1, 1, 9))
    with pytest.raises(ValueError, match="do not split"):
        index.match_packed_many([good, broken])
    assert index.statistics.observations == 0
