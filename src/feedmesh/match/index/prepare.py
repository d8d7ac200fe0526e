"""Turn a tokenized article into what the kernels read: term ids, and token ids in order.

Only terms that some subscription uses have ids, so each token costs one dict lookup and unknown
tokens are dropped on the spot. Prefix terms are found by looking up the token's first ``n``
characters for each prefix length ``n`` in use. Token positions (``seq``) are built only for fields
where some subscription has a phrase; elsewhere a set of distinct tokens is enough.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from feedmesh.match.article import PHRASE_FIELDS, TokenizedArticle
from feedmesh.match.index.compiled import sorted_unique
from feedmesh.match.index.vocabulary import FIELD_CODES, Vocabulary

__all__ = ["PreparedArticle", "prepare_article"]

_SITE = FIELD_CODES["site"]
_LANG = FIELD_CODES["lang"]
_NO_TOKENS = np.empty(0, dtype=np.int32)


class PreparedArticle:
    """``terms``: sorted unique term ids present; ``seq``/``bounds``: token ids per phrase field."""

    __slots__ = ("bounds", "seq", "terms")

    def __init__(self, terms: np.ndarray, seq: np.ndarray, bounds: np.ndarray) -> None:
        self.terms = terms  # int32, sorted, unique
        self.seq = seq  # int32 token ids (-1 unknown/separator), fields back to back
        self.bounds = bounds  # int64[5]: field f occupies seq[bounds[f]:bounds[f+1]]


def prepare_article(article: TokenizedArticle, vocabulary: Vocabulary) -> PreparedArticle:
    found: list[int] = []
    sequences: list[np.ndarray] = []
    bounds = [0]
    for code, field in enumerate(PHRASE_FIELDS):
        words = vocabulary.words[code]
        prefixes = vocabulary.prefixes[code]
        tokens = article.sequences[field]
        if not tokens or not (words or prefixes):
            bounds.append(bounds[-1])
            continue
        distinct = set(tokens)
        distinct_ids = list(map(words.get, distinct, repeat(-1)))  # the big dict: once per token
        found.extend(distinct_ids)
        if vocabulary.phrases_per_field[code]:
            # Positions go through a small dict of this article's tokens, which stays in cache.
            local = dict(zip(distinct, distinct_ids, strict=True))
            ids = np.fromiter(map(local.__getitem__, tokens), dtype=np.int32, count=len(tokens))
            sequences.append(ids)
            bounds.append(bounds[-1] + len(ids))
        else:
            bounds.append(bounds[-1])
        aliases = article.aliases[field]
        if aliases:
            found.extend(map(words.get, aliases, repeat(-1)))
            distinct.update(aliases)
        if prefixes:
            shortest, stems = vocabulary.prefix_stems(code)
            candidates = [token for token in distinct if token[:shortest] in stems]
            for length, by_prefix in prefixes.items():
                found.extend(
                    by_prefix.get(token[:length], -1)
                    for token in candidates if len(token) >= length
                )
    for code, values in ((_SITE, article.site), (_LANG, article.lang)):
        if values and vocabulary.words[code]:
            found.extend(map(vocabulary.words[code].get, values, repeat(-1)))
    terms = sorted_unique(np.array(found, dtype=np.int32)) if found else _NO_TOKENS
    if len(terms) and terms[0] < 0:
        terms = terms[1:]
    seq = np.concatenate(sequences) if sequences else _NO_TOKENS
    return PreparedArticle(terms, seq, np.array(bounds, dtype=np.int64))
