"""A private feed's archive (RFC 5005 archived feeds): its older matches, paged back from the
entries the crawler stored, by the subscription's own query.

A reflector holds a feed's newest ``keep`` matches (the ``keep`` largest entry ids it matched) and
nothing older, so a reader that polls less often than ``keep`` matches arrive would lose some. The
current feed therefore links ``prev-archive`` to the page of the matches just older than the
oldest it holds, and each page to the one older still. A page costs the reflectors nothing: it is
read from the ingest store and matched there, in the web process.

A page is named by its *boundary*: it holds the newest matches with an entry id below it.
Entry ids grow in commit order (:mod:`feedmesh.store.ports`), so new matches never enter a page
already made: what a page holds depends only on the entries stored below its boundary. The
entries are read in windows of ids from the boundary down (the store's ids have gaps but no
duplicates, so a window of ``n`` ids is at most ``n`` rows), until the page has ``page_entries``
matches or ``scan_ids`` ids have been looked at: the cost of a page is bounded however rare its
matches. The next page starts below the last match taken (or below the last id scanned).

Boundaries are minted by the hub only: a page's key is ``<boundary>-<mac>``, the MAC binding the
boundary to the subscription, its URL generation and its query, so a made-up boundary, one of
another feed, or one from before the query changed is answered 404 like an unknown token.

Updated entries keep their id (their new text shows in the page), and the store keeps a bounded
number of entries per source feed, so the oldest pages shrink as the crawler prunes: the archive
reaches back as far as the oldest entry stored.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

import msgspec

from feedmesh.store import ReflectedItem

__all__ = ["ARCHIVE_WINDOW_IDS", "ArchivePage", "feed_ttl_minutes", "key_data", "make_key",
           "next_boundary", "read_key"]

ARCHIVE_WINDOW_IDS = 500
"""Entry ids read from the store at a time while a page is gathered."""

TTL_MIN_MINUTES = 1
TTL_MAX_MINUTES = 24 * 60
TTL_UNKNOWN_MINUTES = 60
"""What a feed that has held fewer than two matches advertises (no rate to go by yet)."""

_KEY = struct.Struct(">QIQ")


class ArchivePage(msgspec.Struct, frozen=True):
    """One archive page: the newest matches below ``before``, newest first."""

    before: int
    items: list[ReflectedItem]
    older: int | None
    """The boundary of the next older page; None when nothing older is stored."""
    scanned: int
    """Entry ids looked at to make it (its cost)."""


def key_data(sub_id: int, generation: int, query: str, before: int) -> bytes:
    """What an archive page key's MAC covers."""
    return _KEY.pack(sub_id, generation, before) + hashlib.sha256(query.encode()).digest()


def make_key(before: int, tag: str) -> str:
    return f"{before}-{tag}"


def read_key(key: str) -> tuple[int, str] | None:
    """``(boundary, mac)`` of a key spelled as the hub makes them, else None."""
    before, dash, tag = key.partition("-")
    if not dash or not before.isascii() or not before.isdigit() or str(int(before)) != before:
        return None
    boundary = int(before)
    return (boundary, tag) if 0 < boundary < 2**63 else None


def next_boundary(found: Sequence[ReflectedItem], page_entries: int, scanned_down_to: int,
                  lowest: int) -> int | None:
    """Where the page after one holding ``found`` (newest first, at most ``page_entries``)
    starts: below its last match when it is full, else below the last id scanned; None when
    that is at or below the lowest id stored (nothing older to show)."""
    boundary = found[-1].entry_id if len(found) >= page_entries else scanned_down_to
    return boundary if boundary > lowest else None


def feed_ttl_minutes(first_seen: Sequence[float], keep: int) -> int:
    """The ``ttl`` a feed holding entries first seen at ``first_seen`` advertises: half the time
    in which ``keep`` matches arrive at the rate they have been arriving, so that a reader that
    polls at it sees every match in the feed itself (the archive has the rest), within 1 minute
    .. 1 day."""
    if len(first_seen) < 2:
        return TTL_UNKNOWN_MINUTES
    span = max(first_seen) - min(first_seen)
    fill_s = span / (len(first_seen) - 1) * keep
    return int(min(max(fill_s / 2 / 60, TTL_MIN_MINUTES), TTL_MAX_MINUTES))
