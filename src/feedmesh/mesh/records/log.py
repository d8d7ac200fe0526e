"""The receiver's state for one feed: what it has verified, what it is missing, what it refused.

Pure: bytes in, a :class:`Verdict` out. A record is *delivered* only when its signature holds, its
key is the log's current key, and it extends the chain (``seq`` = head + 1, ``prev`` = hash of the
head). A record ahead of the head is checked against the current key and held until the gap is
filled; the verdict says which seqs to recover (from the parent's buffer, else the HTTP feed).

Reasons for refusal (stable words, counted in :attr:`FeedLog.refused`):

* ``unsigned``, ``malformed``, ``not-canonical``, ``bad-signature`` - see :func:`open_record`;
* ``wrong-feed`` - a record of another log or another URL;
* ``wrong-key`` - validly signed, by a key that is not the log's current key;
* ``revoked`` - the log was closed by a revocation (or the key revoked out of band);
* ``untrusted-republication`` - a republisher's record where republications are not trusted,
  or a republication flag that does not match what this log is;
* ``replayed`` - a seq at or below the head (an old record sent again);
* ``out-of-chain`` - the right seq whose ``prev`` is not the head's hash (a fork);
* ``too-far-ahead`` - beyond the held window (``max_held``): recover first.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from feedmesh.mesh.records.record import InvalidRecord, Record, open_record
from feedmesh.mesh.records.rotation import key_succession

__all__ = ["FeedLog", "Verdict"]


@dataclass(frozen=True, slots=True)
class Verdict:
    delivered: tuple[Record, ...] = ()
    refused: str | None = None
    detail: str = ""
    missing: tuple[int, ...] = ()

    @property
    def held(self) -> bool:
        return self.refused is None and not self.delivered


class FeedLog:
    """Verification state for the log of one feed, as one subscriber sees it.

    ``feed_key`` is the key the subscriber bootstrapped with (from the feed's ``<publicKey>``);
    ``republication`` says this log is a republisher's, which the subscriber chose to trust."""

    def __init__(self, feed_key: str, url: str, *, republication: bool = False,
                 head: tuple[int, str | None] = (0, None), max_held: int = 256) -> None:
        self.feed = feed_key
        self.url = url
        self.republication = republication
        self.key = feed_key
        self.seq, self.head_hash = head
        self.revoked = False
        self.refused: Counter[str] = Counter()
        self.skipped = 0
        self.max_held = max_held
        self._held: dict[int, Record] = {}
        self._revoked_keys: set[str] = set()
        self._announced = 0        # newest seq a parent said exists (unauthenticated)
        self._succession: tuple[str, ...] = (feed_key,)   # the log's keys in order, if known
        self._resync = False       # the HTTP fallback covered an announced gap: see skip_gap
        self._covered = 0          # the announced seq that gap reached: not announced again

    @property
    def missing(self) -> tuple[int, ...]:
        """Seqs known to exist and not held: below a held record, or up to an announced seq."""
        top = max(self._held) if self._held else self.seq + 1
        top = max(top, min(self._announced, self.seq + self.max_held) + 1)
        return tuple(s for s in range(self.seq + 1, top) if s not in self._held)

    def learn_rotations(self, statements: list[str] | tuple[str, ...]) -> None:
        """Learn the log's key succession from signed rotation statements (a feed's
        ``<subscribe>``, :mod:`~feedmesh.mesh.records.rotation`): a record signed by a later key
        of the chain than the current one is then accepted, and the log moves to that key, even
        without the ``rotate`` record (a subscriber that bootstrapped after the rotation, or whose
        gap held it); keys before the current one stay refused. ValueError says why a chain is
        refused (and nothing is learned)."""
        succession = key_succession(self.feed, statements)
        if len(succession.keys) < len(self._succession) or \
                succession.keys[:len(self._succession)] != self._succession:
            if self._succession[:len(succession.keys)] == succession.keys:
                return   # an older chain than the one we know: nothing new
            raise ValueError("the rotations contradict the key chain this log knows")
        self._succession = succession.keys
        if succession.revoked:
            self._revoked_keys.add(succession.keys[-1])
            if self.key == succession.keys[-1]:
                self.revoked = True

    def _key_accepted(self, key: str) -> bool:
        """The current key, or a later one of the known succession."""
        if key == self.key:
            return True
        order = self._succession
        return key in order and self.key in order and order.index(key) > order.index(self.key)

    def announce(self, newest: int) -> None:
        """A parent says records up to ``newest`` exist (its heartbeat): until they come, they
        are :attr:`missing`, so a node back from a long absence that holds none of them still
        sees the gap (and falls back to the HTTP feed when no parent supplies them)."""
        if not self.revoked and not (self._resync and newest <= self._covered):
            # (a gap the HTTP fallback covered stays covered when the parent repeats its
            # newest seq in every heartbeat: only a newer seq opens a gap again)
            self._announced = max(self._announced, newest)

    def revoke_key(self, key: str) -> None:
        """Out-of-band revocation (e.g. read from the feed's HTTP document)."""
        self._revoked_keys.add(key)
        if key == self.key:
            self.revoked = True

    def skip_gap(self) -> Verdict:
        """Give up on the records before the lowest held one (neither the parents' buffers nor
        the HTTP feed had them signed) and carry on from it.

        The held record's signature and key were checked when it arrived; its signed ``prev``
        becomes the head hash, so the chain stays checked from there on. What was skipped is
        counted in :attr:`skipped`; its entries are the caller's to take from the HTTP feed."""
        if self.revoked:
            return Verdict()
        if not self._held:
            # only announced, nothing held: forget the announcement, and take the next signed
            # record that comes as the new start of the chain (as if it had been held here)
            if self._announced > self.seq:
                self._covered = max(self._covered,
                                    min(self._announced, self.seq + self.max_held))
                self._announced = self.seq
                self._resync = True
            return Verdict()
        self._resync = False
        first = min(self._held)
        record = self._held.pop(first)
        self.skipped += first - self.seq - 1
        self.seq, self.head_hash = first - 1, record.prev
        return self.receive(record.wire)

    def receive(self, wire: bytes) -> Verdict:
        try:
            record = open_record(wire)
            self._check(record)
        except InvalidRecord as error:
            self.refused[error.reason] += 1
            return Verdict(refused=error.reason, detail=error.detail, missing=self.missing)
        if record.seq > self.seq + 1:
            if self._resync:
                self._resync = False
                self.skipped += record.seq - self.seq - 1
                self.seq, self.head_hash = record.seq - 1, record.prev
                return self.receive(wire)
            self._held[record.seq] = record
            return Verdict(missing=self.missing)
        delivered = [record]
        self._advance(record)
        while not self.revoked and self.seq + 1 in self._held:
            following = self._held.pop(self.seq + 1)
            if not self._key_accepted(following.key) or following.prev != self.head_hash:
                # held under the old key or on another branch: refuse it now, recover it again
                self.refused["out-of-chain" if self._key_accepted(following.key)
                             else "wrong-key"] += 1
                break
            delivered.append(following)
            self._advance(following)
        return Verdict(delivered=tuple(delivered), missing=self.missing)

    def _check(self, record: Record) -> None:
        if record.feed != self.feed or record.url != self.url:
            raise InvalidRecord("wrong-feed", f"record of {record.url} ({record.feed[:8]}), "
                                f"this log is {self.url} ({self.feed[:8]})")
        if record.republication != self.republication:
            raise InvalidRecord("untrusted-republication",
                                f"republication={record.republication} in a log that is "
                                f"{'a republisher' if self.republication else 'the publisher'}'s")
        if self.revoked or record.key in self._revoked_keys:
            raise InvalidRecord("revoked", f"the log is closed at seq {self.seq}")
        if record.seq <= self.seq:
            raise InvalidRecord("replayed", f"seq {record.seq} is at or below the head {self.seq}")
        if not self._key_accepted(record.key):
            raise InvalidRecord("wrong-key", f"signed by {record.key[:8]}, the current key is "
                                f"{self.key[:8]}")
        if record.seq == self.seq + 1 and record.prev != self.head_hash:
            raise InvalidRecord("out-of-chain", f"seq {record.seq} does not follow the head")
        if record.seq > self.seq + self.max_held and not self._resync:
            raise InvalidRecord("too-far-ahead", f"seq {record.seq}, head {self.seq}")

    def _advance(self, record: Record) -> None:
        self.seq, self.head_hash = record.seq, record.hash
        self._resync = False
        self.key = record.key   # the same, or a later key of the succession
        if record.type == "rotate" and record.new_key and record.new_key not in self._succession:
            self._succession = (*self._succession, record.new_key)
        if record.type == "rotate":
            self.key = record.new_key or self.key
        elif record.type == "revoke":
            self.revoked = True
            self._held.clear()
