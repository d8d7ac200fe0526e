"""Tokenization: one set of rules for queries and articles, three implementations that agree."""

from __future__ import annotations

import pytest
import regex
import wordfreq
from hypothesis import given, settings
from hypothesis import strategies as st

from feedmesh.match import text
from feedmesh.match.text import STOP_WORDS, html_to_text, normalize_text, tokenize


@pytest.mark.parametrize(
    ("raw", "tokens", "aliases"),
    [
        ("Law AND Internet", ["law", "and", "internet"], []),
        ("Obama's plan", ["obama", "plan"], []),
        ("Obama\u2019s plan", ["obama", "plan"], []),
        ("don't O'Reilly", ["dont", "oreilly"], []),
        ("rock 'n' roll", ["rock", "n", "roll"], []),
        ("students' union", ["students", "union"], []),
        ("e-mail spam", ["e", "mail", "spam"], ["email"]),
        ("state\u2010of\u2010the\u2010art", ["state", "of", "the", "art"], ["stateoftheart"]),
        ("covid-19", ["covid", "19"], ["covid19"]),
        ("1,000,000 people", ["1000000", "people"], []),
        ("3.14 and 1,2", ["3", "14", "and", "1", "2"], []),
        ("Straße", ["strasse"], []),
        ("ＡＢＣ１２３", ["abc123"], []),  # noqa: RUF001 - fullwidth input is the point
        ("\ufb01nance", ["finance"], []),
        ("AT&amp;T", ["at", "t"], []),
        ("soft\u00adhyphen", ["softhyphen"], []),
        ("\u0662\u0660\u0662\u0664", ["2024"], []),
        ("ΟΔΟΣ οδός", ["οδοσ", "οδόσ"], []),
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"], []),
        ("Москва — столица", ["москва", "столица"], []),
        ("東京タワー", ["東", "京", "タ", "ワ", "ー"], []),
        ("ภาษาไทย", ["ภ", "า", "ษ", "า", "ไ", "ท", "ย"], []),
        ("서울에서", ["서", "울", "에", "서"], []),
        ("snake_case", ["snake", "case"], []),
        ("\U0002000b\U0002000c \U00010400x", ["\U0002000b", "\U0002000c", "\U00010428x"], []),
        ("", [], []),
        ("!!! ... ---", [], []),
    ],
)
def test_tokenize_rules(raw: str, tokens: list[str], aliases: list[str]) -> None:
    run = tokenize(raw)
    assert run.tokens == tokens
    assert run.aliases == aliases


def test_stop_words_are_the_29_most_frequent_english_words() -> None:
    assert frozenset(wordfreq.top_n_list("en", 29)) == STOP_WORDS
    assert len(STOP_WORDS) == 29


def _reference_tokenize(raw: str) -> tuple[list[str], list[str]]:
    """The all-planes tables (the slowest path) applied to any normalized text."""
    run = text._tokenize_with(normalize_text(raw), text._tables_for(0x110000))
    return run.tokens, run.aliases


_INTERESTING = st.sampled_from(
    [*"aZ09 -'\u2019\u2010,._\t",
     "ä", "ß", "東", "タ", "ー", "ภ", "ี", "서", "ि", "\u0301", "\u0661", "\u00ad", "\u1acf",
     "\U0001f600", "\U0002000b", "\U0001d7d8", "\U000104a0", "\U00010400", "\U0001e950"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_INTERESTING, st.characters()), max_size=40).map("".join))
def test_fast_paths_agree_with_the_all_planes_path(raw: str) -> None:
    run = tokenize(raw)
    assert (run.tokens, run.aliases) == _reference_tokenize(raw)


def test_emoji_do_not_push_text_off_the_fast_path() -> None:
    assert tokenize("Great news \U0001f600\U0001f44d for e-mail").tokens == [
        "great", "news", "for", "e", "mail"
    ]
    assert tokenize("\U0001d7d8\U0001d7d9 \U000104a0") .tokens == ["01", "0"]  # astral digits


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_tokens_are_normalized_words(raw: str) -> None:
    run = tokenize(raw)
    word = regex.compile(r"[\p{L}\p{M}\p{N}]+")
    for token in run.tokens + run.aliases:
        assert word.fullmatch(token), token
        assert normalize_text(token) == token  # tokenizing is idempotent on its own output


def test_huge_and_binary_text_does_not_crash() -> None:
    binary = bytes(range(256)).decode("latin-1") * 1000 + "\ud800\udfff"
    assert tokenize(binary).tokens  # latin-1 letters survive
    huge = "word " * 200_000
    assert len(tokenize(huge).tokens) == 200_000


@pytest.mark.parametrize(
    ("markup", "plain"),
    [
        ("<p>Hello <b>W</b>orld</p>", " Hello World "),
        ("a<br/>b", "a b"),
        ("x<script>var a = '<p>';</script>y", "x y"),
        ("x<!-- comment -->y", "x y"),
        ("Caf&eacute; &amp; bar &#8212; &lt;tag&gt;", "Café & bar \u2014 <tag>"),
        ("no markup", "no markup"),
        ("<unclosed", "<unclosed"),
    ],
)
def test_html_to_text(markup: str, plain: str) -> None:
    assert html_to_text(markup) == plain
