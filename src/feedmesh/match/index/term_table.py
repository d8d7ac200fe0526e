"""Packed articles (:mod:`feedmesh.match.packed`) to term ids without a dict lookup per token.

:func:`prepare_packed` gives exactly what :func:`~.prepare.prepare_article` gives for the same
article (tests compare them), from the crawler's packed tokens: with numba, one compiled pass over
the tokens' bytes probes a :class:`TermTable` (a hash table of the vocabulary's words and prefixes,
:mod:`.term_table_kernel`); without numba, the tokens are unpacked and prepared the usual way.

The table follows the vocabulary, which only grows: terms added since the last article are filed
before the next one is prepared (the table doubles when half full).
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from feedmesh.match.article import PHRASE_FIELDS
from feedmesh.match.index.compiled import sorted_unique
from feedmesh.match.index.growable import Growable
from feedmesh.match.index.prepare import PreparedArticle, prepare_article
from feedmesh.match.index.vocabulary import FIELD_CODES, Vocabulary
from feedmesh.match.packed import PACKED_VERSION, PackedTokens, unpack_tokens

try:
    from feedmesh.match.index.term_table_kernel import insert_terms, prepare_packed_kernel
except ImportError:  # pragma: no cover - numba is the `fast` extra
    insert_terms = prepare_packed_kernel = None

__all__ = ["TermTable", "prepare_packed"]

_SITE = FIELD_CODES["site"]
_LANG = FIELD_CODES["lang"]
_PHRASE_FIELDS = len(PHRASE_FIELDS)


class TermTable:
    """The words and prefixes of one :class:`Vocabulary`, filed by hash for the kernel."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        self.covered = 0
        self._blob = Growable(np.uint8)
        self._starts = Growable(np.int64, [0])  # term i is blob[starts[i]:starts[i + 1] - 1]
        self.keys = np.zeros(0, dtype=np.uint64)
        self.ids = np.full(0, -1, dtype=np.int32)
        self.active = np.zeros(_PHRASE_FIELDS, dtype=np.bool_)
        self.phrase_fields = np.zeros(_PHRASE_FIELDS, dtype=np.bool_)
        self.prefix_lengths = np.zeros((_PHRASE_FIELDS, 1), dtype=np.bool_)

    def sync(self) -> None:
        """File the terms added to the vocabulary since the last call."""
        vocabulary = self.vocabulary
        total = len(vocabulary)
        if total == self.covered:
            return
        blob = ("\x00".join(vocabulary.texts[self.covered:]) + "\x00").encode()
        offset = len(self._blob)
        self._blob.extend(np.frombuffer(blob, dtype=np.uint8))
        self._starts.extend(offset + np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == 0) + 1)
        first = self.covered
        if 2 * total > len(self.keys):  # half full: a new table, twice as large as needed
            size = 1024
            while size < 4 * total:
                size *= 2
            self.keys = np.zeros(size, dtype=np.uint64)
            self.ids = np.full(size, -1, dtype=np.int32)
            first = 0
        insert_terms(self.keys, self.ids, self._blob.view(), self._starts.view(),
                     vocabulary.fields.view(), vocabulary.kinds.view(), first, total)
        self.covered = total
        longest = max((length for field in range(_PHRASE_FIELDS)
                       for length in vocabulary.prefixes[field]), default=0)
        self.prefix_lengths = np.zeros((_PHRASE_FIELDS, longest + 1), dtype=np.bool_)
        for field in range(_PHRASE_FIELDS):
            self.prefix_lengths[field, list(vocabulary.prefixes[field])] = True
            self.active[field] = bool(vocabulary.words[field] or vocabulary.prefixes[field])
            self.phrase_fields[field] = vocabulary.phrases_per_field[field] > 0

    def prepare(self, packed: PackedTokens) -> PreparedArticle:
        """What :func:`prepare_packed` says; the kernel checks the layout as it reads it (a
        check in Python cost a quarter of the preparing)."""
        if (packed.version != PACKED_VERSION or len(packed.seq) % 4 or len(packed.aliases) % 4
                or len(packed.bounds) != _PHRASE_FIELDS + 1
                or len(packed.alias_bounds) != _PHRASE_FIELDS + 1):
            packed.check()  # raises, saying what is wrong
        self.sync()
        vocabulary = self.vocabulary
        found, seq, bounds, whole = prepare_packed_kernel(
            np.frombuffer(packed.tokens, dtype=np.uint8), packed.seq_array(),
            np.asarray(packed.bounds, dtype=np.int64), packed.alias_array(),
            np.asarray(packed.alias_bounds, dtype=np.int64), self.active, self.phrase_fields,
            self.prefix_lengths, self.keys, self.ids, self._blob.view(), self._starts.view(),
            vocabulary.fields.view(), vocabulary.kinds.view())
        if not whole:
            packed.check()  # raises, saying what is wrong
            raise ValueError("packed tokens: not whole")
        extra = [term for code, values in ((_SITE, packed.site), (_LANG, packed.lang))
                 if values and vocabulary.words[code]
                 for term in map(vocabulary.words[code].get, values, repeat(-1)) if term >= 0]
        if extra:
            found = sorted_unique(np.concatenate([found, np.asarray(extra, dtype=np.int32)]))
        return PreparedArticle(found, seq, bounds)


def prepare_packed(packed: PackedTokens, vocabulary: Vocabulary,
                   table: TermTable | None) -> PreparedArticle:
    """What :func:`prepare_article` gives for the article ``packed`` holds. ``table`` (numba
    only: None without it) must be ``vocabulary``'s. Raises ValueError on a packed form that is
    not whole (a wrong version, indices past the tokens)."""
    if table is None:
        packed.check()
        return prepare_article(unpack_tokens(packed), vocabulary)
    return table.prepare(packed)


def new_term_table(vocabulary: Vocabulary) -> TermTable | None:
    """A table for ``vocabulary``, or None when numba is not installed."""
    return TermTable(vocabulary) if prepare_packed_kernel is not None else None
