"""The farm as a publisher that lists its recent FeedEx clients: a source of neighbours (FeedEx
3.1, "publishers that list recent clients"; issue 13).

A request for a feed that carries ``FeedEx-Peer: PORT`` says the client is a FeedEx peer that
listens on PORT of the address the request came from (the same identity rule as the protocol's:
the host from the connection, only the port stated). The farm remembers the latest
``per_feed`` such clients of each feed, and answers each of them with the others heard within
``ttl_s``, newest first, as ``Link: <http://HOST:PORT/feedex/v1>; rel="feedex-peer"``. A request
without the header is neither remembered nor answered with a list.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["HEADER", "REL", "RecentPeers"]

# the names feedmesh's peer (mesh/peer/daemon.py) uses; tests/mesh/peer/test_publisher_peers.py
# crosses the socket with both
HEADER = "FeedEx-Peer"
REL = "feedex-peer"


class RecentPeers:
    """Recent FeedEx clients of each feed, by (host, stated port)."""

    def __init__(self, per_feed: int = 8, ttl_s: float = 86400.0) -> None:
        self.per_feed = per_feed
        self.ttl_s = ttl_s
        self._feeds: dict[int, OrderedDict[tuple[str, int], float]] = {}

    def clients(self, feed_id: int) -> list[tuple[str, int]]:
        """The feed's remembered clients, oldest first."""
        return list(self._feeds.get(feed_id, ()))

    def note(self, feed_id: int, host: str, stated: str, now: float) -> str:
        """Remember the client ``host`` with the port it stated for ``feed_id``; the ``Link:``
        value listing the feed's other recent clients ("" when none, or the port is not one)."""
        try:
            port = int(stated.strip())
        except ValueError:
            return ""
        if not host or not 1 <= port <= 65535:
            return ""
        clients = self._feeds.setdefault(feed_id, OrderedDict())
        others = [(h, p) for (h, p), at in reversed(clients.items())
                  if (h, p) != (host, port) and now - at <= self.ttl_s]
        clients.pop((host, port), None)
        clients[(host, port)] = now
        while len(clients) > self.per_feed:
            clients.popitem(last=False)
        return ", ".join(f'<http://{h}:{p}/feedex/v1>; rel="{REL}"'
                         for h, p in others[:self.per_feed])
