"""``feedmesh map --apply``: a mapping of a hub's feeds to its named crawlers, written into the
hub's feed ownership table while they run (docs/locality.md, "Ownership").

The feeds are those of the hub's store; each feed's load is what the store knows of it: polls
per cycle from its posting rate (its postings of the last 28 days, one poll per expected post in
``cycle_s``, at least one, at most ``max_polls``) and bytes per fetch from the entries it holds
of the feed (their encoded size: a stand-in for the document's). With a table already there, the
mapping is *reassigned* from it (few feeds move); ``fresh`` maps from scratch. A feed whose owner
is listed (running) is *staged*: its owner hands it over once its fetches in flight are
committed; a feed whose owner is not listed (it left) is *transferred* at once. Given a bus,
every named crawler is told (``OwnersChanged`` on ``feeds``), and the groups on ``feeds`` of the
crawlers that left are dropped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec

from feedmesh.compose.engines import existing_file, open_bus, open_feed_ownership, open_ingest_store
from feedmesh.hub.messages import OwnersChanged, encode
from feedmesh.hub.tiers.crawling import crawler_group
from feedmesh.locality import (
    FeedLoad,
    LocalityError,
    balanced,
    fetches_per_cycle,
    first_fit,
    group_by_host,
    random_assignment,
    reassign,
    work,
)
from feedmesh.store import FeedOwnership, IngestStore

__all__ = ["Applied", "apply_mapping", "hub_location"]

HISTORY_DAYS = 28

Latency = Callable[[list, list], Awaitable[tuple[object, list]]]
"""(crawler sites, feed groups) -> (latency matrix, probe failures)."""


class Applied(msgspec.Struct, kw_only=True):
    """What :func:`apply_mapping` did."""

    how: str
    mapping: dict[str, str]
    groups: int
    failures: list
    staged: int
    transferred: int
    pending: dict
    departed: list[str]
    dropped: list[str]
    told: bool
    work: dict[str, float]
    counts: dict[str, int]


def hub_location(store: str, data: str) -> str:
    """The hub's store: its PostgreSQL URL, or its data folder's feedmesh.db (one of them)."""
    if bool(store) == bool(data):
        raise LocalityError("--apply needs the hub's store: --store postgresql://... or "
                            "--data DIR (one of them)")
    if store:
        if not store.startswith(("postgresql://", "postgres://")):
            raise LocalityError(f"--store {store!r}: give a postgresql:// URL")
        return store
    return str(existing_file(Path(data) / "feedmesh.db"))


def feed_loads(store: IngestStore, groups: dict[str, str], now: float, cycle_s: float,
               max_polls: float) -> list[FeedLoad]:
    """Each feed's polls per cycle (its posting rate) and bytes per fetch (what the store holds
    of it), as the store knows them."""
    since = now - HISTORY_DAYS * 86400.0
    postings = store.all_postings(since=since)
    added = {row.id: row.added_at for row in store.feeds()}
    loads = []
    for key, group in groups.items():
        feed_id = int(key)
        posted = [p for p in postings.get(feed_id, ()) if not p.backlog]
        days = max(1.0, (now - max(since, added.get(feed_id, since))) / 86400.0)
        held = store.entries(feed_id, limit=50)
        size = sum(len(msgspec.msgpack.encode(item.entry)) for item in held)
        loads.append(FeedLoad(key, group, fetches_per_cycle(len(posted) / days, cycle_s,
                                                            max_polls), size))
    return loads


def _moves(table: FeedOwnership, mapping: dict[str, str], names: list[str]
           ) -> tuple[dict[int, str], dict[int, str]]:
    """(staged, transferred): a listed owner hands its feed over; an absent one cannot."""
    current = table.owners()
    staged: dict[int, str] = {}
    transferred: dict[int, str] = {}
    for key, target in mapping.items():
        feed_id = int(key)
        row = current.get(feed_id)
        if row is None or row.owner not in names:
            if row is None or row.owner != target:
                transferred[feed_id] = target
        elif row.owner != target or row.next_owner not in ("", target):
            staged[feed_id] = target
    return staged, transferred


async def apply_mapping(location: str, sites: list, *, latency: Latency, fresh: bool,
                        algorithm: str, seed: int, cycle_s: float, max_polls: float,
                        bus_url: str = "", bus_namespace: str = "feedmesh",
                        bus_credentials: str = "", wait_s: float = 0.0) -> Applied:
    """Map the feeds of the hub's store at ``location`` to ``sites`` (named crawlers) and write
    the mapping (see the module); with ``bus_url`` the crawlers are told, and waited for up to
    ``wait_s`` seconds to hand the staged feeds over."""
    names = [site.name for site in sites]
    if len(set(names)) != len(names):
        raise LocalityError(f"crawler names must be distinct, got {names}")
    store = await asyncio.to_thread(open_ingest_store, location)
    table: FeedOwnership | None = None
    try:
        table = await asyncio.to_thread(open_feed_ownership, location)
        rows = await asyncio.to_thread(store.feeds)
        if not rows:
            raise LocalityError(f"no feeds in the store at {location}: nothing to map")
        urls = {str(row.id): row.state.url for row in rows}
        groups = group_by_host(urls)
        group_of = {feed: group.key for group in groups for feed in group.feeds}
        matrix, failures = await latency(sites, groups)
        loads = await asyncio.to_thread(feed_loads, store, group_of, time.time(), cycle_s,
                                        max_polls)
        current = await asyncio.to_thread(table.owners)
        previous = {str(f): row.next_owner or row.owner for f, row in current.items()
                    if str(f) in urls}
        if previous and not fresh:
            mapping, how = reassign(previous, loads, names, matrix), "reassigned"
        elif algorithm == "cobra":
            mapping, how = first_fit(loads, names, matrix), "cobra"
        elif algorithm == "random":
            mapping, how = random_assignment(list(urls), names, seed), "random"
        else:
            mapping, how = balanced(loads, names, matrix), "ours"
        staged, transferred = await asyncio.to_thread(_moves, table, mapping, names)
        await asyncio.to_thread(table.transfer, transferred)
        await asyncio.to_thread(table.stage, staged)
        # Crawlers that held feeds and are not listed left: nothing is theirs any more.
        departed = sorted({name for row in current.values()
                           for name in (row.owner, row.next_owner)
                           if name and name not in names})
        told = False
        dropped: list[str] = []
        if bus_url:
            bus = open_bus(bus_url, namespace=bus_namespace, credentials=bus_credentials)
            try:
                await bus.publish("feeds", encode(OwnersChanged(by="map")))
                told = True
                # Their durable group on `feeds` would keep every later message for them,
                # filling the stream's bounds: dropped.
                for name in departed:
                    if await bus.drop_group("feeds", crawler_group(name)):
                        dropped.append(name)
            finally:
                await bus.close()
        pending = await _wait_handed_over(table, wait_s if told else 0.0)
    finally:
        store.close()
        if table is not None:
            table.close()
    return Applied(how=how, mapping=mapping, groups=len(groups), failures=failures,
                   staged=len(staged), transferred=len(transferred), pending=pending,
                   departed=departed, dropped=dropped, told=told,
                   work=work(mapping, loads, names, matrix),
                   counts={name: sum(1 for c in mapping.values() if c == name)
                           for name in names})


async def _wait_handed_over(table: FeedOwnership, wait_s: float) -> dict:
    """Until no staged move is left (the crawlers handed every feed over), or ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        pending = await asyncio.to_thread(table.staged)
        if not pending or time.monotonic() >= deadline:
            return pending
        await asyncio.sleep(0.2)
