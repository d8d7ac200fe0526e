"""``feedmesh map``: assign feeds to crawlers by latency and work (Cobra 3.7, and ours).

    feedmesh map --feeds feeds.opml --crawler eu-1=127.0.1.201 --crawler na-1=127.0.1.202 \\
                 [--matrix rtt.json | --probes 3 [--save-matrix rtt.json]] [--loads loads.json] \\
                 [--algorithm ours|cobra|random] [--previous mapping.json] [--json]

``--feeds`` is an OPML file or a text file of feed URLs, one a line. Latency comes from
``--matrix`` (``{"rtt_ms": {CRAWLER: {GROUP: MS}}}``, groups named ``host:port``) or from HEAD
probes sent from each crawler's address. ``--loads`` gives each feed's polls per cycle and bytes
per fetch (``{"URL": {"polls": 4, "bytes": 20000}}``; feeds not listed: 1 poll, 0 bytes).
``--previous`` (a ``--json`` output of an earlier run) reassigns, moving few feeds. Prints each
crawler's feeds and predicted work per cycle, or with ``--json`` one object: ``algorithm``,
``crawlers`` (``feeds``, ``work_s`` each), ``moved`` and ``mapping`` (URL -> crawler). Bad input
exits 2 with what was wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import msgspec

from feedmesh.feeds.opml import OpmlError, parse_opml
from feedmesh.locality.assign import balanced, first_fit, random_assignment, reassign, work
from feedmesh.locality.cost import FeedLoad
from feedmesh.locality.errors import LocalityError
from feedmesh.locality.groups import group_by_host
from feedmesh.locality.latency import CrawlerSite
from feedmesh.locality.probe import MatrixFileEstimator, ProbeEstimator

__all__ = ["configure", "estimate_latency", "run"]

EXIT_INVALID = 2


class _Load(msgspec.Struct, forbid_unknown_fields=True):
    polls: float = 1.0
    bytes: int = 0


class _Previous(msgspec.Struct):
    mapping: dict[str, str]


def _crawler(text: str) -> CrawlerSite:
    name, eq, address = text.partition("=")
    if not eq or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=ADDRESS (or NAME= for the system's "
                                         f"choice), got {text!r}")
    return CrawlerSite(name.strip(), address.strip())


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feeds", metavar="FILE",
                        help="OPML file, or a text file of feed URLs one a line (required "
                        "without --apply)")
    parser.add_argument("--crawler", action="append", type=_crawler, required=True,
                        metavar="NAME=ADDRESS",
                        help="a crawler and its source address (repeatable)")
    parser.add_argument("--matrix", metavar="FILE.json",
                        help="latency matrix to use instead of probing")
    parser.add_argument("--probes", type=int, default=3,
                        help="HEAD probes per crawler and host (after one to open the connection)")
    parser.add_argument("--save-matrix", metavar="FILE.json", help="write the measured matrix")
    parser.add_argument("--allow-network", action="append", default=[], metavar="CIDR",
                        help="let probes reach this private block (127.0.0.0/8 for the farm)")
    parser.add_argument("--loads", metavar="FILE.json", help="polls per cycle and bytes per feed")
    parser.add_argument("--algorithm", choices=("ours", "cobra", "random"), default="ours",
                        help="ours: equal work, near first; cobra: nearest F/C each; random")
    parser.add_argument("--previous", metavar="FILE.json",
                        help="an earlier --json output: reassign from it, moving few feeds")
    parser.add_argument("--seed", type=int, default=1, help="for --algorithm random")
    parser.add_argument("--json", action="store_true", help="print one JSON object for programs")


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise LocalityError(f"{what} {path}: cannot read it: {error.strerror}") from error


def _feed_urls(path: str) -> list[str]:
    data = _read(path, "feed list")
    if data.lstrip()[:1] == b"<":
        try:
            return [outline.url for outline in parse_opml(data).outlines]
        except OpmlError as error:
            raise LocalityError(f"feed list {path}: {error}") from error
    lines = data.decode("utf-8", errors="replace").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _loads(path: str | None) -> dict[str, _Load]:
    if path is None:
        return {}
    try:
        return msgspec.json.decode(_read(path, "loads"), type=dict[str, _Load])
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise LocalityError(f"loads {path}: expected {{\"URL\": {{\"polls\": N, \"bytes\": N}}}}: "
                            f"{error}") from error


def _previous(path: str | None) -> dict[str, str] | None:
    if path is None:
        return None
    try:
        return msgspec.json.decode(_read(path, "previous mapping"), type=_Previous).mapping
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise LocalityError(f"previous mapping {path}: expected a `feedmesh map --json` output "
                            f"with a \"mapping\": {error}") from error


async def estimate_latency(args: argparse.Namespace, sites: list[CrawlerSite], groups):
    """The latency matrix ``--matrix`` gives, or one probed from each crawler's address, and
    the probes that failed."""
    if args.matrix:
        return await MatrixFileEstimator(args.matrix).estimate(sites, groups), []
    probe = ProbeEstimator(probes=args.probes, allow_networks=args.allow_network)
    matrix = await probe.estimate(sites, groups)
    return matrix, probe.failures


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except LocalityError as error:
        print(f"feedmesh map: {error}", file=sys.stderr)
        return EXIT_INVALID


def _run(args: argparse.Namespace) -> int:
    sites: list[CrawlerSite] = args.crawler
    names = [site.name for site in sites]
    if len(set(names)) != len(names):
        raise LocalityError(f"crawler names must be distinct, got {names}")
    if not args.feeds:
        raise LocalityError("--feeds FILE is required (or --apply, which maps the feeds of a "
                            "hub's store)")
    urls = list(dict.fromkeys(_feed_urls(args.feeds)))
    if not urls:
        raise LocalityError(f"feed list {args.feeds}: no feed URLs in it")
    per_feed = _loads(args.loads)
    previous = _previous(args.previous)
    groups = group_by_host({url: url for url in urls})
    latency, failures = asyncio.run(estimate_latency(args, sites, groups))
    if args.save_matrix:
        try:
            Path(args.save_matrix).write_bytes(latency.to_json())
        except OSError as error:
            raise LocalityError(f"--save-matrix {args.save_matrix}: cannot write it: "
                                f"{error.strerror}") from error
    group_of = {feed: group.key for group in groups for feed in group.feeds}
    loads = [FeedLoad(url, group_of[url], per_feed.get(url, _Load()).polls,
                      per_feed.get(url, _Load()).bytes) for url in urls]
    if previous is not None:
        mapping = reassign(previous, loads, names, latency)
    elif args.algorithm == "cobra":
        mapping = first_fit(loads, names, latency)
    elif args.algorithm == "random":
        mapping = random_assignment(urls, names, args.seed)
    else:
        mapping = balanced(loads, names, latency)
    busy = work(mapping, loads, names, latency)
    moved = (sum(1 for url in urls if previous.get(url) != mapping[url])
             if previous is not None else None)
    counts = {name: sum(1 for c in mapping.values() if c == name) for name in names}
    if args.json:
        print(json.dumps({"algorithm": "reassign" if previous is not None else args.algorithm,
                          "crawlers": {n: {"feeds": counts[n], "work_s": round(busy[n], 3)}
                                       for n in names},
                          "groups": len(groups), "probe_failures": len(failures),
                          "moved": moved, "mapping": mapping}))
        return 0
    print(f"{len(urls)} feeds on {len(groups)} hosts, {len(names)} crawlers "
          f"({'reassigned' if previous is not None else args.algorithm})")
    for crawler, key, why in failures:
        print(f"  not measured: {crawler} -> {key}: {why}")
    for name in names:
        print(f"  {name:16} {counts[name]:6} feeds  {busy[name]:8.2f} s of fetching a cycle")
    if moved is not None:
        print(f"  moved: {moved} feeds")
    return 0
