"""The query language: normalized forms, every error with its position, and parser fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from feedmesh.match.errors import QueryError
from feedmesh.match.query import (
    And,
    Compound,
    Not,
    Phrase,
    Prefix,
    QueryLimits,
    Word,
    dnf,
    parse_query,
    parser,
    plain_word_tokens,
)
from feedmesh.match.query.ast import render


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("law internet", "internet AND law"),
        ("Law  AND   Internet", "internet AND law"),
        ("internet law law", "internet AND law"),
        ("law and internet", "internet AND law"),  # operators in any case
        ("copyright OR patent", "copyright OR patent"),
        ("(law AND internet) OR (privacy AND internet)",
         "(internet AND law) OR (internet AND privacy)"),
        ("law -patent", "law AND NOT patent"),
        ("law NOT patent", "law AND NOT patent"),
        ("law NOT NOT patent", "law AND patent"),
        ('"net neutrality"', '"net neutrality"'),
        ('\u201cNet Neutrality\u201d', '"net neutrality"'),
        ('"law"', "law"),  # a one-word phrase is a word
        ('"and" law', '"and" AND law'),  # operator words must be quoted to be searched
        ("copyr*", "copyr*"),
        ("e-mail", "e-mail"),
        ("E\u2010Mail", "e-mail"),
        ("3.14", '"3 14"'),
        ("東京", '"東 京"'),
        ("title:Economy", "title:economy"),
        ('title:"net neutrality"', 'title:"net neutrality"'),
        ("author:(Smith OR Jones) economy", "(author:jones OR author:smith) AND economy"),
        ("feed:https://www.BBC.co.uk/news politics", "politics AND site:www.bbc.co.uk"),
        ("site:bbc.co.uk. politics", "politics AND site:bbc.co.uk"),
        ("lang:en_US politics", "lang:en-us AND politics"),
        ("category:pol* vote", "category:pol* AND vote"),
        ("-(spam OR scam) offer", "offer AND NOT (scam OR spam)"),
        ("http://example.com/x", '"http example com x"'),
    ],
)
def test_normalized_form(text: str, normalized: str) -> None:
    query = parse_query(text)
    assert query.normalized == normalized
    assert parse_query(normalized).normalized == normalized


@pytest.mark.parametrize(
    ("text", "message", "position"),
    [
        ("", "empty query", 0),
        ("   ", "empty query", 0),
        ("law AND (internet", "unbalanced parenthesis", 8),
        ("law internet)", "unbalanced parenthesis", 12),
        ("(law (internet)", "unbalanced parenthesis", 0),
        ("()", "empty parentheses", 0),
        ("AND law", "AND has nothing on its left", 0),
        ("(OR law)", "OR has nothing on its left", 1),
        ("law AND", "AND has nothing on its right", 4),
        ("law OR OR x", "OR has nothing on its right", 4),
        ("law NOT", "NOT has nothing to negate", 4),
        ("- law", "'-' has nothing to exclude", 0),
        ("law --x", "'--' is not an operator", 4),
        ("NOT patent", "NOT alone cannot match anything", 0),
        ("-patent -copyright", "NOT alone cannot match anything", 0),
        ("law OR -patent", "NOT alone cannot match anything", 7),
        ("law OR NOT (a b)", "NOT alone cannot match anything", 7),
        ("The OF", "query would match almost every article", 0),
        ("law OR (the of)", "query would match almost every article", 8),
        ("lang:en", "query would match almost every article", 5),
        ("law NOT law", "query can never match", 0),
        ('"net neutrality" -net', "query can never match", 0),
        ("copyright -copy*", "query can never match", 0),
        ('"unclosed phrase', "unclosed quote", 0),
        ('law ""', "empty phrase", 4),
        ("foo:bar", "unknown field 'foo:'", 0),
        ("title:", "field 'title:' needs a value", 6),
        ("title:(author:x)", "field 'author:' inside 'title:(...)'", 7),
        ("title:-x", "'-' after a field", 6),
        ("co*", "wildcard prefix too short", 0),
        ("cop*right", "wildcard '*' must end the word", 3),
        ("*", "a wildcard needs exactly one word before '*'", 0),
        ('"net neut*"', "wildcard inside a phrase", 9),
        ("site:exa*", "site: does not take wildcards", 8),
        ('site:"a b"', "site: does not take a phrase", 5),
        ("site:!!", "'!!' is not a host name", 5),
        ("lang:english", "'english' is not a language tag", 5),
        ("&& law", "'&&' has no letters or digits to search for", 0),
        ("law\x00", "unexpected control character U+0000", 3),
        ("law \ud800", "invalid character U+D800", 4),
        ("x" * 4120, "query too long: 4120 > 1000 characters", 1000),
        (" ".join(f"w{i}" for i in range(33)), "too many terms: more than 32", 118),
        ("(a1 OR b1) (a2 OR b2) (a3 OR b3) (a4 OR b4) (a5 OR b5) (a6 OR b6) (a7 OR b7)",
         "too many alternatives", 0),
        ("(" * 20 + "x" + ")" * 20, "nesting too deep", 16),
        ('"' + " ".join(f"w{i}" for i in range(13)) + '"', "phrase too long: 13 > 12 words", 0),
    ],
)
def test_errors_say_what_and_where(text: str, message: str, position: int) -> None:
    with pytest.raises(QueryError) as caught:
        parse_query(text)
    error = caught.value
    assert message in error.message
    assert error.position == position
    assert error.hint
    assert str(error) == f"{error.message} at {error.position}"
    described = error.describe(text)
    assert described.splitlines()[0] == str(error) and "^" in described


def test_examples_from_the_issue_read_as_specified() -> None:
    with pytest.raises(QueryError, match=r"^unbalanced parenthesis at 14$"):
        parse_query("internet laws (privacy OR security")
    with pytest.raises(QueryError, match=r"^NOT alone cannot match anything at \d+$"):
        parse_query("NOT x")
    with pytest.raises(QueryError, match=r"^query too long: 4120 > 1000 characters at 1000$"):
        parse_query("y" * 4120)


def test_limits_are_settings() -> None:
    strict = QueryLimits(max_chars=10, max_terms=2, max_conjunctions=2, min_prefix_chars=5)
    with pytest.raises(QueryError, match="too long"):
        parse_query("abcdefghijk", strict)
    with pytest.raises(QueryError, match="too many terms"):
        parse_query("a1 a2 a3", strict)
    with pytest.raises(QueryError, match="too many alternatives"):
        parse_query("(a OR b OR c) x", QueryLimits(max_conjunctions=2))
    with pytest.raises(QueryError, match="too short"):
        parse_query("copy*", strict)
    assert parse_query("the", QueryLimits(stop_words=frozenset())).normalized == "the"
    with pytest.raises(ValueError):
        QueryLimits(max_terms=0)


def test_tree_and_conjunctions() -> None:
    query = parse_query('title:"net neutrality" e-mail -spam copyr*')
    assert query.root == And(
        (
            Prefix("text", "copyr"),
            Compound("text", ("e", "mail")),
            Phrase("title", ("net", "neutrality")),
            Not(Word("text", "spam")),
        )
    )
    assert [c.render() for c in query.conjunctions] == [
        '"e mail" AND copyr* AND title:"net neutrality" AND NOT spam',
        'copyr* AND email AND title:"net neutrality" AND NOT spam',
    ]
    assert str(query) == query.normalized
    assert query.conjunctions[0].positive[0] == Phrase("text", ("e", "mail"))
    assert parse_query("law").root == Word("text", "law")


def test_absorbed_alternatives_are_dropped() -> None:
    query = parse_query("law OR (law internet)")
    assert [c.render() for c in query.conjunctions] == ["law"]


# --- properties ----------------------------------------------------------------------------------

_WORDS = ["law", "internet", "Privacy", "e-mail", "copyr*", '"net neutrality"', "東京", "3.14",
          "title:economy", "site:bbc.co.uk", "lang:fr", "author:smith", "the", "NOT", "OR", "AND",
          "-spam", "(", ")", "category:x*", '"and"']


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12).map(" ".join))
@example("law (internet OR privacy) -spam")
def test_normalized_form_is_a_fixed_point(text: str) -> None:
    try:
        query = parse_query(text)
    except QueryError as error:
        assert 0 <= error.position <= len(text)
        return
    again = parse_query(query.normalized)
    assert again.normalized == query.normalized
    assert again.root == query.root
    assert again.conjunctions == query.conjunctions


_PLAIN = ["law", "internet", "the", "of", "and", "or", "not", "x1", "LAW", "Internet", "a_b", "x-y",
          "café", "", "it's", "1,000"]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(_PLAIN), min_size=1, max_size=40),
    st.sampled_from([" ", "  ", "\t", " \n ", "\x1c", "\x0b", "\x85", "\u00a0"]),
)
def test_plain_word_shortcut_equals_the_general_parser(words: list[str], separator: str) -> None:
    text = separator.join(words)
    limits = QueryLimits()
    shortcut = plain_word_tokens(text, limits)
    try:
        tree = parser.parse_tree(text, limits)
        general = (render(parser.canonical(tree)), dnf.expand(tree, limits))
    except QueryError:
        assert shortcut is None  # the shortcut never accepts what the parser refuses
        return
    assume(shortcut is not None)
    fast = parse_query(text)
    assert (fast.normalized, fast.conjunctions) == general
    assert fast.root == parser.canonical(tree)


_SYNTAX = st.sampled_from([*'()"-*: \t', "AND", "OR", "NOT", "title:", "site:", "\u201c"])


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(_SYNTAX, st.text(max_size=4)), max_size=25).map("".join))
def test_parser_never_crashes(text: str) -> None:
    try:
        query = parse_query(text)
    except QueryError as error:
        assert 0 <= error.position <= len(text)
        assert error.message and error.hint
    else:
        assert query.conjunctions
        assert all(conjunction.positive for conjunction in query.conjunctions)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_binary_garbage_gets_a_positioned_error_or_a_query(data: bytes) -> None:
    text = data.decode("utf-8", errors="surrogateescape")
    try:
        parse_query(text)
    except QueryError as error:
        assert 0 <= error.position <= len(text)


def test_non_text_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_query(b"law")  # type: ignore[arg-type]


@pytest.mark.parametrize("query, title, text, terms", [
    ("(law AND internet) OR privacy", "Law of the internet", "", ["internet", "law"]),
    ("(law AND internet) OR privacy", "Privacy law", "", ["privacy"]),  # law alone explains none
    ('"net neutrality" OR copyr*', "", "copyright and net neutrality", ['"net neutrality"',
                                                                        "copyr*"]),
    ("privacy NOT facebook", "Privacy", "", ["privacy"]),
    ("title:election", "Election day", "", ["election"]),
])
def test_matched_terms_say_why_an_article_matched(query, title, text, terms):
    from feedmesh.match import Article

    parsed = parse_query(query)
    article = Article(title=title, text=text, authors=(), categories=(), site="", language="")
    assert parsed.matches(article)
    assert sorted(parsed.matched_terms(article)) == sorted(terms)
