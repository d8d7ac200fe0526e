"""``feedmesh keys make|show|rotate|revoke --dir DIR``: the signing key of a publisher or
republisher (issue 14). ``show`` prints the public key, its fingerprint, the ``<subscribe>``
element to put in a feed, and checks every announcement in the keyring."""

from __future__ import annotations

import argparse
import os
import sys
import time

from feedmesh import environment
from feedmesh.feeds.subscribe import xml_subscribe
from feedmesh.mesh.keys.store import KeyFileError, KeyStore, fingerprint, verify_announcement
from feedmesh.model import MeshSubscribe

__all__ = ["configure", "default_folder", "run"]


def default_folder() -> str:
    return os.path.join(environment.get("FEEDMESH_DATA", "var"), "keys")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("make", "show", "rotate", "revoke"),
                        help="make a key, show it, rotate it (the old key signs the new one), "
                             "or revoke it (it signs its own revocation)")
    parser.add_argument("--dir", default=default_folder(),
                        help="the key folder (secret.key 0600, keyring.json, logs.json, outbox/)")
    parser.add_argument("--url", default="",
                        help="show: the feed's canonical URL to put in the <subscribe> element")


def run(args: argparse.Namespace) -> int:
    store = KeyStore(args.dir)
    try:
        if args.action == "make":
            public = store.make(time.time())
            print(f"made key {public}\n  {fingerprint(public)}\n  in {store.folder} "
                  "(secret.key is 0600: keep it so)")
        elif args.action == "rotate":
            before = store.keyring()["current"]
            public = store.rotate(time.time())
            print(f"rotated {before} -> {public}\n  announced in keyring.json; "
                  f"{len(store.outbox())} record(s) in {store.folder / 'outbox'} to multicast")
        elif args.action == "revoke":
            store.revoke(time.time())
            print(f"revoked {store.keyring()['current']}: it signs nothing more; "
                  f"{len(store.outbox())} record(s) in {store.folder / 'outbox'} to multicast")
        else:
            return _show(store, args.url)
    except KeyFileError as error:
        print(f"feedmesh keys {args.action}: {error}", file=sys.stderr)
        return 2
    return 0


def _show(store: KeyStore, url: str) -> int:
    store.signing_key()   # checks the secret's permissions and that it matches the keyring
    ring = store.keyring()
    print(f"identity  {ring['feed']}")
    print(f"current   {ring['current']}  {fingerprint(ring['current'])}")
    print(f"state     {'REVOKED' if ring.get('revoked') else 'active'}")
    status = 0
    chain = ring["feed"]
    for text in ring.get("announcements", []):
        try:
            note = verify_announcement(text)
        except ValueError as error:
            print(f"announcement  BAD: {error}")
            status = 1
            continue
        linked = ("ok" if note.old == chain
                  else f"BROKEN: signed by {note.old[:12]}, not {chain[:12]}")
        status = status or (0 if note.old == chain else 1)
        print(f"announcement  {note.type} {note.old[:12]}.. -> {(note.new or '-')[:12]}.."
              f"  {linked}")
        chain = note.new or chain
    for log_url, head in store.logs().items():
        print(f"log       {log_url} seq {head.get('seq')}")
    # the identity key starts the log; its signed rotations name the current key
    print(xml_subscribe(MeshSubscribe(group=url, public_key=ring["feed"],
                                      rotations=store.rotations())), end="")
    return status
