"""``feedmesh url-key``: show, rotate or retire the key that signs private feed URLs.

A private feed URL is an HMAC of its subscription under this key (:mod:`feedmesh.hub.front.tokens`),
so whoever holds the key can make a working URL for any subscription. An operator rotates it on a
schedule, or at once when it may have leaked:

- ``rotate``: a new key makes every URL from now on; the one it replaces still checks the URLs
  already handed out, so no reader's link breaks. People see their new URL on the web page.
- ``retire``: the key rotated out is dropped, and with it every URL it made (after a leak: right
  after ``rotate``; on a schedule: once readers have had time to take their new URLs).

Running processes pick the change up by themselves (a URL they cannot check makes them read the
keys again, at most every 5 s; the key they make URLs with is read again every minute). Works on
a data folder (``feed-secret.key`` and ``feed-secret.previous.key``, 0600) or on the PostgreSQL
database of a distributed hub (``--store``). The keys themselves are never printed: only their
fingerprints.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from feedmesh.commands import flags
from feedmesh.compose.engines import change_feed_url_keys, feed_url_keys
from feedmesh.compose.tools import key_fingerprint, redact_credentials
from feedmesh.errors import FeedmeshError

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("show", "rotate", "retire"),
                        help="show the keys' fingerprints; rotate: a new key makes URLs, the "
                             "old one still checks them; retire: drop the old one")
    flags.add_data(parser, help="the hub's data folder (where feed-secret.key is)")
    flags.add_store(parser, help="the distributed hub's postgresql:// URL (its keys are in the "
                    "database, not in a folder)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    try:
        before = _keys(args)
        if args.action != "show":
            change_feed_url_keys(args.data, args.store, rotate=args.action == "rotate",
                                 now=time.time())
        after = _keys(args)
    except FeedmeshError as exc:
        print(f"feedmesh url-key {args.action}: {exc}", file=sys.stderr)
        return 2
    where = _where(args)
    shown = {"where": where, "action": args.action,
             "current": key_fingerprint(after[0]),
             "previous": key_fingerprint(after[1]) if len(after) > 1 else None}
    if args.action == "rotate" and len(before) > 1:
        shown["dropped"] = key_fingerprint(before[1])
    if args.action == "retire":
        shown["dropped"] = key_fingerprint(before[1]) if len(before) > 1 else None
    if args.json:
        print(json.dumps(shown))
        return 0
    print(f"keys for private feed URLs in {where}")
    print(f"  makes URLs:   {shown['current']}")
    print(f"  checks URLs:  {shown['current']}"
          + (f", {shown['previous']} (rotated out; `feedmesh url-key retire` drops it)"
             if shown["previous"] else ""))
    if args.action == "rotate":
        print("rotated: new URLs are made with the new key; the URLs given before keep working "
              "until the old key is retired.")
        if "dropped" in shown:
            print(f"dropped {shown['dropped']}, rotated out before: the URLs it made no longer "
                  "work.")
    elif args.action == "retire":
        print(f"retired {shown['dropped']}: the URLs it made no longer work." if shown["dropped"]
              else "nothing to retire: no key was rotated out.")
    return 0


def _where(args: argparse.Namespace) -> str:
    return redact_credentials(args.store) if args.store else str(Path(args.data))


def _keys(args: argparse.Namespace) -> list[bytes]:
    return feed_url_keys(args.data, args.store)
