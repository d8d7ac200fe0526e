"""``feedmesh map``: assign feeds to crawlers (locality/cli.py), and with ``--apply`` write the
mapping into a hub's feed ownership table while its named crawlers run.

    feedmesh map --apply (--store postgresql://... | --data DIR) \\
                 --crawler eu-1=127.0.1.201 --crawler na-1=127.0.1.202 \\
                 [--matrix rtt.json | --probes 3 --allow-network 127.0.0.0/8] \\
                 [--algorithm ours|cobra|random] [--fresh] [--cycle 900] \\
                 [--bus nats://HOST:PORT --bus-namespace NS] [--wait 60] [--json]

The feeds are those of the hub's store; each feed's load is what the store knows of it: polls
per cycle from its posting rate (its postings of the last 28 days, one poll per expected post
in ``--cycle`` seconds, at least one, at most ``--max-polls``) and bytes per fetch from the
entries it holds of the feed (their encoded size: a stand-in for the document's). Latency is
probed from each ``--crawler``'s address, or given with ``--matrix``.

With a table already there, the mapping is *reassigned* from it (``reassign``: the feeds of
crawlers still listed stay put but for what a newcomer needs, the feeds of crawlers no longer
listed and the feeds without owner are placed; few feeds move); ``--fresh`` maps from scratch
with ``--algorithm`` and moves whatever differs. A feed whose owner is listed (running) is
*staged*: its owner hands it over once its fetches in flight are committed; a feed whose owner
is not listed (it left) is *transferred* at once. With ``--bus``, every named crawler is told
(``OwnersChanged`` on ``feeds``) and the command waits up to ``--wait`` seconds until every
staged feed was handed over; a crawler that does not hand over (not running?) is named, and the
exit status is 1. Without ``--bus`` the crawlers pick the table up at their next start. Bad
input exits 2 with what was wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import msgspec

from feedmesh.bus import BusError
from feedmesh.compose import (
    existing_file,
    open_bus,
    open_feed_ownership,
    open_ingest_store,
)
from feedmesh.hub.app import crawler_group
from feedmesh.hub.messages import OwnersChanged, encode
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
from feedmesh.locality import cli as plain
from feedmesh.store import FeedOwnership, IngestStore, StoreError

__all__ = ["configure", "run"]

HISTORY_DAYS = 28
EXIT_NOT_HANDED_OVER = 1
EXIT_INVALID = 2


def configure(parser: argparse.ArgumentParser) -> None:
    plain.configure(parser)
    apply = parser.add_argument_group("--apply: write the mapping into a hub's ownership table")
    apply.add_argument("--apply", action="store_true",
                       help="map the feeds of a hub's store and write the mapping into its feed "
                       "ownership table (named crawlers follow it while they run)")
    apply.add_argument("--store", default="", metavar="URL",
                       help="the hub's PostgreSQL database (postgresql://...)")
    apply.add_argument("--data", default="", metavar="DIR",
                       help="the hub's data folder (its feedmesh.db), on one machine")
    apply.add_argument("--fresh", action="store_true",
                       help="map from scratch with --algorithm instead of reassigning from the "
                       "table (moves more feeds)")
    apply.add_argument("--cycle", type=float, default=900.0, metavar="S",
                       help="crawl cycle the loads are counted in (polls per cycle)")
    apply.add_argument("--max-polls", type=float, default=96.0,
                       help="most polls a feed needs per cycle")
    apply.add_argument("--bus", default="", metavar="URL",
                       help="the hub's NATS server: tell the running crawlers")
    apply.add_argument("--bus-namespace", default="feedmesh", metavar="NAME",
                       help="the subjects' prefix on the bus (default: feedmesh)")
    apply.add_argument("--wait", type=float, default=60.0, metavar="S",
                       help="how long to wait for the crawlers to hand staged feeds over "
                       "(0: do not wait)")


def run(args: argparse.Namespace) -> int:
    if not args.apply:
        return plain.run(args)
    try:
        return asyncio.run(_apply(args))
    except (LocalityError, StoreError, BusError, ValueError) as error:
        print(f"feedmesh map: {error}", file=sys.stderr)
        return EXIT_INVALID


def _location(args: argparse.Namespace) -> str:
    if bool(args.store) == bool(args.data):
        raise LocalityError("--apply needs the hub's store: --store postgresql://... or "
                            "--data DIR (one of them)")
    if args.feeds or args.previous or args.loads:
        raise LocalityError("--apply maps the feeds of the hub's store with the loads it "
                            "knows, from its ownership table: leave out --feeds, --loads and "
                            "--previous")
    if args.store:
        if not args.store.startswith(("postgresql://", "postgres://")):
            raise LocalityError(f"--store {args.store!r}: give a postgresql:// URL")
        return args.store
    return str(existing_file(Path(args.data) / "feedmesh.db"))


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


async def _apply(args: argparse.Namespace) -> int:
    location = _location(args)
    sites = args.crawler
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
        latency, failures = await plain.estimate_latency(args, sites, groups)
        loads = await asyncio.to_thread(feed_loads, store, group_of, time.time(), args.cycle,
                                        args.max_polls)
        current = await asyncio.to_thread(table.owners)
        previous = {str(f): row.next_owner or row.owner for f, row in current.items()
                    if str(f) in urls}
        if previous and not args.fresh:
            mapping = reassign(previous, loads, names, latency)
            how = "reassigned"
        elif args.algorithm == "cobra":
            mapping, how = first_fit(loads, names, latency), "cobra"
        elif args.algorithm == "random":
            mapping, how = random_assignment(list(urls), names, args.seed), "random"
        else:
            mapping, how = balanced(loads, names, latency), "ours"
        staged, transferred = await asyncio.to_thread(_moves, table, mapping, names)
        await asyncio.to_thread(table.transfer, transferred)
        await asyncio.to_thread(table.stage, staged)
        # Crawlers that held feeds and are not listed left: nothing is theirs any more.
        departed = sorted({name for row in current.values()
                           for name in (row.owner, row.next_owner)
                           if name and name not in names})
        told = False
        dropped: list[str] = []
        if args.bus:
            bus = open_bus(args.bus, namespace=args.bus_namespace)
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
        pending = await _wait_handed_over(table, args.wait if told else 0.0)
    finally:
        store.close()
        if table is not None:
            table.close()
    busy = work(mapping, loads, names, latency)
    counts = {name: sum(1 for c in mapping.values() if c == name) for name in names}
    holders = sorted({row.owner for row in pending.values()})
    if args.json:
        print(json.dumps({"algorithm": how, "feeds": len(mapping), "groups": len(groups),
                          "probe_failures": len(failures), "staged": len(staged),
                          "transferred": len(transferred), "not_handed_over": len(pending),
                          "departed": departed, "groups_dropped": dropped,
                          "crawlers": {n: {"feeds": counts[n], "work_s": round(busy[n], 3)}
                                       for n in names},
                          "mapping": {int(k): v for k, v in mapping.items()}}))
    else:
        print(f"{len(mapping)} feeds on {len(groups)} hosts, {len(names)} crawlers ({how}): "
              f"{len(staged)} staged for handover, {len(transferred)} transferred at once")
        for crawler, key, why in failures:
            print(f"  not measured: {crawler} -> {key}: {why}")
        for name in names:
            print(f"  {name:16} {counts[name]:6} feeds  {busy[name]:8.2f} s of fetching a cycle")
        if not told and staged:
            print("  the crawlers were not told (no --bus): they hand over at their next start")
        if dropped:
            print(f"  departed: {', '.join(dropped)} (their feeds group on the bus dropped)")
    if pending and told:
        print(f"feedmesh map: {len(pending)} feeds not handed over within {args.wait:.0f} s by "
              f"{', '.join(holders)}: is it running? If it left, run map --apply again "
              "without it (its feeds are then transferred at once)", file=sys.stderr)
        return EXIT_NOT_HANDED_OVER
    return 0


async def _wait_handed_over(table: FeedOwnership, wait_s: float) -> dict:
    """Until no staged move is left (the crawlers handed every feed over), or ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        pending = await asyncio.to_thread(table.staged)
        if not pending or time.monotonic() >= deadline:
            return pending
        await asyncio.sleep(0.2)
