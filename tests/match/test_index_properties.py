"""Property tests: the index agrees with the reference evaluator on random queries and articles.

A small vocabulary makes matches frequent, so phrases, NOT, fields, wildcards, hyphenated compounds,
sites and languages are all exercised, through bulk builds, the delta, removals and compactions,
on every backend.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from feedmesh.match import Article, Query, QueryError, parse_query, tokenize_article
from feedmesh.match.index import BACKENDS, IndexSettings, SubscriptionIndex

TOKENS = ["alpha", "beta", "gamma", "delta", "kappa", "the", "e", "mail", "email", "東", "京", "a1"]
HOSTS = ["www.bbc.co.uk", "bbc.co.uk", "news.example", ""]
LANGUAGES = ["en", "en-gb", "fr", ""]


def _word(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(TOKENS))


@st.composite
def terms(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    field = draw(st.sampled_from(["", "", "", "title:", "author:", "category:"]))
    if kind <= 3:
        return field + _word(draw)
    if kind == 4:
        words = draw(st.lists(st.sampled_from(TOKENS), min_size=2, max_size=3))
        return field + '"' + " ".join(words) + '"'
    if kind == 5:
        return field + draw(st.sampled_from(["alp*", "gam*", "del*", "ema*", "kap*"]))
    if kind == 6:
        return field + draw(st.sampled_from(["e-mail", "alpha-beta", "beta-gamma-delta"]))
    if kind == 7:
        return "site:" + draw(st.sampled_from(["bbc.co.uk", "www.bbc.co.uk", "news.example"]))
    if kind == 8:
        return "lang:" + draw(st.sampled_from(["en", "en-gb", "fr"]))
    return field + draw(st.sampled_from(["ALPHA", "Beta", "東京", "alpha's"]))


@st.composite
def query_texts(draw: st.DrawFn, depth: int = 0) -> str:
    shape = draw(st.integers(0, 6 if depth < 2 else 1))
    if shape <= 1:
        return draw(terms())
    if shape == 2:
        return f"{draw(query_texts(depth + 1))} {draw(query_texts(depth + 1))}"
    if shape == 3:
        return f"({draw(query_texts(depth + 1))} OR {draw(query_texts(depth + 1))})"
    if shape == 4:
        return f"{draw(query_texts(depth + 1))} -{draw(terms())}"
    if shape == 5:
        return f"{draw(query_texts(depth + 1))} AND NOT ({draw(query_texts(depth + 1))})"
    return f"({draw(query_texts(depth + 1))})"


@st.composite
def queries(draw: st.DrawFn) -> Query:
    text = draw(query_texts())
    try:
        return parse_query(text)
    except QueryError:
        return parse_query("alpha")  # refused queries are covered by test_query.py


@st.composite
def articles(draw: st.DrawFn) -> Article:
    def words(max_size: int) -> str:
        chosen = draw(st.lists(st.sampled_from([*TOKENS, "E-Mail", "alpha-beta", "-", ","]),
                               max_size=max_size))
        return " ".join(chosen)

    return Article(
        title=words(5),
        text=words(25),
        authors=tuple(words(3) for _ in range(draw(st.integers(0, 2)))),
        categories=tuple(words(2) for _ in range(draw(st.integers(0, 2)))),
        site=draw(st.sampled_from(HOSTS)),
        language=draw(st.sampled_from(LANGUAGES)),
    )


def _reference(model: dict[int, Query], article: Article) -> list[int]:
    tokenized = tokenize_article(article)
    return sorted(sub for sub, query in model.items() if query.matches(tokenized))


@pytest.mark.parametrize("path", ["bulk", "delta", "compacted"])
@pytest.mark.parametrize("backend", sorted(BACKENDS))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(queries(), min_size=1, max_size=25), st.lists(articles(), min_size=1, max_size=6))
def test_index_agrees_with_reference(
    backend: str, path: str, subscriptions: list[Query], sample: list[Article]
) -> None:
    model = dict(enumerate(subscriptions))
    index_settings = IndexSettings(backend=backend)
    if path == "bulk":
        index = SubscriptionIndex.build(model.items(), index_settings)
    else:
        index = SubscriptionIndex(index_settings)
        for sub, query in model.items():
            index.add(sub, query)
        if path == "compacted":
            index.compact()
    for article in sample:
        assert index.match(article).tolist() == _reference(model, article)


class IndexMachine(RuleBasedStateMachine):
    """Adds, replacements, removals (also of unknown ids), compactions and matches, in any order."""

    ids = Bundle("ids")

    @initialize(backend=st.sampled_from(sorted(BACKENDS)))
    def start(self, backend: str) -> None:
        self.index = SubscriptionIndex(IndexSettings(backend=backend, delta_limit=5))
        self.model: dict[int, Query] = {}

    @rule(target=ids, sub=st.integers(0, 40), query=queries())
    def add(self, sub: int, query: Query) -> int:
        self.index.add(sub, query)
        self.model[sub] = query
        return sub

    @rule(sub=st.one_of(ids, st.integers(0, 2**31 - 1)))
    def remove(self, sub: int) -> None:
        assert self.index.remove(sub) == (sub in self.model)
        self.model.pop(sub, None)

    @rule()
    def compact(self) -> None:
        self.index.compact()

    @rule(article=articles())
    def match(self, article: Article) -> None:
        assert self.index.match(article).tolist() == _reference(self.model, article)

    @invariant()
    def size(self) -> None:
        if hasattr(self, "index"):
            assert len(self.index) == len(self.model)
            assert all(sub in self.index for sub in self.model)


TestIndexMachine = IndexMachine.TestCase
TestIndexMachine.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
