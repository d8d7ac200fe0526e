"""What the matcher sees of an entry: the :class:`Article` record and its tokenized form.

An :class:`Article` is plain text (no HTML) plus the few fields a query can name. It is built from a
normalized :class:`feedmesh.model.Entry` by :func:`article_from_entry`, which strips the tags of the
sanitized summary/content and decodes their entities.

:func:`tokenize_article` turns it into a :class:`TokenizedArticle`: for each searchable field the
ordered tokens (for phrases) and the set of tokens plus compound aliases (for word presence). Both
the reference evaluator and the index start from it, so they cannot disagree about tokens.

Fields, and what an unqualified word searches:

========== ================================================================================
``text``   title, then the body (summary and content); an unqualified word searches this
``title``  the title only
``author`` every author's name (a phrase never spans two authors)
``category`` every category (a phrase never spans two categories)
``site``   the host of the feed and each of its parent domains (``www.bbc.co.uk`` also gives
           ``bbc.co.uk``, ``co.uk`` and ``uk``), so ``site:bbc.co.uk`` covers its subdomains
``lang``   the language tag and each of its prefixes (``en-us`` also gives ``en``)
========== ================================================================================
"""

from __future__ import annotations

import unicodedata
from typing import Final
from urllib.parse import urlsplit

import msgspec

from feedmesh.match.text import html_to_text, tokenize
from feedmesh.model import Entry

__all__ = [
    "MAX_ARTICLE_CHARS",
    "PHRASE_FIELDS",
    "Article",
    "TokenizedArticle",
    "article_from_entry",
    "language_terms",
    "normalize_host",
    "normalize_language",
    "site_terms",
    "tokenize_article",
]

MAX_ARTICLE_CHARS: Final = 1_000_000
"""Characters of title + body that are searched (about 160,000 words, 80 times Figure 10's longest
article). Text beyond it is ignored, so a 10 MB article costs what a 1 MB one does;
:attr:`TokenizedArticle.truncated` says when it happened."""

PHRASE_FIELDS: Final = ("text", "title", "author", "category")
"""Fields whose tokens have positions (phrases and word presence); ``site`` and ``lang`` are
sets."""

_SEPARATOR: Final = ""  # never a token: placed between title and body, and between two authors


class Article(msgspec.Struct, frozen=True, omit_defaults=True):
    """One article as the matcher sees it: plain text and the fields a query can name."""

    title: str = ""
    text: str = ""
    """Plain-text body (summary and content, without markup)."""
    authors: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    site: str = ""
    """Host of the feed the article came from, e.g. ``www.nytimes.com``."""
    language: str = ""
    """Language tag, e.g. ``en-US`` (the entry's, else the feed's)."""


def article_from_entry(entry: Entry, feed_url: str, feed_language: str = "") -> Article:
    """The :class:`Article` for a normalized entry of the feed at ``feed_url``."""
    summary = html_to_text(entry.summary) if entry.summary else ""
    content = html_to_text(entry.content) if entry.content else ""
    if summary and content and summary.strip() in content:
        summary = ""  # the summary is an excerpt of the content: do not search it twice
    body = f"{summary}\n{content}" if summary and content else summary or content
    authors = tuple(
        name for name in (person.name or person.email for person in entry.authors) if name
    )
    try:
        host = (urlsplit(feed_url).hostname or "") if "//" in feed_url else ""
    except ValueError:  # e.g. a malformed IPv6 literal: the article simply has no site
        host = ""
    return Article(
        title=entry.title,
        text=body,
        authors=authors,
        categories=entry.categories,
        site=host,
        language=entry.language or feed_language,
    )


def normalize_host(text: str) -> str | None:
    """A host name in the form the ``site`` field stores, or None when ``text`` is not one.

    Accepts a bare host (``NYTimes.com``), a host with a port or a trailing dot, or a URL; Unicode
    (IDN) hosts are converted to their ASCII (punycode) form so both spellings agree.
    """
    text = text.strip()
    if "//" in text:
        try:
            text = urlsplit(text).hostname or ""
        except ValueError:
            return None
    text = text.rstrip(".").casefold()
    if text.count(":") == 1:  # host:port
        text = text.split(":", 1)[0]
    if not text.isascii():
        try:
            text = unicodedata.normalize("NFKC", text).encode("idna").decode("ascii")
        except UnicodeError:
            return None
    labels = text.split(".")
    if not text or len(text) > 253 or not all(_valid_label(label) for label in labels):
        return None
    return text


