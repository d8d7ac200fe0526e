"""Fake entries (issue 13, "Bad peers"): a sample of the entries neighbours send us is checked
against our own next fetch of the source feed.

A neighbour could send entries the publisher never posted. Only the publisher can tell, and a
node asks it anyway: it follows the feeds it receives for and fetches them on its own policy. So
a random sample of the new entries a neighbour brings for a feed we follow is kept aside with
who sent it and when, and the next whole document we fetch of that feed judges them:

- listed in the document: real (``confirmed``);
- not listed, but published no later than the document's oldest listed entry: it may have
  scrolled out of the document's window since, so it cannot be judged (``unverifiable``);
- not listed and newer than that: the source never had it (``fake``): the sender's
  standing is lowered (the node decides by how much).

An entry noted less than ``grace_s`` before the fetch is judged at the fetch after (the document
may have been requested before the entry was posted). Undated entries are not sampled: nothing
says whether they fell out of the window. Checks wait at most ``max_age_s`` for a fetch; at most
``per_feed`` wait per feed (the oldest go first).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from .messages import Address, Entry

__all__ = ["EntryAudit", "Verdicts"]


class _Check(NamedTuple):
    sender: Address
    published: float
    noted_at: float


class Verdicts(NamedTuple):
    """What one fetched document said about the sampled entries of its feed."""

    fake: list[tuple[Address, str]]
    """(sender, entry key) of each entry the source never had."""
    confirmed: int
    unverifiable: int
    confirmed_from: tuple[Address, ...] = ()
    """The sender of each confirmed entry."""


class EntryAudit:
    """The sampled entries waiting for our next fetch of their feed."""

    def __init__(self, sample: float, per_feed: int, grace_s: float, max_age_s: float,
                 rng: random.Random) -> None:
        self.sample = sample
        self.per_feed = per_feed
        self.grace_s = grace_s
        self.max_age_s = max_age_s
        self._rng = rng
        self._pending: dict[str, OrderedDict[str, _Check]] = {}

    def pending(self, feed: str) -> int:
        checks = self._pending.get(feed)
        return len(checks) if checks else 0

    def note(self, now: float, feed: str, sender: Address, entries: Iterable[Entry]) -> None:
        """``sender`` brought ``entries`` of ``feed`` (new to us): keep a sample to check."""
        if self.sample <= 0:
            return
        checks = self._pending.get(feed)
        for entry in entries:
            if entry.published is None or self._rng.random() >= self.sample:
                continue
            if checks is None:
                checks = self._pending[feed] = OrderedDict()
            checks[entry.key] = _Check(sender, entry.published, now)
            if len(checks) > self.per_feed:
                checks.popitem(last=False)

    def forget(self, feed: str) -> None:
        self._pending.pop(feed, None)

    def judge(self, now: float, feed: str, listed: Sequence[Entry]) -> Verdicts:
        """Our fetch at ``now`` got a whole document of ``feed`` listing ``listed``."""
        verdicts = Verdicts([], 0, 0)
        checks = self._pending.get(feed)
        if not checks:
            return verdicts
        keys = {entry.key for entry in listed}
        dated = [entry.published for entry in listed if entry.published is not None]
        window_start = min(dated) if dated else None
        confirmed = unverifiable = 0
        confirmed_from = []
        for key, check in list(checks.items()):
            if now - check.noted_at < self.grace_s:
                continue  # the document may predate the entry: the next fetch judges it
            del checks[key]
            if key in keys:
                confirmed += 1
                confirmed_from.append(check.sender)
            elif window_start is None or check.published <= window_start:
                # at the window's edge: a post with the same time as the oldest listed may
                # have been cut by the document's count (found in the simulator)
                unverifiable += 1
            else:
                verdicts.fake.append((check.sender, key))
        for key in [k for k, c in checks.items() if now - c.noted_at > self.max_age_s]:
            del checks[key]
        if not checks:
            del self._pending[feed]
        return verdicts._replace(confirmed=confirmed, unverifiable=unverifiable,
                                 confirmed_from=tuple(confirmed_from))
