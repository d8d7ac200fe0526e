"""A subscriber on a UDP endpoint: what reaches its reader, and the HTTP fallback for gaps.

Every record is verified by the node's :class:`~feedmesh.mesh.records.FeedLog` before it is a
:class:`Received` here (refusals are counted by the node and the log, never delivered). A gap in the
sequence numbers is first asked of the parent (the Scribe core: ``Recover``, answered from the
buffers of the last records up the tree). A gap still open ``http_after`` seconds later is taken
from the feed's HTTP document with feedmesh's fetcher (section 4.2 of the paper: "as a fallback,
missing items may be recovered by querying the HTTP-based RSS feed as in the bootstrapping
phase"): its entries not yet received are handed on (``via="http"``, trusted as an ordinary poll of
the publisher's own URL is), and the log moves past the gap to the next signed record it holds
(:meth:`FeedLog.skip_gap`), so the chain stays checked from there on.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from feedmesh.feeds import parse_feed
from feedmesh.mesh.overlay import Delivery, republication_topic
from feedmesh.mesh.transport.udp import UdpNode
from feedmesh.model import Entry, FetchResult, MeshSubscribe

__all__ = ["NotMulticast", "Received", "Subscriber", "discover", "entry_identities"]

log = logging.getLogger("feedmesh.mesh.subscriber")


@dataclass(frozen=True, slots=True)
class Received:
    """An entry handed to the reader: from the tree, a parent's buffer, or the HTTP feed."""

    url: str
    entry: dict[str, Any]
    via: str                   # tree | recovered | http
    at: float
    seq: int | None = None     # None for entries taken from the HTTP feed


def entry_identities(entry: dict[str, Any] | Entry) -> set[str]:
    """The ways an entry can be recognised across a record and a parsed HTTP document."""
    if isinstance(entry, Entry):
        values = (entry.key, entry.guid, entry.link)
    else:
        values = (entry.get("key"), entry.get("guid"), entry.get("id"), entry.get("link"))
    return {v for v in values if isinstance(v, str) and v}


class NotMulticast(Exception):
    """The feed cannot be followed on the mesh (it has no usable ``<subscribe>``); says why."""


async def discover(fetch: Callable[[str], Awaitable[FetchResult]], feed_url: str) -> MeshSubscribe:
    """Bootstrap with one ordinary HTTP fetch: the feed's ``<subscribe>`` element, its group
    defaulting to the feed's own URL."""
    result = await fetch(feed_url)
    if not result.ok:
        raise NotMulticast(f"cannot fetch {feed_url}: "
                           f"{result.error.message if result.error else result.outcome}")
    parsed = parse_feed(result.body, url=result.final_url or feed_url,
                        content_type=result.content_type)
    found = parsed.feed.subscribe
    if found is None:
        why = "; ".join(w.message for w in parsed.warnings) or "it has no <subscribe> element"
        raise NotMulticast(f"{feed_url} is not multicast: {why}")
    if not found.public_key:
        found = msgspec.structs.replace(found, public_key=await _fetch_key(fetch, found))
    if not found.group:
        found = msgspec.structs.replace(found, group=parsed.feed.self_link or feed_url)
    return found


async def _fetch_key(fetch: Callable[[str], Awaitable[FetchResult]], found: MeshSubscribe) -> str:
    """The key a ``<publicKey href=... fingerprint=...>`` names: base64 text at the URI whose raw
    32 bytes hash to the fingerprint (so the URI's host cannot swap the key)."""
    result = await fetch(found.key_url)
    if not result.ok:
        raise NotMulticast(f"cannot fetch the key at {found.key_url}: "
                           f"{result.error.message if result.error else result.outcome}")
    text = result.body.decode("ascii", "replace").strip()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise NotMulticast(f"the key at {found.key_url} is not a base64 Ed25519 key "
                           f"({len(result.body)} bytes)")
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    if digest != found.fingerprint:
        raise NotMulticast(f"the key at {found.key_url} has fingerprint {digest}, the feed names "
                           f"{found.fingerprint}: refused")
    return text


