"""Every follower's fetch time of a feed that the exchange brought, one per origin (the network
as one monitor, :mod:`.phases`).

A node advertises its own planned (or last) fetch time of each feed it follows; its neighbours
relay what they know onward with the origin's address and ``heard``, the time the first relay
heard that plan from its origin. Keyed by origin, a plan that changed replaces the old copy
wherever it arrives (the later ``heard`` wins), so times can travel any number of hops between a
feed's followers without the stale ones circulating, and a node learns most of the feed's
schedule instead of the two hops it saw before (measured: docs/mesh-feedex.md, "The network as
one monitor").

Bounded, whatever neighbours say: at most ``cap`` entries that came through one neighbour per
feed (a newer one pushes that neighbour's oldest out) and ``total`` per feed; relayed entries
only for feeds we follow ourselves; a neighbour's own time of a feed we do not follow only while
it is our neighbour. A plan's sequence number says when we learned it, so each neighbour is sent
only what it was not sent before.
"""

from __future__ import annotations

from collections.abc import Iterable

from .messages import Address, Plan

__all__ = ["KnownPlans"]

_AT, _HEARD, _SEQ, _VIA, _WIRE = 0, 1, 2, 3, 4


class KnownPlans:
    """Fetch plans by feed and origin: ``[at, heard, seq, via, plan]`` each (``plan`` the wire
    :class:`Plan`, made once and told to every neighbour), a feed's in the order of their
    ``seq`` (a changed plan moves to the end), so :meth:`since` reads only the news."""

    __slots__ = ("_counts", "_feeds", "_newest", "_seq", "cap", "me", "total")

    def __init__(self, me: Address, cap: int = 64, total: int = 256) -> None:
        self.me = me
        self.cap = cap
        self.total = total
        self._feeds: dict[str, dict[Address, list]] = {}
        self._counts: dict[tuple[str, Address], int] = {}
        self._newest: dict[str, int] = {}
        self._seq = 0

    def __len__(self) -> int:
        return sum(len(plans) for plans in self._feeds.values())

    def direct(self, now: float, feed: str, neighbour: Address, at: float) -> bool:
        """``neighbour`` said it fetches ``feed`` at ``at``: heard from the origin itself, now.
        True if that is news (the time changed)."""
        return self._put(feed, neighbour, at, now, neighbour)

    def relayed(self, now: float, feed: str, via: Address, plans: Iterable[Plan]) -> bool:
        """``via`` relayed these plans of ``feed``; ``heard`` is clamped to now (a plan said to
        be heard in the future would pin its copy). Plans of ourselves or of ``via`` (its own
        time comes as its own) are ignored. True if any was news."""
        news = False
        for plan in plans:
            origin = (plan.origin[0], plan.origin[1])
            if origin == self.me or origin == via:
                continue
            news |= self._put(feed, origin, plan.at, min(plan.heard, now), via)
        return news

    def _put(self, feed: str, origin: Address, at: float, heard: float, via: Address) -> bool:
        plans = self._feeds.get(feed)
        if plans is None:
            plans = self._feeds[feed] = {}
        old = plans.get(origin)
        if old is not None:
            if heard < old[_HEARD] or (heard == old[_HEARD] and at == old[_AT]):
                return False
            if at == old[_AT]:  # the same plan, heard again later: nothing to relay
                old[_HEARD] = heard
                old[_WIRE] = Plan(origin, at, heard)
                return False
            self._count(feed, old[_VIA], -1)
            del plans[origin]  # re-inserted last: a feed's plans stay in the order of seq
        self._seq += 1
        plans[origin] = [at, heard, self._seq, via, Plan(origin, at, heard)]
        self._newest[feed] = self._seq
        if self._count(feed, via, 1) > self.cap:
            self._evict(feed, plans, via)
        if len(plans) > self.total:
            self._evict(feed, plans, None)
        return True

    def _count(self, feed: str, via: Address, delta: int) -> int:
        key = (feed, via)
        count = self._counts.get(key, 0) + delta
        if count > 0:
            self._counts[key] = count
        else:
            self._counts.pop(key, None)
        return count

    def _evict(self, feed: str, plans: dict[Address, list], via: Address | None) -> None:
        """Drop the plan heard longest ago (of those that came through ``via``, if given)."""
        oldest = min((o for o, p in plans.items() if via is None or p[_VIA] == via),
                     key=lambda o: plans[o][_HEARD])
        self._count(feed, plans.pop(oldest)[_VIA], -1)

    def times(self, feed: str, lo: float, hi: float) -> list[float]:
        """The known fetch times of ``feed`` within [lo, hi]."""
        plans = self._feeds.get(feed)
        if not plans:
            return []
        return [p[_AT] for p in plans.values() if lo <= p[_AT] <= hi]

    def by_origin(self, feed: str, lo: float, hi: float) -> list[tuple[Address, float]]:
        """The known (origin, fetch time) of ``feed`` with the time within [lo, hi]."""
        plans = self._feeds.get(feed)
        if not plans:
            return []
        return [(o, p[_AT]) for o, p in plans.items() if lo <= p[_AT] <= hi]

    def newest(self, feed: str) -> int:
        """The sequence number of the latest news of ``feed`` (0: none)."""
        return self._newest.get(feed, 0)

    def since(self, feed: str, seq: int, to: Address) -> list[Plan]:
        """What to tell ``to`` of ``feed``: the plans learned after ``seq``, not its own nor
        learned from it; the ``cap`` heard latest."""
        plans = self._feeds.get(feed)
        if not plans or self._newest.get(feed, 0) <= seq:
            return []
        fresh = []
        for o, p in reversed(plans.items()):  # newest first (seq order): only the news is read
            if p[_SEQ] <= seq:
                break
            if o != to and p[_VIA] != to:
                fresh.append(p[_WIRE])
        fresh.reverse()
        if len(fresh) > self.cap:
            fresh.sort(key=lambda plan: -plan.heard)
            del fresh[self.cap:]
        return fresh

    def forget_direct(self, feed: str, neighbour: Address) -> None:
        """``neighbour`` no longer follows ``feed``: its own time of it goes."""
        plans = self._feeds.get(feed)
        if plans is not None:
            old = plans.get(neighbour)
            if old is not None and old[_VIA] == neighbour:
                del plans[neighbour]
                self._count(feed, neighbour, -1)
                if not plans:
                    self._drop_feed(feed)

    def forget_origin(self, origin: Address) -> None:
        """Every plan of ``origin`` goes, whichever neighbour brought it (it left). Nothing in
        the protocol calls this: a departed node's plans stay known, to its neighbours too,
        until they age out. The simulator's departure oracle (``SimConfig.departure_oracle``)
        does, to bound what a notice of departures would gain."""
        for feed in list(self._feeds):
            plans = self._feeds[feed]
            old = plans.pop(origin, None)
            if old is not None:
                self._count(feed, old[_VIA], -1)
                if not plans:
                    self._drop_feed(feed)

    def forget_via(self, neighbour: Address, keep: Iterable[str]) -> None:
        """``neighbour`` is gone: what it told of feeds not in ``keep`` (those we do not follow)
        goes; what it told of the others stays, still counted against ``total``."""
        keep = set(keep)
        for feed in [f for f in self._feeds if f not in keep]:
            plans = self._feeds[feed]
            for origin in [o for o, p in plans.items() if p[_VIA] == neighbour]:
                del plans[origin]
            self._counts.pop((feed, neighbour), None)
            if not plans:
                self._drop_feed(feed)
        for feed in keep:
            self._counts.pop((feed, neighbour), None)

    def drop_feed(self, feed: str) -> None:
        """We stopped following ``feed``."""
        self._drop_feed(feed)

    def _drop_feed(self, feed: str) -> None:
        plans = self._feeds.pop(feed, None)
        self._newest.pop(feed, None)
        if plans:
            for via in {p[_VIA] for p in plans.values()}:
                self._counts.pop((feed, via), None)

    def expire(self, lo: float) -> None:
        """Forget plans before ``lo`` (they say nothing about a phase any more)."""
        for feed in list(self._feeds):
            plans = self._feeds[feed]
            for origin in [o for o, p in plans.items() if p[_AT] < lo]:
                self._count(feed, plans.pop(origin)[_VIA], -1)
            if not plans:
                self._drop_feed(feed)
