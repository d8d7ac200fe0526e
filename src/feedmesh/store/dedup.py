"""Deciding what is new: Cobra's two hashes (section 3.1), pure functions.

1. *Whole-document hash*: an unchanged document is dropped before parsing, even when the server
   ignores conditional GET (:func:`document_hash`).
2. *Per-entry identity*: a parsed entry is **new** when neither its key (see
   :mod:`feedmesh.feeds.identity`) nor its content hash was seen in this feed before; **updated**
   when its key is known but its content hash changed; otherwise dropped. Checking the content hash
   as well as the key is what keeps feeds whose guids change on every fetch (or that move from http
   to https guids) from flooding subscribers with the same article again and again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from feedmesh.model import Entry

__all__ = ["classify_entries", "document_hash"]


def document_hash(body: bytes) -> int:
    """A 63-bit hash of a whole document (never 0, which means "no document yet")."""
    value = int.from_bytes(hashlib.blake2b(body, digest_size=8).digest(), "big") >> 1
    return value or 1


def classify_entries(entries: Iterable[Entry], known_keys: Mapping[str, str],
                     known_hashes: set[str] | frozenset[str]) -> tuple[list[Entry], list[Entry]]:
    """Split ``entries`` into (new, updated) against what the feed already holds.

    ``known_keys`` maps each stored entry key to its content hash; ``known_hashes`` is the set of
    stored content hashes. Within ``entries`` the first occurrence of a key or content wins.
    """
    new: list[Entry] = []
    updated: list[Entry] = []
    seen_keys: set[str] = set()
    seen_hashes: set[str] = set()
    for entry in entries:
        if entry.key in seen_keys or entry.content_hash in seen_hashes:
            continue
        seen_keys.add(entry.key)
        seen_hashes.add(entry.content_hash)
        previous = known_keys.get(entry.key)
        if previous is None:
            if entry.content_hash not in known_hashes:
                new.append(entry)
        elif previous != entry.content_hash:
            updated.append(entry)
    return new, updated
