"""Compile a parsed :class:`~feedmesh.match.query.Query` into term-id conjunctions.

Every term is interned in the vocabulary (new terms get a prior in the statistics). A positive
phrase also requires each of its words, which become ordinary positive terms: that lets a
phrase-only query be filed under its rarest word, and rejects most candidates before any position is
looked at.
"""

from __future__ import annotations

from feedmesh.match.index.delta import CompiledConjunction
from feedmesh.match.index.statistics import TermStatistics
from feedmesh.match.index.vocabulary import KIND_PHRASE, Vocabulary
from feedmesh.match.query import Phrase, Query

__all__ = ["compile_query", "conjunction_keys", "sync_statistics"]

ConjunctionKey = tuple[int, ...]


def sync_statistics(vocabulary: Vocabulary, statistics: TermStatistics) -> None:
    """Give every term added to ``vocabulary`` since the last call its prior."""
    for term_id in range(len(statistics), len(vocabulary)):
        statistics.add_term(*vocabulary.key(term_id))


def _term_sets(query: Query, vocabulary: Vocabulary) -> list[tuple[set[int], set[int]]]:
    drafts: list[tuple[set[int], set[int]]] = []
    for conjunction in query.conjunctions:
        positive: set[int] = set()
        for term in conjunction.positive:
            term_id = vocabulary.intern(term)
            positive.add(term_id)
            if isinstance(term, Phrase):
                positive.update(vocabulary.phrase_word_ids(term_id).tolist())
        negative = {vocabulary.intern(term) for term in conjunction.negative}
        drafts.append((positive, negative))
    return drafts


def conjunction_keys(query: Query, vocabulary: Vocabulary) -> tuple[ConjunctionKey, ...]:
    """Just the term ids of each conjunction (sorted; NOT terms as -(id+1)), for bulk builds.

    Call :func:`sync_statistics` before using the statistics again.
    """
    return tuple(
        tuple(sorted([*positive, *(-t - 1 for t in negative)]))
        for positive, negative in _term_sets(query, vocabulary)
    )


def compile_query(
    query: Query, vocabulary: Vocabulary, statistics: TermStatistics
) -> tuple[CompiledConjunction, ...]:
    """The conjunctions of ``query`` in term ids, each with its access term chosen."""
    drafts = _term_sets(query, vocabulary)
    sync_statistics(vocabulary, statistics)
    kinds = vocabulary.kinds.view()
    compiled = []
    for positive, negative in drafts:
        candidates = [t for t in positive if kinds[t] != KIND_PHRASE]
        estimates = statistics.estimate(candidates)
        words = [t for _, t in sorted(zip(estimates, candidates, strict=True))]
        phrases = tuple(sorted(t for t in positive if kinds[t] == KIND_PHRASE))
        key = tuple(sorted([*positive, *(-t - 1 for t in negative)]))
        compiled.append(
            CompiledConjunction(key, words[0], tuple(words[1:]), phrases, tuple(sorted(negative)))
        )
    return tuple(compiled)
