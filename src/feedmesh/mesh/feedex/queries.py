"""Recursive ``query_feed`` (3.6): relay a query to the neighbours, aggregate their answers on the
way back, answer repeats at once, cache answers. The node decides whom it serves; this keeps the
bookkeeping of the queries in flight."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from feedmesh.mesh.sansio import Timers

from .events import QueryResult, Send
from .messages import Address, Holder, QueryAnswer, QueryFeed

__all__ = ["QueryRelay"]

_MAX_HOLDERS = 1000

Holding = Callable[[str, float | None, float | None], Holder | None]


class _Query:
    __slots__ = ("deadline", "feed", "holders", "origin", "since", "until", "waiting")

    def __init__(self, origin: Address | None, feed: str, since: float | None,
                 until: float | None, waiting: set[Address], deadline: float) -> None:
        self.origin = origin
        self.feed = feed
        self.since = since
        self.until = until
        self.waiting = waiting
        self.deadline = deadline
        self.holders: dict[Address, Holder] = {}


class QueryRelay:
    """The queries a node has in flight, the qids it has seen, and its cached answers."""

    def __init__(self, holding: Holding, timeout_s: float, max_hops: int,
                 cache_s: float, timers: Timers, done: Callable[[QueryResult], None]) -> None:
        """Each query's wait is a ``("query", qid)`` deadline on the node's ``timers`` (the node
        calls :meth:`expire` when it fires); ``done`` takes the answers to the node's own."""
        self._holding = holding
        self._timers = timers
        self._done = done
        self.timeout_s = timeout_s
        self.max_hops = max_hops
        self.cache_s = cache_s
        self._queries: dict[bytes, _Query] = {}
        self._seen: dict[bytes, float] = {}
        self._answers: dict[tuple, tuple[float, list[Holder]]] = {}

    def seen(self, qid: bytes) -> bool:
        return qid in self._seen

    def start(self, now: float, qid: bytes, origin: Address | None, feed: str,
              since: float | None, until: float | None, hops: int,
              neighbours: Iterable[Address], out: list[Send]) -> None:
        """Answer with what we hold and relay to ``neighbours`` (but the origin) if hops remain."""
        self._seen[qid] = now
        waiting = {a for a in neighbours if a != origin} if hops > 0 else set()
        state = _Query(origin, feed, since, until, waiting, now + self.timeout_s * (hops + 1))
        mine = self._holding(feed, since, until)
        if mine is not None:
            state.holders[mine.address] = mine
        self._queries[qid] = state
        self._timers.set(state.deadline, ("query", qid))
        for address in waiting:
            out.append(Send(address, QueryFeed(qid, feed, since, until, hops - 1)))
        if not waiting:
            self._finish(now, qid, out)

    def relay(self, now: float, sender: Address, message: QueryFeed,
              neighbours: Iterable[Address], out: list[Send]) -> None:
        """A neighbour's query: a repeat gets an empty answer, a cached one its answer."""
        if message.qid in self._seen:
            out.append(Send(sender, QueryAnswer(message.qid, [])))
            return
        cached = self._answers.get((message.feed, message.since, message.until))
        if cached is not None and now - cached[0] <= self.cache_s:
            self._seen[message.qid] = now
            out.append(Send(sender, QueryAnswer(message.qid, cached[1])))
            return
        self.start(now, message.qid, sender, message.feed, message.since, message.until,
                   min(message.hops_left, self.max_hops), neighbours, out)

    def answer(self, now: float, sender: Address, message: QueryAnswer,
               out: list[Send]) -> None:
        state = self._queries.get(message.qid)
        if state is None or sender not in state.waiting:
            return  # not asked, or already timed out
        state.waiting.discard(sender)
        for holder in message.holders[:_MAX_HOLDERS]:
            if len(state.holders) < _MAX_HOLDERS:
                state.holders.setdefault(holder.address, holder)
        if not state.waiting:
            self._finish(now, message.qid, out)

    def expire(self, now: float, out: list[Send]) -> None:
        """Answer the queries whose wait is over with what came in; forget old qids and answers."""
        for qid in [q for q, state in self._queries.items() if state.deadline <= now]:
            self._finish(now, qid, out)

    def sweep(self, now: float) -> None:
        if self._seen:
            self._seen = {q: at for q, at in self._seen.items() if now - at <= self.cache_s}
        if self._answers:
            self._answers = {k: v for k, v in self._answers.items()
                             if now - v[0] <= self.cache_s}

    def _finish(self, now: float, qid: bytes, out: list[Send]) -> None:
        state = self._queries.pop(qid, None)
        if state is None:
            return
        self._timers.cancel(("query", qid))
        holders = sorted(state.holders.values(), key=lambda h: -h.count)
        self._answers[(state.feed, state.since, state.until)] = (now, holders)
        if state.origin is None:
            self._done(QueryResult(qid, state.feed, holders))
        else:
            out.append(Send(state.origin, QueryAnswer(qid, holders)))
