"""The term dictionary: every distinct term any subscription used, with a dense integer id.

A *term* is a word, a prefix or a phrase within one field. Ids are dense and never reused, so the
index can keep per-term arrays (posting-list starts, frequency estimates, the scratch "present"
flags of the matcher) and compare terms as integers.

Lookups are organized for the article side, which is the hot path: per field, ``words[field]`` maps
a token straight to its id (no key building per token), and ``prefixes[field][length]`` maps the
first ``length`` characters of a token to the id of that prefix term. Phrases also get an entry in
the phrase tables (field, word ids), which the matching kernels read to check positions.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from feedmesh.match.article import PHRASE_FIELDS
from feedmesh.match.index.growable import Growable
from feedmesh.match.query import FIELDS, Prefix, Term, Word

__all__ = ["FIELD_CODES", "KIND_PHRASE", "KIND_PREFIX", "KIND_WORD", "PhraseTables", "Vocabulary"]

FIELD_CODES: Final = {name: code for code, name in enumerate(FIELDS)}
"""text=0, title=1, author=2, category=3 (the fields with positions, in PHRASE_FIELDS order),
site=4, lang=5."""
assert tuple(FIELDS[: len(PHRASE_FIELDS)]) == PHRASE_FIELDS

KIND_WORD: Final = 0
KIND_PREFIX: Final = 1
KIND_PHRASE: Final = 2


class PhraseTables:
    """Read-only arrays the kernels use to check phrases (views: valid until the next append)."""

    __slots__ = ("field", "of_term", "start", "words")

    def __init__(
        self, of_term: np.ndarray, field: np.ndarray, start: np.ndarray, words: np.ndarray
    ) -> None:
        self.of_term = of_term  # per term id: its phrase number, or -1
        self.field = field  # per phrase: field code (0..3)
        self.start = start  # per phrase: start of its word ids in ``words`` (len = phrases + 1)
        self.words = words  # word term ids of every phrase, concatenated


class Vocabulary:
    """Append-only map between terms and dense ids."""

    def __init__(self) -> None:
        self.words: list[dict[str, int]] = [{} for _ in FIELDS]
        self.prefixes: list[dict[int, dict[str, int]]] = [{} for _ in FIELDS]
        self.phrases: dict[tuple[int, tuple[str, ...]], int] = {}
        self._stems: list[tuple[int, frozenset[str]] | None] = [None] * len(FIELDS)
        self.phrases_per_field = [0] * len(FIELDS)
        self.texts: list[str] = []  # per id: the token, prefix, or phrase tokens joined by " "
        self.fields = Growable(np.int8)  # per id: field code
        self.kinds = Growable(np.int8)  # per id: KIND_WORD, KIND_PREFIX or KIND_PHRASE
        self._phrase_of_term = Growable(np.int32)
        self._phrase_field = Growable(np.int32)
        self._phrase_start = Growable(np.int32, [0])
        self._phrase_words = Growable(np.int32)

    def __len__(self) -> int:
        return len(self.texts)

    def key(self, term_id: int) -> tuple[int, int, str]:
        """(field code, kind, text) of a term."""
        return (int(self.fields.view()[term_id]), int(self.kinds.view()[term_id]),
                self.texts[term_id])

    # --- terms -> ids --------------------------------------------------------------------------

    def lookup(self, term: Term) -> int | None:
        """The id of ``term``, or None if no subscription ever used it."""
        field = FIELD_CODES[term.field]
        if isinstance(term, Word):
            return self.words[field].get(term.token)
        if isinstance(term, Prefix):
            return self.prefixes[field].get(len(term.prefix), {}).get(term.prefix)
        return self.phrases.get((field, term.tokens))

    def intern(self, term: Term) -> int:
        """The id of ``term``, adding it (and a phrase's words) if new."""
        field = FIELD_CODES[term.field]
        if isinstance(term, Word):
            known = self.words[field].get(term.token)
            return known if known is not None else self._intern_word(field, term.token)
        if isinstance(term, Prefix):
            by_length = self.prefixes[field].setdefault(len(term.prefix), {})
            known = by_length.get(term.prefix)
            if known is not None:
                return known
            term_id = self._new_term(field, KIND_PREFIX, term.prefix)
            by_length[term.prefix] = term_id
            self._stems[field] = None
            return term_id
        return self._intern_phrase(field, term.tokens)

    def prefix_stems(self, field: int) -> tuple[int, frozenset[str]]:
        """(n, the first n characters of every prefix of ``field``), n the shortest prefix length.

        A token whose first n characters are not in the set cannot start with any prefix, so the
        article side tests most tokens with one set lookup instead of one per prefix length.
        """
        stems = self._stems[field]
        if stems is None:
            lengths = self.prefixes[field]
            shortest = min(lengths) if lengths else 0
            stems = (shortest, frozenset(p[:shortest] for table in lengths.values() for p in table))
            self._stems[field] = stems
        return stems

    def phrase_word_ids(self, term_id: int) -> np.ndarray:
        """The word ids a phrase term implies (a phrase needs all its words present)."""
        phrase = int(self._phrase_of_term.view()[term_id])
        start = self._phrase_start.view()
        return self._phrase_words.view()[start[phrase] : start[phrase + 1]]

    def _intern_word(self, field: int, token: str) -> int:
        words = self.words[field]
        known = words.get(token)
        if known is not None:
            return known
        term_id = self._new_term(field, KIND_WORD, token)
        words[token] = term_id
        return term_id

    def _intern_phrase(self, field: int, tokens: tuple[str, ...]) -> int:
        known = self.phrases.get((field, tokens))
        if known is not None:
            return known
        word_ids = [self._intern_word(field, token) for token in tokens]
        term_id = self._new_term(field, KIND_PHRASE, " ".join(tokens))
        self.phrases[(field, tokens)] = term_id
        self._phrase_of_term.view()[term_id] = len(self._phrase_field)
        self._phrase_field.append(field)
        self._phrase_words.extend(np.asarray(word_ids, dtype=np.int32))
        self._phrase_start.append(len(self._phrase_words))
        self.phrases_per_field[field] += 1
        return term_id

    def _new_term(self, field: int, kind: int, text: str) -> int:
        term_id = len(self.texts)
        self.texts.append(text)
        self.fields.append(field)
        self.kinds.append(kind)
        self._phrase_of_term.append(-1)
        return term_id

    # --- arrays for the kernels, and serialization -----------------------------------------------

    def phrase_tables(self) -> PhraseTables:
        return PhraseTables(
            self._phrase_of_term.view(),
            self._phrase_field.view(),
            self._phrase_start.view(),
            self._phrase_words.view(),
        )

    def text_blob(self) -> bytes:
        """Every term's text, NUL-separated, UTF-8 (tokens contain no NUL); see from_arrays()."""
        return "\x00".join(self.texts).encode()

    @classmethod
    def from_arrays(cls, texts: bytes, fields: np.ndarray, kinds: np.ndarray) -> Vocabulary:
        """Rebuild a vocabulary from :meth:`text_blob`, ``fields`` and ``kinds`` (ids = positions).

        Words are loaded in bulk, one C-level dict construction per field; prefixes and phrases,
        which are few, one by one. Raises ValueError on input :meth:`text_blob` could not produce.
        """
        vocabulary = cls()
        if len(fields) != len(kinds):
            raise ValueError("fields and kinds differ in length")
        if not len(fields):
            if texts:
                raise ValueError("texts without terms")
            return vocabulary
        vocabulary.texts = texts.decode().split("\x00")
        count = len(vocabulary.texts)
        if count != len(fields):
            raise ValueError(f"{count} texts for {len(fields)} terms")
        if (fields.min() < 0 or fields.max() >= len(FIELDS)
                or kinds.min() < 0 or kinds.max() > KIND_PHRASE):
            raise ValueError("unknown field or kind code")
        vocabulary.fields = Growable(np.int8, fields)
        vocabulary.kinds = Growable(np.int8, kinds)
        vocabulary._phrase_of_term = Growable(np.int32, np.full(count, -1, dtype=np.int32))
        texts_array = np.array(vocabulary.texts, dtype=object)
        for field in range(len(FIELDS)):
            ids = np.flatnonzero((fields == field) & (kinds == KIND_WORD))
            words = dict(zip(texts_array[ids].tolist(), ids.tolist(), strict=True))
            if len(words) != len(ids):
                raise ValueError(f"a word of field {FIELDS[field]} appears twice")
            vocabulary.words[field] = words
        for term_id in np.flatnonzero(kinds != KIND_WORD).tolist():
            field, kind, text = vocabulary.key(term_id)
            if kind == KIND_PREFIX:
                table = vocabulary.prefixes[field].setdefault(len(text), {})
                if table.setdefault(text, term_id) != term_id:
                    raise ValueError(f"prefix {text!r} appears twice")
                vocabulary._stems[field] = None
            else:
                vocabulary._load_phrase(term_id, field, text)
        return vocabulary

    def _load_phrase(self, term_id: int, field: int, text: str) -> None:
        tokens = tuple(text.split(" "))
        words = self.words[field]
        if len(tokens) < 2 or any(token not in words or words[token] > term_id for token in tokens):
            raise ValueError(f"phrase {text!r} does not follow its words")
        if self.phrases.setdefault((field, tokens), term_id) != term_id:
            raise ValueError(f"phrase {text!r} appears twice")
        self._phrase_of_term.view()[term_id] = len(self._phrase_field)
        self._phrase_field.append(field)
        self._phrase_words.extend(np.asarray([words[token] for token in tokens], dtype=np.int32))
        self._phrase_start.append(len(self._phrase_words))
        self.phrases_per_field[field] += 1