class Subscriber:
    """Reader-side state of one endpoint. ``fetch(url)`` is feedmesh's fetcher (or any coroutine
    returning a :class:`~feedmesh.model.FetchResult`); ``run()`` watches for open gaps."""

    def __init__(self, endpoint: UdpNode, fetch: Callable[[str], Awaitable[FetchResult]], *,
                 http_after: float = 3.0, period: float = 0.25,
                 on_received: Callable[[Received], None] | None = None,
                 keep_received: int | None = None) -> None:
        """``on_received`` is called with each :class:`Received` as it comes; ``keep_received``
        bounds :attr:`received` to the last N (None: all of them)."""
        self.endpoint = endpoint
        self.fetch = fetch
        self.http_after = http_after
        self.period = period
        self.on_received = on_received
        self.received: deque[Received] = deque(maxlen=keep_received)
        self.counters: Counter[str] = Counter()
        self._known: dict[str, set[str]] = {}
        self._gap_since: dict[int, float] = {}
        endpoint.listen(self._on_delivery)
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, url: str, feed_key: str, *, republication: bool = False) -> int:
        """Follow the log of ``url`` signed by ``feed_key`` (the publisher's key, or with
        ``republication`` a republisher's, trusted by this call); returns the group id."""
        self._known.setdefault(url, set())
        topic = republication_topic(url, feed_key) if republication else None
        return self.endpoint.subscribe(url, feed_key, republication=republication, topic=topic)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def entries(self, url: str) -> list[dict[str, Any]]:
        return [r.entry for r in self.received if r.url == url]

    # ---- deliveries ---------------------------------------------------------------------------
    def _on_delivery(self, delivery: Delivery) -> None:
        record = delivery.record
        if record.type != "entry" or record.entry is None:
            return
        self._known.setdefault(record.url, set()).update(entry_identities(record.entry))
        self._hand_on(Received(record.url, record.entry,
                               "recovered" if delivery.recovered else "tree", delivery.at,
                               record.seq))

    def _hand_on(self, received: Received) -> None:
        self.received.append(received)
        if self.on_received is not None:
            self.on_received(received)

    # ---- the HTTP fallback --------------------------------------------------------------------
    def _learn_rotations(self, feed_log, element: MeshSubscribe | None) -> None:
        """The document's ``<subscribe>`` names the log's identity key and its signed rotations:
        a gap that held the ``rotate`` record no longer leaves the new key refused."""
        if element is None or not element.rotations or element.public_key != feed_log.feed:
            return
        try:
            feed_log.learn_rotations(element.rotations)
        except ValueError as why:
            self.counters["rotations-refused"] += 1
            log.warning("gap_http_rotations_refused feed=%s why=%r", feed_log.url, str(why))
            return
        self.counters["rotations-read"] += 1

    async def run(self) -> None:
        while not self.endpoint.closed:
            await self.check()
            await asyncio.sleep(self.period)

    async def check(self) -> None:
        node = self.endpoint.node
        if node is None:
            return
        now = self.endpoint.now()
        for gid, group in list(node.groups.items()):
            feed_log = group.log
            if feed_log is None or not feed_log.missing:
                self._gap_since.pop(gid, None)
                continue
            since = self._gap_since.setdefault(gid, now)
            if now - since >= self.http_after:
                await self._fill_from_http(gid, feed_log)
                self._gap_since[gid] = self.endpoint.now()

    async def _fill_from_http(self, gid: int, feed_log) -> None:
        url = feed_log.url
        missing = feed_log.missing
        self.counters["http-fetches"] += 1
        result = await self.fetch(url)
        if not result.ok:
            self.counters["http-failed"] += 1
            log.warning("gap_http_failed feed=%s missing=%s outcome=%s", url, list(missing),
                        result.outcome)
            return
        parsed = parse_feed(result.body, url=result.final_url or url,
                            content_type=result.content_type)
        if not parsed.entries:
            self.counters["http-failed"] += 1
            log.warning("gap_http_empty feed=%s missing=%s error=%s", url, list(missing),
                        parsed.error.message if parsed.error else "no entries")
            return
        self._learn_rotations(feed_log, parsed.feed.subscribe)
        # first the signed records held past the gap (so their entries count as known) ...
        endpoint = self.endpoint
        skipped_before = feed_log.skipped
        while feed_log.missing:
            verdict = feed_log.skip_gap()
            if not verdict.delivered:
                break
            for record in verdict.delivered:
                endpoint.node.deliveries.append(Delivery(gid, record, endpoint.now(), True))
            endpoint.act(lambda node, now: None)   # hands the deliveries on
        # ... then what only the HTTP feed has, oldest first
        known = self._known.setdefault(url, set())
        now = endpoint.now()
        fresh = [e for e in reversed(parsed.entries) if not entry_identities(e) & known]
        for entry in fresh:
            body = {"key": entry.key, "guid": entry.guid, "title": entry.title,
                    "link": entry.link, "summary": entry.summary}
            known.update(entry_identities(entry))
            self._hand_on(Received(url, body, "http", now))
        self.counters["http-entries"] += len(fresh)
        self.counters["skipped-seqs"] += feed_log.skipped - skipped_before
        log.info("gap_filled_from_http feed=%s missing=%s entries=%d", url, list(missing),
                 len(fresh))
