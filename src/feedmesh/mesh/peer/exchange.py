"""Exchange protocols a peer runs beside its own fetching, and FeedEx as the first of them.

A peer (:mod:`.daemon`) owns the archive and the local proxy; each exchange protocol is an
:class:`Exchange`: told what the peer follows and what its own fetches found, it brings entries
from other nodes and hands them to ``keep`` (the archive). FeedEx (:class:`FeedExExchange`) is
one; a signed-multicast protocol (SCRIBE-RSS) can be another without touching the archive or the
proxy.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from feedmesh.clock import Clock
from feedmesh.mesh.feedex import Deliver, Event, FeedExNode, FeedExSettings, QueryResult
from feedmesh.mesh.feedex.messages import Address, CheckDid, Message, PutEntries
from feedmesh.mesh.feedex.messages import Entry as WireEntry
from feedmesh.model import Entry

from .entries import from_wire, to_wire
from .transport import FeedExTransport, TransportSettings

__all__ = ["ArchiveEntries", "Exchange", "FeedExExchange", "Keep"]

log = logging.getLogger("feedmesh.mesh.peer")

Keep = Callable[[str, list[Entry], str], Awaitable[int]]
"""``keep(feed URL, entries, source)`` -> entries new to the archive."""


ArchiveEntries = Callable[[str, float | None, float | None, int], Awaitable[list[Entry]]]
"""``(feed, since, until, limit)`` -> archived entries of the feed published in that range."""


class Exchange(Protocol):
    """One exchange protocol of a peer."""

    name: str

    async def start(self, feeds: Iterable[str]) -> None: ...

    async def stop(self) -> None: ...

    def subscribe(self, feed: str) -> None:
        """The peer follows ``feed`` from now on."""
        ...

    def fetched(self, feed: str, entries: list[Entry]) -> None:
        """The peer's own fetch of ``feed`` found ``entries`` new."""
        ...

    def status(self) -> dict[str, object]: ...


