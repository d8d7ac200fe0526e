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

from feedmesh import environment
from feedmesh.compose.mapping import apply_mapping, hub_location
from feedmesh.errors import FeedmeshError
from feedmesh.locality import LocalityError
from feedmesh.locality import cli as plain

__all__ = ["configure", "run"]

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
    apply.add_argument("--bus-credentials", metavar="FILE",
                       default=environment.get("FEEDMESH_BUS_CREDENTIALS", ""),
                       help="the NATS admin's nkey seed, a file 0600 (it drops departed "
                       "crawlers' groups); default $FEEDMESH_BUS_CREDENTIALS")
    apply.add_argument("--wait", type=float, default=60.0, metavar="S",
                       help="how long to wait for the crawlers to hand staged feeds over "
                       "(0: do not wait)")


def run(args: argparse.Namespace) -> int:
    if not args.apply:
        return plain.run(args)
    try:
        return asyncio.run(_apply(args))
    except (FeedmeshError, ValueError) as error:
        print(f"feedmesh map: {error}", file=sys.stderr)
        return EXIT_INVALID


async def _apply(args: argparse.Namespace) -> int:
    if args.feeds or args.previous or args.loads:
        raise LocalityError("--apply maps the feeds of the hub's store with the loads it "
                            "knows, from its ownership table: leave out --feeds, --loads and "
                            "--previous")
    location = hub_location(args.store, args.data)
    names = [site.name for site in args.crawler]

    async def latency(sites: list, groups: list) -> tuple:
        return await plain.estimate_latency(args, sites, groups)

    done = await apply_mapping(location, args.crawler, latency=latency, fresh=args.fresh,
                               algorithm=args.algorithm, seed=args.seed, cycle_s=args.cycle,
                               max_polls=args.max_polls, bus_url=args.bus,
                               bus_namespace=args.bus_namespace,
                               bus_credentials=args.bus_credentials, wait_s=args.wait)
    holders = sorted({row.owner for row in done.pending.values()})
    if args.json:
        print(json.dumps({"algorithm": done.how, "feeds": len(done.mapping),
                          "groups": done.groups, "probe_failures": len(done.failures),
                          "staged": done.staged, "transferred": done.transferred,
                          "not_handed_over": len(done.pending), "departed": done.departed,
                          "groups_dropped": done.dropped,
                          "crawlers": {n: {"feeds": done.counts[n],
                                           "work_s": round(done.work[n], 3)} for n in names},
                          "mapping": {int(k): v for k, v in done.mapping.items()}}))
    else:
        print(f"{len(done.mapping)} feeds on {done.groups} hosts, {len(names)} crawlers "
              f"({done.how}): {done.staged} staged for handover, {done.transferred} "
              "transferred at once")
        for crawler, key, why in done.failures:
            print(f"  not measured: {crawler} -> {key}: {why}")
        for name in names:
            print(f"  {name:16} {done.counts[name]:6} feeds  {done.work[name]:8.2f} s of "
                  "fetching a cycle")
        if not done.told and done.staged:
            print("  the crawlers were not told (no --bus): they hand over at their next start")
        if done.dropped:
            print(f"  departed: {', '.join(done.dropped)} (their feeds group on the bus "
                  "dropped)")
    if done.pending and done.told:
        print(f"feedmesh map: {len(done.pending)} feeds not handed over within "
              f"{args.wait:.0f} s by {', '.join(holders)}: is it running? If it left, run map "
              "--apply again without it (its feeds are then transferred at once)",
              file=sys.stderr)
        return EXIT_NOT_HANDED_OVER
    return 0
