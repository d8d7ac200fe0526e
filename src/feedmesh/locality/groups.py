"""Feeds grouped by the host that serves them: latency is measured per group, never per feed.

Many feeds share a server (Cobra's 102,446 feeds lived on 591 IP addresses), and a crawler's
latency to a feed is its latency to that server, so probes go to one feed of each group. A group
is keyed by the server's IP address when it is known (names resolved at the edge, by
:mod:`feedmesh.locality.probe`), else by the URL's host name and port.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

import msgspec

from feedmesh.locality.errors import LocalityError

__all__ = ["HostGroup", "group_by_host", "host_of"]


class HostGroup(msgspec.Struct, frozen=True):
    """The feeds one server serves; ``probe_url`` is the one a latency probe asks for."""

    key: str
    feeds: tuple[str, ...]
    probe_url: str


def host_of(url: str) -> str:
    """``host:port`` of a feed URL (default ports filled in), the name a group falls back to."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise LocalityError(f"feed URL {url!r}: {error}") from error
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LocalityError(f"feed URL {url!r}: not an http(s) URL with a host")
    return f"{parts.hostname}:{port or (443 if parts.scheme == 'https' else 80)}"


def group_by_host(feed_urls: Mapping[str, str],
                  addresses: Mapping[str, str] | None = None) -> list[HostGroup]:
    """Group feeds (key -> URL) by server: by ``addresses[host name]`` (its IP address) when
    given, else by ``host:port``. Groups and their feeds come out sorted, so the result is a
    function of the input alone."""
    addresses = addresses or {}
    members: dict[str, list[tuple[str, str]]] = {}
    for feed, url in feed_urls.items():
        name = host_of(url)
        hostname = name.rsplit(":", 1)[0]
        key = addresses.get(hostname, name)
        members.setdefault(key, []).append((feed, url))
    groups = []
    for key in sorted(members):
        pairs = sorted(members[key])
        groups.append(HostGroup(key, tuple(feed for feed, _ in pairs), pairs[0][1]))
    return groups
