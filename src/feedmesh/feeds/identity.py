"""Entry identity: the one place that decides which entry is which, and whether it changed.

Two values, computed here and nowhere else:

``entry_key`` - *which* entry this is, stable across fetches of the same feed. The cascade:

1. the id the publisher declared (RSS ``guid``, Atom ``id``, RSS 1.0 ``rdf:about``, JSON Feed
   ``id``), verbatim except for surrounding whitespace;
2. else the entry's link (absolute, after xml:base resolution);
3. else ``"hash:"`` + a hash of the normalized title and body (content, or summary when there is
   no content).

Inside one document, keys must be unique. When several entries share a key (a CMS that gives
every item the same guid, a feed that repeats a link):

* each member of the group gets a suffix: ``key + " " + link`` when its link tells it apart,
  else ``key + " #" + content hash``. Every member is suffixed, so the result does not depend on
  the order the items appear in, and the same entry keeps the same key on the next fetch as long
  as the collision persists;
* exact copies (same key, link and content) are kept - the parser reports what the document
  says - and numbered in document order (``" #2"``); the store's content-hash rule below makes
  sure a reader sees such a copy once.

``content_hash`` - *what a reader sees* of the entry: its title, link, summary and content,
whitespace-normalized, hashed (BLAKE2b, 128 bits, hex). It changes when the entry is edited and
only then; the declared id, dates and ordering do not enter it.

Division of labour with the store (:mod:`feedmesh.store`): the parser only guarantees unique,
stable keys within one document. Across fetches, the store drops an entry whose key it has seen
with the same content hash (unchanged), records an update when the key is known but the hash is
new, and also drops an entry whose content hash it has already seen in that feed under another
key. That last rule is what protects users from feeds whose guids change on every fetch (a
session id or timestamp in the guid): the key is new each time, the content is not.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import msgspec

from feedmesh.model import Entry

__all__ = ["content_hash", "entry_key", "normalize_text", "unique_keys"]

_SEPARATOR = "\x1f"  # unit separator: cannot occur in normalized feed text


def normalize_text(text: str) -> str:
    """Whitespace runs become one space; leading and trailing whitespace goes."""
    return " ".join(text.split())


def _digest(parts: Iterable[str]) -> str:
    joined = _SEPARATOR.join(normalize_text(part) for part in parts)
    return hashlib.blake2b(joined.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def content_hash(title: str, link: str, summary: str, content: str) -> str:
    """Hash of what a reader sees of an entry; equal for equal-looking entries."""
    return _digest((title, link, summary, content))


def entry_key(guid: str, link: str, title: str, body: str) -> str:
    """The identity cascade: declared id, else link, else a hash of title and body."""
    declared = guid.strip()
    if declared:
        return declared
    if link:
        return link
    return "hash:" + _digest((title, body))


def unique_keys(entries: Sequence[Entry]) -> tuple[Entry, ...]:
    """Make keys unique within one document, as the module docstring describes."""
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry.key] = counts.get(entry.key, 0) + 1
    if len(counts) == len(entries):
        return tuple(entries)
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        if counts[entry.key] > 1:
            groups.setdefault(entry.key, []).append(entry)
    renamed: dict[int, Entry] = {}
    for key, members in groups.items():
        link_counts: dict[str, int] = {}
        for member in members:
            link_counts[member.link] = link_counts.get(member.link, 0) + 1
        for member in members:
            if member.link and link_counts[member.link] == 1 and member.link != key:
                suffix = " " + member.link
            else:
                suffix = " #" + member.content_hash
            renamed[id(member)] = msgspec.structs.replace(member, key=key + suffix)
    return _number_copies([renamed.get(id(entry), entry) for entry in entries])


def _number_copies(entries: list[Entry]) -> tuple[Entry, ...]:
    """Exact copies (and, in contrived documents, a suffixed key equal to another entry's key)
    still collide: number them in document order, " #2", " #3"."""
    taken: set[str] = set()
    result = []
    for entry in entries:
        key, ordinal = entry.key, 1
        while key in taken:
            ordinal += 1
            key = f"{entry.key} #{ordinal}"
        taken.add(key)
        result.append(entry if key == entry.key else msgspec.structs.replace(entry, key=key))
    return tuple(result)
