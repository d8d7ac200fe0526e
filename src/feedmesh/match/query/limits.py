"""The explicit limits a query must respect (one settings record, injected into the parser)."""

from __future__ import annotations

import msgspec

from feedmesh.match.text import STOP_WORDS

__all__ = ["QueryLimits"]


class QueryLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Limits on what :func:`feedmesh.match.query.parse_query` accepts.

    The defaults keep every accepted query cheap to store and to match: at most ``max_conjunctions``
    AND-groups after ORs are expanded, each filed once in the index.
    """

    max_chars: int = 1000
    """Length of the query text, in characters."""
    max_terms: int = 32
    """Words, phrases and wildcards in the query, counted as written."""
    max_conjunctions: int = 64
    """AND-groups after expanding OR (``(a OR b) (c OR d)`` is 4): the disjunction blow-up cap."""
    max_depth: int = 16
    """Nesting of parentheses and NOTs."""
    max_phrase_words: int = 12
    """Tokens in one phrase."""
    min_prefix_chars: int = 3
    """Characters before a ``*`` wildcard (``co*`` would match a large part of the vocabulary)."""
    stop_words: frozenset[str] = STOP_WORDS
    """Words too common to select anything: a query (or one of its OR branches) made only of these
    is refused, as Cobra refused its 29 most popular words."""

    def __post_init__(self) -> None:
        for name in ("max_chars", "max_terms", "max_conjunctions", "max_depth", "max_phrase_words"):
            if getattr(self, name) < 1:
                raise ValueError(f"QueryLimits.{name} must be at least 1, "
                                 f"got {getattr(self, name)}")
        if self.min_prefix_chars < 1:
            raise ValueError("QueryLimits.min_prefix_chars must be at least 1")
