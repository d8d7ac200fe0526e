"""Bulk building: many (subscription, query) pairs straight into one conjunction table.

The common query (ASCII words, nothing else) skips the parser and the Query objects entirely
(:func:`feedmesh.match.query.plain_word_tokens`); other texts are parsed, once per distinct text
while it stays in a bounded cache. Everything accumulates in flat ``array`` buffers, so 10 million
subscriptions cost a few hundred megabytes here, not millions of Python objects.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

import numpy as np

from feedmesh.match.errors import SubscriptionIdError
from feedmesh.match.index.compiled import ConjunctionTable
from feedmesh.match.index.compiler import ConjunctionKey, conjunction_keys
from feedmesh.match.index.settings import check_sub_id
from feedmesh.match.index.vocabulary import Vocabulary
from feedmesh.match.query import Query, QueryLimits, Word, parse_query, plain_word_tokens

__all__ = ["bulk_table"]

_CACHE_LIMIT = 200_000  # distinct texts remembered; popular queries come back in quickly


def bulk_table(
    items: Iterable[tuple[int, Query | str]], vocabulary: Vocabulary, limits: QueryLimits
) -> ConjunctionTable:
    """The conjunction table of ``items``; raises QueryError or SubscriptionIdError on bad input."""
    table = _BulkTable()
    cache: dict[str, tuple[ConjunctionKey, ...]] = {}
    text_words = vocabulary.words[0]
    for sub_id, query in items:
        sub_id = check_sub_id(sub_id)
        text = query if isinstance(query, str) else None
        keys = cache.get(text) if text is not None else None
        if keys is None:
            tokens = plain_word_tokens(text, limits) if text is not None else None
            if tokens is not None:
                ids = [text_words.get(token, -1) for token in tokens]
                for position, term_id in enumerate(ids):
                    if term_id < 0:
                        ids[position] = vocabulary.intern(Word("text", tokens[position]))
                ids.sort()
                keys = (tuple(ids),)
            else:
                parsed = parse_query(query, limits) if isinstance(query, str) else query
                keys = conjunction_keys(parsed, vocabulary)
            if text is not None:
                if len(cache) >= _CACHE_LIMIT:
                    cache.clear()
                cache[text] = keys
        table.add(sub_id, keys)
    return table.finish()


class _BulkTable:
    """Accumulates (subscription, conjunctions) into flat arrays for one vectorized build."""

    def __init__(self) -> None:
        self.term_start = array("q", [0])
        self.terms = array("i")
        self.owners = array("q")
        self.sub_ids = array("q")

    def add(self, sub_id: int, keys: tuple[ConjunctionKey, ...]) -> None:
        self.sub_ids.append(sub_id)
        for key in keys:
            self.terms.extend(key)
            self.term_start.append(len(self.terms))
            self.owners.append(sub_id)

    def finish(self) -> ConjunctionTable:
        sub_ids = np.sort(np.frombuffer(self.sub_ids, dtype=np.int64))
        repeated = sub_ids[1:][sub_ids[1:] == sub_ids[:-1]]
        if len(repeated):
            raise SubscriptionIdError(f"subscription id {int(repeated[0])} given twice")
        return ConjunctionTable(
            np.frombuffer(self.term_start, dtype=np.int64).copy(),
            np.frombuffer(self.terms, dtype=np.int32).copy(),
            np.arange(len(self.owners) + 1, dtype=np.int64),
            np.frombuffer(self.owners, dtype=np.int64).copy(),
        )
