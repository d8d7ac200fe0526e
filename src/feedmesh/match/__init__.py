"""Matching: the subscription query language and the index that matches articles against it.

Pure: no I/O, no clock, no environment. Front door for the rest of feedmesh:

* :func:`parse_query` -> :class:`Query` (or :class:`QueryError` with position and hint);
  ``query.normalized`` is the canonical text; ``query.matches(article)`` is the reference evaluator
  (cheap enough for the web UI's preview);
* :class:`Article` and :func:`article_from_entry` (from a :class:`feedmesh.model.Entry`);
* :class:`SubscriptionIndex`: ``add(sub_id, query)``, ``remove(sub_id)``, ``match(article)`` ->
  sorted numpy array of subscription ids; ``compact()``/``compact_in_background()``;
  ``to_bytes()``/``from_bytes()`` for fast restarts and read-only sharing with worker processes;
* :mod:`feedmesh.match.workload`: seeded Cobra-style subscriptions and articles for benchmarks.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from feedmesh.match.article import Article, TokenizedArticle, article_from_entry, tokenize_article
from feedmesh.match.errors import IndexSnapshotError, MatchError, QueryError, SubscriptionIdError
from feedmesh.match.query import Query, QueryLimits, parse_query
from feedmesh.match.text import STOP_WORDS, html_to_text, tokenize

if TYPE_CHECKING:
    from feedmesh.match.index import IndexSettings, IndexStats, SubscriptionIndex, TermStatistics

# The index pulls in numba (half a second to import): load it only when first used, so that parsing
# a query (the web UI, ``feedmesh query check``) stays fast.
_LAZY = {"IndexSettings", "IndexStats", "SubscriptionIndex", "TermStatistics"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module("feedmesh.match.index"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "STOP_WORDS",
    "Article",
    "IndexSettings",
    "IndexSnapshotError",
    "IndexStats",
    "MatchError",
    "Query",
    "QueryError",
    "QueryLimits",
    "SubscriptionIdError",
    "SubscriptionIndex",
    "TermStatistics",
    "TokenizedArticle",
    "article_from_entry",
    "html_to_text",
    "parse_query",
    "tokenize",
    "tokenize_article",
]
