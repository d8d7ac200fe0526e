"""Owners for feeds nobody owns yet: what a named crawler decides when a web process adds a
feed (``FeedsAdded``) or it finds unowned feeds at start, between two ``feedmesh map --apply``.

No latency is known for a new feed's server at that moment, so the rule follows the last mapping
instead: a feed goes to the crawler that owns most feeds of the same server (``host:port``),
which the mapping chose for being near it; a feed of a server no crawler fetches goes to the
crawler with the fewest feeds (ties: the first name). Every crawler computes the same rule from
the same table, and the store keeps the first claim of a feed, so a feed gets exactly one owner
whichever crawler claims it first. The next ``map --apply`` places it by latency.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from feedmesh.locality.errors import LocalityError
from feedmesh.locality.groups import host_of

__all__ = ["place_new_feeds"]


def _server(url: str) -> str:
    try:
        return host_of(url)
    except LocalityError:
        return ""  # not an http(s) URL: no server to be near; the fewest-feeds rule applies


def place_new_feeds(new: Mapping[int, str], owned: Mapping[int, tuple[str, str]],
                    fallback: str) -> dict[int, str]:
    """An owner for each of ``new`` (feed id -> URL), given the feeds already owned (feed id ->
    (URL, owner)); ``fallback`` when no crawler owns anything yet. Pure: the same input, the
    same owners."""
    per_server: dict[str, Counter[str]] = {}
    load: Counter[str] = Counter()
    for url, owner in owned.values():
        per_server.setdefault(_server(url), Counter())[owner] += 1
        load[owner] += 1
    placed: dict[int, str] = {}
    for feed_id in sorted(new):
        server = _server(new[feed_id])
        near = per_server.get(server) if server else None
        if near:
            owner = min(near, key=lambda name: (-near[name], load[name], name))
        elif load:
            owner = min(load, key=lambda name: (load[name], name))
        else:
            owner = fallback
        placed[feed_id] = owner
        per_server.setdefault(server, Counter())[owner] += 1
        load[owner] += 1
    return placed