def _valid_label(label: str) -> bool:
    return (
        0 < len(label) <= 63
        and label[0] != "-"
        and label[-1] != "-"
        and all(c.isascii() and (c.isalnum() or c in "-_") for c in label)
    )


def normalize_language(text: str) -> str | None:
    """A language tag in lower case with ``-`` separators (``en_US`` -> ``en-us``), or None."""
    text = text.strip().replace("_", "-").casefold()
    subtags = text.split("-")
    if not 2 <= len(subtags[0]) <= 3 or not subtags[0].isalpha() or not subtags[0].isascii():
        return None
    if not all(1 <= len(tag) <= 8 and tag.isascii() and tag.isalnum() for tag in subtags):
        return None
    return text


def site_terms(host: str) -> list[str]:
    """The ``site`` values an article from ``host`` answers to (the host and its parents)."""
    normalized = normalize_host(host) if host else None
    if normalized is None:
        return []
    labels = normalized.split(".")
    return [".".join(labels[i:]) for i in range(len(labels))]


def language_terms(language: str) -> list[str]:
    """The ``lang`` values an article in ``language`` answers to (``zh-hant-tw`` -> 3 values)."""
    normalized = normalize_language(language) if language else None
    if normalized is None:
        return []
    subtags = normalized.split("-")
    return ["-".join(subtags[: i + 1]) for i in range(len(subtags))]


class TokenizedArticle:
    """An article split into tokens per field; built once, read by every matcher.

    ``sequences[field]`` lists the field's tokens in order, with ``""`` between title and body and
    between two authors or categories (so a phrase cannot span them); ``aliases[field]`` lists the
    joined forms of hyphenated compounds; ``site`` and ``lang`` are the values of those fields.
    """

    __slots__ = ("_sets", "aliases", "lang", "sequences", "site", "truncated")

    def __init__(
        self,
        sequences: dict[str, list[str]],
        aliases: dict[str, list[str]],
        site: list[str],
        lang: list[str],
        truncated: bool,
    ) -> None:
        self.sequences = sequences
        self.aliases = aliases
        self.site = site
        self.lang = lang
        self.truncated = truncated
        self._sets: dict[str, frozenset[str]] = {}

    def token_set(self, field: str) -> frozenset[str]:
        """Every token and alias of ``field`` (cached); for ``site``/``lang``, their values."""
        cached = self._sets.get(field)
        if cached is None:
            if field == "site":
                cached = frozenset(self.site)
            elif field == "lang":
                cached = frozenset(self.lang)
            else:
                cached = frozenset(self.sequences[field]).union(self.aliases[field])
                cached = cached - {_SEPARATOR}
            self._sets[field] = cached
        return cached


def _join_runs(texts: tuple[str, ...]) -> tuple[list[str], list[str]]:
    tokens: list[str] = []
    aliases: list[str] = []
    for text in texts:
        run = tokenize(text)
        if tokens and run.tokens:
            tokens.append(_SEPARATOR)
        tokens.extend(run.tokens)
        aliases.extend(run.aliases)
    return tokens, aliases


def tokenize_article(article: Article, max_chars: int = MAX_ARTICLE_CHARS) -> TokenizedArticle:
    """Tokenize every field of ``article``; title + body beyond ``max_chars`` is ignored."""
    title, body = article.title, article.text
    truncated = len(title) + len(body) > max_chars
    if truncated:
        title = title[:max_chars]
        body = body[: max(0, max_chars - len(title))]
    title_run = tokenize(title) if title else None
    body_run = tokenize(body) if body else None
    if title_run is None:
        text_tokens = body_run.tokens if body_run else []
        text_aliases = body_run.aliases if body_run else []
        title_tokens: list[str] = []
        title_aliases: list[str] = []
    else:
        title_tokens, title_aliases = title_run.tokens, title_run.aliases
        if body_run is None or not body_run.tokens:
            text_tokens, text_aliases = title_tokens, title_aliases
        else:
            text_tokens = [*title_tokens, _SEPARATOR, *body_run.tokens]
            text_aliases = title_aliases + body_run.aliases
    author_tokens, author_aliases = _join_runs(article.authors)
    category_tokens, category_aliases = _join_runs(article.categories)
    return TokenizedArticle(
        sequences={
            "text": text_tokens,
            "title": title_tokens,
            "author": author_tokens,
            "category": category_tokens,
        },
        aliases={
            "text": text_aliases,
            "title": title_aliases,
            "author": author_aliases,
            "category": category_aliases,
        },
        site=site_terms(article.site),
        lang=language_terms(article.language),
        truncated=truncated,
    )
