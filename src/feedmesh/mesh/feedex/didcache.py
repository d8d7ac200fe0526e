"""Which bundle ids (dids) a node has seen: the latest exactly, older ones in a Bloom filter (3.4).

The paper's prototype keeps the 1,000 latest dids and suggests a Bloom filter for a large cache.
:class:`DidCache` does both: a bounded insertion-ordered dict answers exactly for the latest
``exact`` dids; a did pushed out of it goes into a :class:`BloomFilter`. The filter has two
generations of ``bloom_capacity`` each: when the current one is full it becomes the previous one
and the oldest is cleared, so memory stays bounded however long the node runs and a did is
remembered for at least ``exact + bloom_capacity`` later dids. A Bloom filter never forgets
what it holds (no false "unseen": no duplicate put) and answers "seen" falsely with probability
``error_rate`` (a bundle skipped, whose entries come again by another path or the node's own fetch).
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict

__all__ = ["BloomFilter", "DidCache"]


class BloomFilter:
    """A fixed-size Bloom filter over bytes keys (double hashing over a BLAKE2b digest)."""

    __slots__ = ("_bits", "capacity", "count", "hashes", "size_bits")

    def __init__(self, capacity: int, error_rate: float = 0.01) -> None:
        if capacity < 1 or not 0.0 < error_rate < 1.0:
            raise ValueError(f"need capacity >= 1 and 0 < error_rate < 1, got {capacity}, "
                             f"{error_rate}")
        self.capacity = capacity
        self.size_bits = max(64, math.ceil(-capacity * math.log(error_rate) / math.log(2) ** 2))
        self.hashes = max(1, round(self.size_bits / capacity * math.log(2)))
        self._bits = bytearray((self.size_bits + 7) // 8)
        self.count = 0

    def _positions(self, key: bytes) -> list[int]:
        digest = hashlib.blake2b(key, digest_size=16).digest()
        h1 = int.from_bytes(digest[:8], "little")
        h2 = int.from_bytes(digest[8:], "little") | 1
        m = self.size_bits
        return [(h1 + i * h2) % m for i in range(self.hashes)]

    def add(self, key: bytes) -> None:
        bits = self._bits
        for p in self._positions(key):
            bits[p >> 3] |= 1 << (p & 7)
        self.count += 1

    def __contains__(self, key: bytes) -> bool:
        bits = self._bits
        return all(bits[p >> 3] & (1 << (p & 7)) for p in self._positions(key))

    def clear(self) -> None:
        self._bits = bytearray(len(self._bits))
        self.count = 0


class DidCache:
    """Seen dids: exact for the latest ``exact``, then a two-generation Bloom filter."""

    __slots__ = ("_current", "_exact", "_latest", "_previous", "bloom_capacity", "error_rate")

    def __init__(self, exact: int = 1000, bloom_capacity: int = 100_000,
                 error_rate: float = 0.01) -> None:
        if exact < 1 or bloom_capacity < 1:
            raise ValueError(
                f"exact and bloom_capacity must be >= 1, got {exact}, {bloom_capacity}")
        self._exact = exact
        # an OrderedDict: dropping the oldest of a plain dict (del d[next(iter(d))]) skips the
        # dead slots left by earlier deletions, 5 us a call at 4,096 keys against 0.6
        self._latest: OrderedDict[bytes, None] = OrderedDict()
        self.bloom_capacity = bloom_capacity
        self.error_rate = error_rate
        self._current: BloomFilter | None = None  # made when the first did overflows
        self._previous: BloomFilter | None = None

    def add(self, did: bytes) -> None:
        latest = self._latest
        if did in latest:
            return
        latest[did] = None
        if len(latest) > self._exact:
            oldest, _ = latest.popitem(last=False)
            self._spill(oldest)

    def _spill(self, did: bytes) -> None:
        if self._current is None:
            self._current = BloomFilter(self.bloom_capacity, self.error_rate)
        elif self._current.count >= self.bloom_capacity:
            self._previous, self._current = self._current, self._previous
            if self._current is None:
                self._current = BloomFilter(self.bloom_capacity, self.error_rate)
            else:
                self._current.clear()
        self._current.add(did)

    def __contains__(self, did: bytes) -> bool:
        if did in self._latest:
            return True
        current, previous = self._current, self._previous
        return ((current is not None and did in current)
                or (previous is not None and did in previous))

    def __len__(self) -> int:
        """Dids remembered (exactly or not)."""
        spilled = sum(f.count for f in (self._current, self._previous) if f is not None)
        return len(self._latest) + spilled
