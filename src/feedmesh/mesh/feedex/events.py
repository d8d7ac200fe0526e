"""What a FeedEx node hands whoever drives it (a socket transport or the simulator): messages to
send (:class:`Send`, from :meth:`~.node.FeedExNode.take`) and events for its own side
(:class:`Deliver`, :class:`QueryResult`, from :meth:`~.node.FeedExNode.take_deliveries`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import NamedTuple

from .messages import Address, Entry, Holder, Message

__all__ = ["Deliver", "Event", "QueryResult", "Send", "bundle_did"]


class Send(NamedTuple):
    """Send ``message`` to the node at ``to`` (the transport adds the envelope and our port): the
    ``(destination, message)`` pair of the mesh's dialect."""

    to: Address
    message: Message


class Deliver(NamedTuple):
    """New entries for the archive and the reader; ``source`` None means our own fetch."""

    feed: str
    entries: list[Entry]
    source: Address | None
    at: float


class QueryResult(NamedTuple):
    """The aggregated answer to a query this node started (:meth:`FeedExNode.query`)."""

    qid: bytes
    feed: str
    holders: list[Holder]


Event = Deliver | QueryResult
"""What :meth:`~.node.FeedExNode.take_deliveries` returns."""


def bundle_did(feed: str, keys: Iterable[str]) -> bytes:
    """The did of a bundle: SHA-1 of the feed URL and its entry keys, sorted (3.4). Two nodes
    that fetch the same new entries make the same did, so the second bundle is seen as a repeat."""
    digest = hashlib.sha1(feed.encode(), usedforsecurity=False)
    for key in sorted(keys):
        digest.update(b"\n")
        digest.update(key.encode())
    return digest.digest()
