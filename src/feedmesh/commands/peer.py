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
import json
import os
import sys
from pathlib import Path
from urllib.error import URLError
from urllib.request import urlopen

from feedmesh import runloop
from feedmesh.commands.flags import add_fetch_arguments, fetch_settings, parse_address
from feedmesh.compose.lifecycle import run_roles
from feedmesh.compose.opml import load_opml
from feedmesh.compose.peer import PEER_FILE, TRUST_POLICIES, PeerRole, peer_settings
from feedmesh.compose.settings import POLICY_NAMES
from feedmesh.errors import FeedmeshError
from feedmesh.logs import setup_logging

__all__ = ["configure", "run"]

DEFAULT_DATA = "var/peer"


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
        return runloop.run(_main(args))
    except (ValueError, OSError, FeedmeshError) as error:
        print(f"feedmesh peer: {_said(error)}", file=sys.stderr)
        return 2


async def _main(args: argparse.Namespace) -> int:
    listen = parse_address(args.listen, "--listen")
    scribe = (None if args.scribe == "off" else
              parse_address(args.scribe, "--scribe") if args.scribe else listen)
    settings = peer_settings(
        listen=listen, local=parse_address(args.local, "--local"),
        tracker=parse_address(args.tracker, "--tracker") if args.tracker else None,
        data=args.data, policy=args.policy, budget=args.budget, scribe=scribe,
        scribe_bootstrap=[parse_address(b, "--scribe-bootstrap") for b in args.scribe_bootstrap],
        trust=args.trust, trust_keys=args.trust_key)
    urls: list[str] = []
    if args.opml:
        opml = await load_opml(args.opml, fetch_settings(args))
        for reason in opml.skipped:
            print(f"skipped {reason}", file=sys.stderr)
        urls = [o.url for o in opml.outlines]
    role = PeerRole(settings, fetch_settings(args), urls, tell_publishers=args.tell_publishers)

    def announce() -> None:
        proxy = role.peer.proxy.url  # type: ignore[union-attr]
        if role.feeds == 0:
            print("warning: no feeds followed yet (give --opml FILE, or POST "
                  f"{{\"url\": ...}} as application/json to {proxy}/api/feeds)",
                  file=sys.stderr)
        print(f"feedmesh peer {settings.listen[0]}:{settings.listen[1]}: {role.feeds} feeds, "
              f"policy {settings.schedule.policy}, data in {settings.data}")
        print(f"point your reader at {proxy}/all.rss (every feed), or import "
              f"{proxy}/feeds.opml (one feed each); Atom: .atom, JSON Feed: .json")
        print(f"status: feedmesh peer status --data {settings.data}", flush=True)

    return await run_roles([role], announce=announce)


def status(data: Path) -> int:
    try:
        local = json.loads((data / PEER_FILE).read_text())["local"]
    except (OSError, ValueError, KeyError) as error:
        print(f"feedmesh peer status: no peer has run with --data {data} ({error}); start one with "
              "`feedmesh peer --opml FILE`", file=sys.stderr)
        return 2
    try:
        with urlopen(f"{local}/api/status", timeout=10) as response:
            figures = json.loads(response.read())
    except (URLError, OSError, ValueError) as error:
        print(f"feedmesh peer status: the peer of {data} does not answer at {local} ({error}); "
              "is it running?",
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


def _said(error: BaseException) -> str:
    """An error as one line for a person (an OSError's own words, without its number)."""
    return (error.strerror or str(error)) if isinstance(error, OSError) else str(error)
