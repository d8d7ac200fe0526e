"""An article tokenized once, packed for the wire: what the crawler sends every filter shard.

Tokenizing an article (:func:`~feedmesh.match.article.tokenize_article`) costs as much as matching
it against half a million subscriptions; when every filter shard does it for every article, the
shards duplicate it. The crawler does it once instead and sends :class:`PackedTokens` with the
article: each distinct token once (UTF-8, NUL-separated: tokens never contain NUL), then every
field's token sequence and aliases as int32 indices into them (numpy arrays as bytes, little
endian). :func:`unpack_tokens` gives back exactly the :class:`TokenizedArticle` the filter would
have computed; the index's fast path (:mod:`feedmesh.match.index.term_table`) maps the packed
tokens to term ids without a dict lookup per token.

``version`` says which layout this is: a reader that does not know it tokenizes the entry itself
(the entry always travels too), so a newer crawler never breaks an older filter.
"""

from __future__ import annotations

import itertools
from typing import Final

import msgspec
import numpy as np

from feedmesh.match.article import PHRASE_FIELDS, Article, TokenizedArticle, tokenize_article

__all__ = ["PACKED_VERSION", "PackedTokens", "pack_tokens", "unpack_tokens"]

PACKED_VERSION: Final = 1

_INDEX = np.dtype("<i4")
_SEPARATOR: Final = -1  # between title and body, and between two authors or categories


class PackedTokens(msgspec.Struct, frozen=True, kw_only=True):
    """A :class:`TokenizedArticle`, packed (see the module docstring)."""

    version: int = PACKED_VERSION
    tokens: bytes = b""
    """The distinct tokens and aliases, UTF-8, NUL-separated, in order of first appearance."""
    seq: bytes = b""
    """int32 indices into ``tokens`` (-1: a separator), the phrase fields back to back."""
    bounds: tuple[int, ...] = (0, 0, 0, 0, 0)
    """Field ``f`` (in ``PHRASE_FIELDS`` order) is ``seq[bounds[f]:bounds[f + 1]]``."""
    aliases: bytes = b""
    """int32 indices into ``tokens``: the aliases of hyphenated compounds, per field."""
    alias_bounds: tuple[int, ...] = (0, 0, 0, 0, 0)
    site: tuple[str, ...] = ()
    lang: tuple[str, ...] = ()
    truncated: bool = False

    def token_count(self) -> int:
        return self.tokens.count(b"\x00") + 1 if self.tokens else 0

    def seq_array(self) -> np.ndarray:
        return np.frombuffer(self.seq, dtype=_INDEX)

    def alias_array(self) -> np.ndarray:
        return np.frombuffer(self.aliases, dtype=_INDEX)

    def check(self) -> None:
        """Raise ValueError (saying what is wrong) unless the layout is whole and consistent."""
        if self.version != PACKED_VERSION:
            raise ValueError(f"packed tokens version {self.version}, this reader knows "
                             f"{PACKED_VERSION}")
        if len(self.seq) % 4 or len(self.aliases) % 4:
            raise ValueError("packed tokens: index arrays are not whole int32 values")
        for name, bounds, size in (("bounds", self.bounds, len(self.seq) // 4),
                                   ("alias_bounds", self.alias_bounds, len(self.aliases) // 4)):
            if (len(bounds) != len(PHRASE_FIELDS) + 1 or bounds[0] != 0 or bounds[-1] != size
                    or any(a > b for a, b in itertools.pairwise(bounds))):
                raise ValueError(f"packed tokens: {name} {bounds} do not split {size} indices")
        count = self.token_count()
        for name, indices in (("seq", self.seq_array()), ("aliases", self.alias_array())):
            if len(indices) and (indices.max() >= count or indices.min() < _SEPARATOR):
                raise ValueError(f"packed tokens: {name} points past the {count} tokens")


def pack_tokens(article: Article | TokenizedArticle) -> PackedTokens:
    """Tokenize ``article`` (unless it already is) and pack it."""
    tokenized = article if isinstance(article, TokenizedArticle) else tokenize_article(article)
    numbers: dict[str, int] = {}
    seq: list[int] = []
    aliases: list[int] = []
    bounds = [0]
    alias_bounds = [0]
    for field in PHRASE_FIELDS:
        seq.extend(numbers.setdefault(token, len(numbers)) if token else _SEPARATOR
                   for token in tokenized.sequences[field])
        bounds.append(len(seq))
        aliases.extend(numbers.setdefault(alias, len(numbers))
                       for alias in tokenized.aliases[field])
        alias_bounds.append(len(aliases))
    return PackedTokens(
        tokens="\x00".join(numbers).encode(),
        seq=np.asarray(seq, dtype=_INDEX).tobytes(),
        bounds=tuple(bounds),
        aliases=np.asarray(aliases, dtype=_INDEX).tobytes(),
        alias_bounds=tuple(alias_bounds),
        site=tuple(tokenized.site),
        lang=tuple(tokenized.lang),
        truncated=tokenized.truncated,
    )


def unpack_tokens(packed: PackedTokens) -> TokenizedArticle:
    """The :class:`TokenizedArticle` that was packed (ValueError if ``packed`` is not whole)."""
    packed.check()
    tokens = packed.tokens.decode().split("\x00") if packed.tokens else []
    table = [*tokens, ""]  # index -1: the separator
    seq = packed.seq_array().tolist()
    aliases = packed.alias_array().tolist()
    sequences: dict[str, list[str]] = {}
    alias_lists: dict[str, list[str]] = {}
    for f, field in enumerate(PHRASE_FIELDS):
        sequences[field] = [table[i] for i in seq[packed.bounds[f]:packed.bounds[f + 1]]]
        alias_lists[field] = [table[i] for i in
                              aliases[packed.alias_bounds[f]:packed.alias_bounds[f + 1]]]
    return TokenizedArticle(sequences, alias_lists, list(packed.site), list(packed.lang),
                            packed.truncated)
