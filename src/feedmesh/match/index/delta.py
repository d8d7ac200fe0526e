"""The small mutable part of the index: subscriptions added since the last compaction.

Adding or removing is O(terms of the query), with no rebuild; matching is plain Python over the
posting lists of the article's terms, which is fast while the delta stays small (the owning
:class:`~feedmesh.match.index.subscriptions.SubscriptionIndex` compacts it into the main index
when it grows). Conjunctions are keyed by their sorted term ids, so identical ones share one entry.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from feedmesh.match.index.compiled import ConjunctionTable, empty_table

__all__ = ["CompiledConjunction", "DeltaIndex"]

ConjunctionKey = tuple[int, ...]  # sorted term ids, NOT terms as -(id+1)


class CompiledConjunction:
    """One conjunction in term ids: filed under ``access``; the rest checked in this order."""

    __slots__ = ("access", "key", "negatives", "phrases", "words")

    def __init__(
        self, key: ConjunctionKey, access: int, words: tuple[int, ...], phrases: tuple[int, ...],
        negatives: tuple[int, ...],
    ) -> None:
        self.key = key
        self.access = access
        self.words = words  # other positive words/prefixes
        self.phrases = phrases  # positive phrases
        self.negatives = negatives  # NOT terms (plain ids)


class DeltaIndex:
    def __init__(self) -> None:
        self._conjunctions_of: dict[int, tuple[CompiledConjunction, ...]] = {}
        self._owners: dict[ConjunctionKey, set[int]] = {}
        self._filed: dict[ConjunctionKey, CompiledConjunction] = {}  # as filed by its first owner
        self._postings: dict[int, dict[ConjunctionKey, CompiledConjunction]] = {}

    def __len__(self) -> int:
        return len(self._conjunctions_of)

    def __contains__(self, sub_id: int) -> bool:
        return sub_id in self._conjunctions_of

    def ids(self) -> list[int]:
        """The subscriptions held, in no order."""
        return list(self._conjunctions_of)

    def add(self, sub_id: int, conjunctions: tuple[CompiledConjunction, ...]) -> None:
        """File ``sub_id`` (which must not be in the delta already) under its conjunctions."""
        self._conjunctions_of[sub_id] = conjunctions
        for conjunction in conjunctions:
            owners = self._owners.get(conjunction.key)
            if owners is None:
                self._owners[conjunction.key] = {sub_id}
                self._filed[conjunction.key] = conjunction
                self._postings.setdefault(conjunction.access, {})[conjunction.key] = conjunction
            else:
                owners.add(sub_id)

    def remove(self, sub_id: int) -> bool:
        conjunctions = self._conjunctions_of.pop(sub_id, None)
        if conjunctions is None:
            return False
        for conjunction in conjunctions:
            owners = self._owners[conjunction.key]
            owners.discard(sub_id)
            if not owners:
                del self._owners[conjunction.key]
                access = self._filed.pop(conjunction.key).access
                posting = self._postings[access]
                del posting[conjunction.key]
                if not posting:
                    del self._postings[access]
        return True

    def match(self, terms: set[int], phrase_holds: Callable[[int], bool]) -> set[int]:
        """Subscriptions whose query the article satisfies; ``terms`` are its term ids."""
        matched: set[int] = set()
        postings = self._postings
        for term in terms if len(terms) < len(postings) else postings.keys() & terms:
            posting = postings.get(term)
            if posting is None:
                continue
            for key, conjunction in posting.items():
                if (
                    all(word in terms for word in conjunction.words)
                    and all(phrase_holds(phrase) for phrase in conjunction.phrases)
                    and not any(
                        negative in terms or phrase_holds(negative)
                        for negative in conjunction.negatives
                    )
                ):
                    matched |= self._owners[key]
        return matched

    def to_table(self) -> ConjunctionTable:
        """Every conjunction with its owners, for merging into the main index."""
        if not self._owners:
            return empty_table()
        term_start, terms, owner_start, owners = [0], [], [0], []
        for key, key_owners in self._owners.items():
            terms.extend(key)
            term_start.append(len(terms))
            owners.extend(sorted(key_owners))
            owner_start.append(len(owners))
        return ConjunctionTable(
            np.array(term_start, dtype=np.int64),
            np.array(terms, dtype=np.int32),
            np.array(owner_start, dtype=np.int64),
            np.array(owners, dtype=np.int64),
        )
