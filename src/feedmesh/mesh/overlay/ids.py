"""The id space: 128-bit ids read as 32 digits of b = 4 bits, on a ring of 2**128.

A group id is the SHA-1 of the feed's canonical URL truncated to its first 128 bits (the top
digits of the 160-bit hash), so it lives in the same space as node ids. "Numerically closest" is the
distance on the ring; ties go to the smaller id so every node agrees.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from dataclasses import dataclass

__all__ = [
    "BASE", "DIGITS", "ID_BITS", "RING", "Handle", "closest", "digit", "group_id", "node_id",
    "republication_topic", "ring_distance", "shared_prefix",
]

ID_BITS = 128
B = 4
BASE = 1 << B
DIGITS = ID_BITS // B
RING = 1 << ID_BITS


@dataclass(frozen=True, slots=True)
class Handle:
    """A node as others know it: its id and the address its transport reaches it at."""

    id: int
    addr: Hashable

    def __repr__(self) -> str:
        return f"<{self.id:032x}@{self.addr}>"


def digit(value: int, row: int) -> int:
    return (value >> (ID_BITS - B * (row + 1))) & (BASE - 1)


def shared_prefix(a: int, b: int) -> int:
    """How many leading base-16 digits ``a`` and ``b`` share."""
    differing = a ^ b
    if differing == 0:
        return DIGITS
    return (ID_BITS - differing.bit_length()) // B


def ring_distance(a: int, b: int) -> int:
    forward = (a - b) % RING
    return min(forward, RING - forward)


def closest(key: int, handles) -> Handle:
    return min(handles, key=lambda h: (ring_distance(h.id, key), h.id))


def group_id(canonical_url: str) -> int:
    """The Scribe group of a feed: SHA-1 of its canonical URL, truncated to the id space."""
    # Scribe's group id is SHA-1 of the topic's name: an id, not a security check.
    digest = hashlib.sha1(canonical_url.encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest, "big") >> (160 - ID_BITS)


def republication_topic(canonical_url: str, republisher_key: str) -> str:
    """The group name of a republisher's log of a feed: the feed's URL and the republisher's key,
    so that each republisher's log (and the publisher's own) has a tree of its own."""
    return f"{canonical_url} republished-by {republisher_key}"


def node_id(seed: bytes) -> int:
    """A node id drawn from ``seed`` (a public key, or test bytes): uniform over the ring."""
    return int.from_bytes(hashlib.sha256(seed).digest()[:16], "big")