class FeedExExchange:
    """FeedEx (Jun and Ahamad): a :class:`FeedExNode` on a :class:`FeedExTransport`."""

    name = "feedex"

    def __init__(self, address: Address, clock: Clock, keep: Keep, *,
                 archive: ArchiveEntries | None = None, tracker: Address | None = None,
                 settings: FeedExSettings | None = None,
                 transport: TransportSettings | None = None,
                 candidates: Iterable[Address] = (), rng: random.Random | None = None,
                 forward: bool = True) -> None:
        """``forward`` False makes a free rider: it takes entries but never offers or sends any
        (no check_did, no put_entries), for experiments only."""
        self.clock = clock
        self.keep = keep
        self.node = FeedExNode(address, settings, tracker=tracker, rng=rng)
        self._archive = archive
        self.transport = FeedExTransport(self.node, clock, on_delivery=self._on_delivery,
                                         archive=self._archived if archive else None,
                                         settings=transport,
                                         withhold=None if forward else _forwarding)
        self.candidates = list(candidates)
        self.forward = forward
        self._queries: dict[bytes, asyncio.Future[QueryResult]] = {}
        self._keeping: set[asyncio.Task[int]] = set()
        self.delivered: dict[str, int] = {}
        """Entries the node delivered per neighbour ("host:port")."""

    async def _archived(self, feed: str, since: float | None, until: float | None,
                        limit: int) -> list[WireEntry]:
        assert self._archive is not None
        return to_wire(await self._archive(feed, since, until, limit))

    @property
    def address(self) -> Address:
        return self.node.address

    async def start(self, feeds: Iterable[str]) -> None:
        now = self.clock.now()
        cap = self.node.settings.known_entries_per_feed
        for feed in feeds:
            self.node.subscribe(now, feed)
            if self._archive is not None:
                # what the archive holds from earlier runs: answered for in queries (3.6),
                # stripped from neighbours' bundles; the newest, oldest first
                held = await self._archived(feed, None, None, cap)
                self.node.remember(feed, held[::-1])
        await self.transport.start(self.candidates)

    async def stop(self) -> None:
        await self.transport.stop()
        if self._keeping:
            await asyncio.gather(*self._keeping, return_exceptions=True)

    def subscribe(self, feed: str) -> None:
        self.transport.act(lambda node, now: node.subscribe(now, feed))

    def fetched(self, feed: str, entries: list[Entry]) -> None:
        wire = to_wire(entries)
        if not wire:
            return
        self.transport.act(lambda node, now: node.fetched(now, feed, wire))

    def publisher_listed(self, addresses: list[Address]) -> None:
        """A publisher listed these recent FeedEx clients: candidate neighbours."""
        self.transport.act(lambda node, now: node.publisher_listed(now, addresses))

    def listed(self, feed: str, entries: list[Entry]) -> None:
        """Our fetch of ``feed`` got a whole document listing ``entries``: the node checks the
        entries neighbours sent against it (fake entries)."""
        wire = to_wire(entries)
        self.transport.act(lambda node, now: node.listed(now, feed, wire))

    def _on_delivery(self, output: Event) -> None:
        if isinstance(output, Deliver):
            if output.source is None:
                return  # our own fetch: the archive has it already
            source = f"{output.source[0]}:{output.source[1]}"
            self.delivered[source] = self.delivered.get(source, 0) + len(output.entries)
            task = asyncio.ensure_future(self.keep(
                output.feed, from_wire(output.entries, output.feed, self.clock.now()), source))
            self._keeping.add(task)
            task.add_done_callback(self._keeping.discard)
        elif isinstance(output, QueryResult):
            future = self._queries.pop(output.qid, None)
            if future is not None and not future.done():
                future.set_result(output)

    async def query(self, feed: str, since: float | None = None,
                    until: float | None = None) -> QueryResult:
        """Who holds entries of ``feed`` in [since, until] (3.6)? Answered once every neighbour
        answered or timed out, as the node decides."""
        future: asyncio.Future[QueryResult] = asyncio.get_running_loop().create_future()
        qid = self.node.query(self.clock.now(), feed, since, until)
        self._queries[qid] = future
        self.transport.flush()
        return await future

    async def pull(self, feed: str, since: float | None = None,
                   until: float | None = None) -> tuple[int, Address | None]:
        """Archive pulling (3.6): ask who holds old entries of ``feed``, download them from the
        holder with the most, keep them. (entries new to the archive, the holder) ."""
        result = await self.query(feed, since, until)
        holders = sorted((h for h in result.holders if tuple(h.address) != self.address),
                         key=lambda h: -h.count)
        for holder in holders:
            address = (holder.address[0], holder.address[1])
            try:
                wire = await self.transport.download(address, feed, since, until)
            except ConnectionError as error:
                log.info("archive_pull_failed feed=%s holder=%s:%s error=%s", feed, *address,
                         error)
                continue
            new = await self.keep(feed, from_wire(wire, feed, self.clock.now()),
                                  f"{address[0]}:{address[1]}")
            return new, address
        return 0, None

    def neighbours(self) -> list[dict[str, object]]:
        ratio = self.node.settings.deficit_ratio
        rows = []
        for address, neighbour in self.node.neighbours.items():
            rows.append({"address": f"{address[0]}:{address[1]}",
                         "entries_from": neighbour.entries_from,
                         "entries_to": neighbour.entries_to,
                         "deficit": round(neighbour.owes(ratio), 3),
                         "shared_feeds": sum(1 for f in neighbour.subset if f in self.node.weights),
                         "since": neighbour.since})
        return rows

    def status(self) -> dict[str, object]:
        return {"protocol": self.name, "address": f"{self.address[0]}:{self.address[1]}",
                "neighbours": self.neighbours(), "node": dict(self.node.stats),
                "transport": dict(self.transport.stats)}


def _forwarding(message: Message) -> bool:
    return isinstance(message, CheckDid | PutEntries)
