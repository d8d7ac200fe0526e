"""The network as one monitor, on a live peer: the FeedEx node places this peer's fetches in the
gaps of each feed's schedule (:mod:`feedmesh.mesh.feedex.phases`), the scheduler carries them out.

Each round (half an advertisement interval) :meth:`FetchPhaser.step` looks at every followed
feed. A feed's first fetch (the one a new follow makes at once, so it starts full) is the
scheduler's; once made, the scheduler's plan has a period P and a next fetch somewhere in the
P after it. The node then chooses that next fetch's time within [now, first fetch + P] (the same
window the stand-alone peer's random phase falls in: no fetch more, no gap longer than P), away
from the times its neighbours advertised, and moves it again in later rounds: into a much wider
gap when it is crowded, else a step towards the middle of its nearest known times
(:func:`~feedmesh.mesh.feedex.phases.better_in_window`). Once that fetch is made the phase
stays: the fetches follow one period apart, as the plan says. Nothing here trusts a
neighbour: the node picks within the window, and
:meth:`~feedmesh.schedule.Scheduler.rephase` clamps again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from feedmesh.mesh.feedex import FeedExNode

__all__ = ["FetchPhaser", "Scheduled"]


class Scheduled(Protocol):
    def plan_of_feed(self, feed_id: int) -> tuple[float, float] | None: ...

    def next_fetch_at(self, feed_id: int) -> float | None: ...

    def rephase(self, feed_id: int, at: float) -> float | None: ...


Act = Callable[[Callable[[FeedExNode, float], object]], object]


class FetchPhaser:
    """``step(now, feeds)`` with ``feeds`` the (URL, feed id) pairs followed; ``act`` runs a call
    on the FeedEx node (its transport's :meth:`act`), ``scheduled`` the peer's scheduler."""

    def __init__(self, act: Act, scheduled: Scheduled) -> None:
        self.act = act
        self.scheduled = scheduled
        self._planned: dict[str, float] = {}
        """Feed -> the fetch after which its next one was planned (still to be made)."""
        self._done: set[str] = set()
        self.moves = 0

    def step(self, now: float, feeds: Iterable[tuple[str, int]]) -> None:
        scheduled = self.scheduled
        followed = set()
        for url, feed_id in feeds:
            followed.add(url)
            if url in self._done:
                continue
            plan = scheduled.plan_of_feed(feed_id)
            due = scheduled.next_fetch_at(feed_id)
            if plan is None or due is None:
                continue
            last, period = plan
            after = self._planned.get(url)
            if after is not None and last > after:  # the planned fetch was made: phase kept
                del self._planned[url]
                self._done.add(url)
                self.act(lambda node, _now, url=url, last=last: node.fetch_made(last, url))
                continue
            if after is None:
                at = self.act(lambda node, now, url=url, period=period, last=last:
                              node.plan_fetch(now, url, period, latest=last + period))
                self._planned[url] = last
            else:
                at = self.act(lambda node, now, url=url: node.replan_fetch(now, url))
            if isinstance(at, float) and scheduled.rephase(feed_id, at) is not None:
                self.moves += 1
        for url in [u for u in self._planned if u not in followed]:
            del self._planned[url]
        self._done &= followed
