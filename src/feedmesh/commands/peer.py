"""``feedmesh peer --opml FILE``: one person's peer node (FeedEx and SCRIBE-RSS);
``feedmesh peer status``.

The peer fetches the OPML's feeds itself on a ``schedule/`` policy (FeedEx's adaptive interval by
default), exchanges new entries with its neighbours, joins the signed multicast of the feeds
that advertise a ``<subscribe>`` element (UDP on the ``--listen`` address unless ``--scribe``
says otherwise; ``--trust`` says whose keys), keeps every entry in ``DATA/archive.db``, and
serves them to the person's reader on loopback. It prints where to point the reader.
``feedmesh peer status`` asks the running peer (found through ``DATA/peer.json``) for its
neighbours, the entries each one brought, deficits and the fetches saved.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import zlib
from pathlib import Path
from urllib.error import URLError
from urllib.request import urlopen

import msgspec

from feedmesh import runloop
from feedmesh.clock import SystemClock
from feedmesh.commands.crawl import add_fetch_arguments, fetch_settings, load_opml
from feedmesh.compose import open_archive
from feedmesh.feeds.opml import OpmlError
from feedmesh.fetch import Fetcher
from feedmesh.logs import setup_logging
from feedmesh.mesh.feedex import FeedExSettings
from feedmesh.mesh.peer import Peer, PeerSettings, check_loopback
from feedmesh.mesh.peer.daemon import PEER_FILE, fetch_headers
from feedmesh.mesh.peer.multicast import MulticastSettings
from feedmesh.mesh.peer.trust import TRUST_POLICIES, TrustSettings
from feedmesh.schedule import SchedulerSettings
from feedmesh.schedule.policy_names import POLICY_NAMES
from feedmesh.store import StoreError

__all__ = ["configure", "parse_address", "run"]

DEFAULT_DATA = "var/peer"


def parse_address(value: str, what: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``http://HOST:PORT`` -> (host, port); ValueError says what is wrong."""
    text = value.strip()
    if text.startswith("http://"):
        text = text[len("http://"):].rstrip("/")
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{what} must be HOST:PORT (e.g. 127.0.3.1:8400), got {value!r}")
    return host.strip("[]"), int(port)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("run", "status"), default="run",
                        help="run the peer, or show a running peer's status")
    parser.add_argument("--opml", metavar="FILE_OR_URL",
                        help="the feeds to follow (needed at the first start; later ones add "
                             "to what the archive follows)")
    parser.add_argument("--listen", default="127.0.0.1:8400", metavar="HOST:PORT",
                        help="the peer API, where neighbours reach this node (its identity)")
    parser.add_argument("--local", default="127.0.0.1:8401", metavar="HOST:PORT",
                        help="the local API and proxy for your reader (loopback only)")
    parser.add_argument("--tracker", metavar="URL", help="the tracker to find neighbours "
                        "through (http://HOST:PORT)")
    parser.add_argument("--data", default=DEFAULT_DATA, metavar="DIR",
                        help="archive, schedule and neighbours are kept here")
    parser.add_argument("--policy", default="adaptive", choices=POLICY_NAMES,
                        help="when to fetch each feed (schedule/ policies)")
    parser.add_argument("--budget", type=float, default=24.0, metavar="N",
                        help="fetches per feed per day, on average")
    parser.add_argument("--scribe", default="", metavar="HOST:PORT|off",
                        help="the UDP address of this node on the SCRIBE-RSS overlay (signed "
                             "multicast of feeds that advertise <subscribe>); default: the "
                             "--listen address (UDP), off: FeedEx only")
    parser.add_argument("--scribe-bootstrap", action="append", default=[], metavar="HOST:PORT",
                        help="an overlay node to join through (repeatable); default: the "
                             "bootstrap node a followed feed's <subscribe> element names")
    parser.add_argument("--trust", default="first-use", choices=TRUST_POLICIES,
                        help="whose keys to follow: first-use pins the key a followed feed's "
                             "<subscribe> names the first time; listed accepts a republisher "
                             "only if given with --trust-key")
    parser.add_argument("--trust-key", action="append", default=[], metavar="BASE64",
                        help="a republisher key to accept under --trust listed (repeatable)")
    parser.add_argument("--tell-publishers", action="store_true",
                        help="send FeedEx-Peer: PORT with every fetch, so a publisher that lists "
                             "its recent FeedEx clients lists this node to them (it learns this "
                             "node is a peer, and its other clients learn where it listens)")
    add_fetch_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "status":
            return status(Path(args.data))
        setup_logging("warning")
        os.umask(0o077)
        settings = _settings(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        return runloop.run(_main(args, settings))
    except (OpmlError, StoreError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _settings(args: argparse.Namespace) -> PeerSettings:
    listen = parse_address(args.listen, "--listen")
    if listen[1] == 0 or listen[0] in ("0.0.0.0", "::"):
        raise ValueError("--listen needs the address and port neighbours reach this node at "
                         "(it is the node's identity), not a wildcard or port 0")
    local = parse_address(args.local, "--local")
    check_loopback(local[0])
    tracker = parse_address(args.tracker, "--tracker") if args.tracker else None
    # the scheduler's seed sets the phases of the first fetches: one per node, or every peer
    # started with the same list would fetch each feed at the same moments
    seed = zlib.crc32(f"{listen[0]}:{listen[1]}".encode())
    schedule = SchedulerSettings(policy=args.policy, budget_per_feed_per_day=args.budget,
                                 seed=seed)
    return PeerSettings(listen=listen, local=local, tracker=tracker, data=Path(args.data),
                        feedex=FeedExSettings(), schedule=schedule,
                        multicast=_multicast(args, listen))


def _multicast(args: argparse.Namespace, listen: tuple[str, int]) -> MulticastSettings | None:
    if args.scribe == "off":
        return None
    address = parse_address(args.scribe, "--scribe") if args.scribe else listen
    bootstrap = tuple(parse_address(b, "--scribe-bootstrap") for b in args.scribe_bootstrap)
    if args.trust_key and args.trust != "listed":
        raise ValueError("--trust-key is for --trust listed (first-use pins keys by itself)")
    return MulticastSettings(address=address, bootstrap=bootstrap,
                             trust=TrustSettings(args.trust, frozenset(args.trust_key)))


async def _main(args: argparse.Namespace, settings: PeerSettings) -> int:
    urls: list[str] = []
    if args.opml:
        opml = await load_opml(args.opml, fetch_settings(args))
        for reason in opml.skipped:
            print(f"skipped {reason}", file=sys.stderr)
        urls = [o.url for o in opml.outlines]
    settings.data.mkdir(parents=True, exist_ok=True)
    store = open_archive(settings.data / "archive.db")
    clock = SystemClock()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    fetching = fetch_settings(args)
    if args.tell_publishers:
        fetching = msgspec.structs.replace(
            fetching, headers=fetching.headers + fetch_headers(settings.listen))
    async with Fetcher(fetching, clock=clock) as fetcher:
        peer = Peer(settings, store, fetcher, clock)
        try:
            await peer.start(urls)
            feeds = len(peer.archive.urls())
            if feeds == 0:
                print("warning: no feeds followed yet (give --opml FILE, or POST "
                      f"{{\"url\": ...}} to {peer.proxy.url}/api/feeds)", file=sys.stderr)
            print(f"feedmesh peer {settings.listen[0]}:{settings.listen[1]}: {feeds} feeds, "
                  f"policy {settings.schedule.policy}, data in {settings.data}")
            print(f"point your reader at {peer.proxy.url}/all.rss (every feed), or import "
                  f"{peer.proxy.url}/feeds.opml (one feed each); Atom: .atom, JSON Feed: .json")
            print(f"status: feedmesh peer status --data {settings.data}", flush=True)
            await stop.wait()
        finally:
            await peer.stop()
            store.close()
    return 0


def status(data: Path) -> int:
    try:
        local = json.loads((data / PEER_FILE).read_text())["local"]
    except (OSError, ValueError, KeyError) as error:
        print(f"error: no peer has run with --data {data} ({error}); start one with "
              "`feedmesh peer --opml FILE`", file=sys.stderr)
        return 2
    try:
        with urlopen(f"{local}/api/status", timeout=10) as response:
            figures = json.loads(response.read())
    except (URLError, OSError, ValueError) as error:
        print(f"error: the peer of {data} does not answer at {local} ({error}); is it running?",
              file=sys.stderr)
        return 1
    print(format_status(figures))
    return 0


def format_status(figures: dict) -> str:
    saved = (f"own fetches {figures['own_fetches']}  entries from peers "
             f"{figures['entries_from_peers']}  reader requests served (fetches saved) "
             f"{figures['fetches_saved']}")
    header = (f"  {'address':<22} {'shared':>6} {'received':>9} {'kept':>6} {'given':>6} "
              f"{'deficit':>8}")
    lines = [f"peer {figures['listen']}  local {figures['local']}  feeds {figures['feeds']}",
             saved, f"{len(figures['neighbours'])} neighbours:", header]
    for row in figures["neighbours"]:
        lines.append(f"  {row['address']:<22} {row['shared_feeds']:>6} {row['entries_from']:>9} "
                     f"{row['kept']:>6} {row['entries_to']:>6} {row['deficit']:>8.2f}")
    for exchange in figures.get("exchanges", []):
        if exchange.get("protocol") == "scribe":
            lines.extend(format_multicast(exchange))
    return "\n".join(lines)


def format_multicast(status: dict) -> list[str]:
    refused = " ".join(f"{k}={v}" for k, v in sorted(status["refused"].items())) or "none"
    tree = " ".join(f"{k}={v}" for k, v in sorted(status.get("tree", {}).items())) or "-"
    lines = [(f"multicast (SCRIBE-RSS) {status['address']}  joined {status['joined']}  "
              f"bootstrap {status['bootstrap']}  records refused: {refused}  tree: {tree}")]
    for feed in status["feeds"]:
        kind = "republished" if feed["republication"] else "publisher"
        got = sum(feed["received"].values())
        lines.append(f"  {feed['url']}  {kind} key {feed['key'][:12]}...  attached "
                     f"{feed['attached']}  seq {feed['seq']}  received {got}  refused "
                     f"{sum(feed['refused'].values())}")
    for url, why in status["not_multicast"].items():
        lines.append(f"  {url}  not on the mesh: {why}")
    return lines
