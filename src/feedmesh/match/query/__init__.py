"""The subscription query language: parse, normalize, expand, evaluate.

Front door: :func:`parse_query` turns text into a :class:`Query` or raises one :class:`QueryError`
(``.position``, ``.message``, ``.hint``). The language:

* words, case-insensitive, tokenized like articles (:mod:`feedmesh.match.text`); adjacent terms are
  ANDed (``law internet``); ``AND``, ``OR``, ``NOT`` in any case, ``-word`` for NOT; parentheses;
* ``"quoted phrases"``; ``copyr*`` prefix wildcards (at least ``min_prefix_chars`` before the star);
* fields ``title:``, ``author:``, ``category:``, ``site:``/``feed:`` (host of the source feed, its
  subdomains included) and ``lang:`` (``lang:en`` includes ``en-us``); ``title:(a OR b)`` applies
  the field to a group. An unqualified word matches title, summary or content.

A word is true when it occurs in the article (in the field, if one is named); the boolean expression
decides the match (Cobra, section 3.2).
"""

from __future__ import annotations

import msgspec

from feedmesh.match.article import Article, TokenizedArticle, tokenize_article
from feedmesh.match.errors import QueryError
from feedmesh.match.query.ast import (
    FIELDS,
    OPERATOR_WORDS,
    And,
    Compound,
    Node,
    Not,
    Or,
    Phrase,
    Prefix,
    Term,
    Word,
    render,
)
from feedmesh.match.query.dnf import Conjunction, expand
from feedmesh.match.query.evaluate import evaluate, matched_terms
from feedmesh.match.query.limits import QueryLimits
from feedmesh.match.query.parser import canonical, parse_tree

__all__ = [
    "FIELDS",
    "And",
    "Compound",
    "Conjunction",
    "Node",
    "Not",
    "Or",
    "Phrase",
    "Prefix",
    "Query",
    "QueryError",
    "QueryLimits",
    "Term",
    "Word",
    "parse_query",
    "plain_word_tokens",
]

_DEFAULT_LIMITS = QueryLimits()


class Query(msgspec.Struct, frozen=True):
    """A parsed, accepted subscription query.

    ``normalized`` is canonical: queries that differ only in case, spacing, operator spelling, term
    order or repetition have the same ``normalized`` text, and parsing it gives the same query back.
    ``conjunctions`` is the OR-expansion the index files (never empty, each with a positive term).
    """

    text: str
    """What the user typed."""
    normalized: str
    root: Node
    conjunctions: tuple[Conjunction, ...]

    def matches(self, article: Article | TokenizedArticle) -> bool:
        """Reference evaluation on one article (tokenize once with ``tokenize_article`` to
        reuse)."""
        if isinstance(article, Article):
            article = tokenize_article(article)
        return evaluate(self.root, article)

    def matched_terms(self, article: Article | TokenizedArticle) -> list[str]:
        """The query's positive terms ``article`` holds: why it matched (for highlighting)."""
        if isinstance(article, Article):
            article = tokenize_article(article)
        return matched_terms(self.root, article)

    def __str__(self) -> str:
        return self.normalized


def parse_query(text: str, limits: QueryLimits = _DEFAULT_LIMITS) -> Query:
    """Parse and check ``text``; raise :class:`QueryError` (with position and hint) if refused."""
    if not isinstance(text, str):
        raise TypeError(f"a query is text (str), not {type(text).__name__}")
    plain = _parse_plain_words(text, limits)
    if plain is not None:
        return plain
    tree = parse_tree(text, limits)
    conjunctions = expand(tree, limits)
    root = canonical(tree)
    return Query(text=text, normalized=render(root), root=root, conjunctions=conjunctions)


def plain_word_tokens(text: str, limits: QueryLimits = _DEFAULT_LIMITS) -> list[str] | None:
    """The sorted distinct words of a query made only of ASCII words, or None for anything else.

    Such a query is the AND of those words: :func:`parse_query` and bulk index builds take this
    shortcut past the general parser (a property test checks that both give the same query).
    Anything it is not sure about (operators, stop-word-only queries, limits) returns None.
    """
    if not text.isascii() or len(text) > limits.max_chars:
        return None
    written = text.lower().split()  # ASCII whitespace, as the lexer's str.isspace() sees it
    if not written or not "".join(written).isalnum():  # ASCII letters and digits only
        return None
    distinct = set(written)
    if (
        len(written) > limits.max_terms
        or not distinct.isdisjoint(OPERATOR_WORDS)
        or distinct <= limits.stop_words
    ):
        return None
    return sorted(distinct)


def _parse_plain_words(text: str, limits: QueryLimits) -> Query | None:
    tokens = plain_word_tokens(text, limits)
    if tokens is None:
        return None
    words = tuple(Word("text", token) for token in tokens)
    root: Node = words[0] if len(words) == 1 else And(words)
    return Query(
        text=text,
        normalized=" AND ".join(tokens),
        root=root,
        conjunctions=(Conjunction(words),),
    )
