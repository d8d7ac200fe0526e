"""SCRIBE-RSS as a peer's second exchange protocol: signed multicast into the archive.

For each followed feed whose HTTP document carries a ``<subscribe>`` element (read with one
ordinary fetch, :func:`~feedmesh.mesh.transport.subscriber.discover`), the peer joins the feed's
Scribe group on its own UDP endpoint and verifies every record with the feed's log. Steps:

1. discover: read each followed feed's element (see below); whether to follow the key it names
   is :mod:`.trust`'s decision (pinned at first use, or a listed republisher);
2. join the overlay through ``--scribe-bootstrap``, else the element's bootstrap node, else a
   peer the FeedEx tracker names; one that does not answer within ``join_timeout_s`` gives way to
   the next of all of them, in that order (and round again); then join the feed's group (a
   republisher's log travels in a group of its own);
3. every verified record goes into the archive at once (and so into the local proxy's feeds),
   marked ``republished_by`` (``fm:republishedBy`` in the feeds served) when a republisher
   signed it; gaps are asked of the parent, then of the HTTP feed
   (:class:`~feedmesh.mesh.transport.subscriber.Subscriber`); while the
   group is attached the archive polls the feed only as a safety net (``on_pushed``);
4. refused records (unsigned, tampered, wrong key, replayed, out of chain...) are never kept:
   they are counted per feed and reason (``peer status``) and logged (``record_refused``).

Discovery costs the publisher nothing once the archive knows a feed: the element is read from the
archive's last document of it, and looked at again whenever the archive's own fetches get a new
document (an element may appear, or name another key). Only a feed never fetched yet (the first
start) is fetched once for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from feedmesh.feeds.foreign import clean_foreign
from feedmesh.feeds.identity import content_hash
from feedmesh.mesh.feedex.messages import Address
from feedmesh.mesh.transport import UdpNode, handle_at
from feedmesh.mesh.transport.subscriber import NotMulticast, Received, Subscriber, discover
from feedmesh.model import Entry, FeedInfo, FetchResult, MeshSubscribe

from .exchange import Keep
from .trust import PinnedKeys, TrustSettings, decide

__all__ = ["MulticastSettings", "ScribeExchange", "entry_from_record"]

log = logging.getLogger("feedmesh.mesh.peer")

PINNED_FILE = "pinned-keys.json"


@dataclass(frozen=True)
class MulticastSettings:
    address: Address
    """The UDP endpoint of this overlay node (its id is drawn from it)."""
    bootstrap: tuple[Address, ...] = ()
    """Overlay nodes to join through; none: the first bootstrap a feed's element names."""
    trust: TrustSettings = field(default_factory=TrustSettings)
    http_after_s: float = 3.0
    """A gap the parents could not fill in this long is taken from the HTTP feed."""
    join_timeout_s: float = 30.0


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _text(entry: dict[str, Any], name: str, limit: int = 16_384) -> str:
    value = entry.get(name)
    return value[:limit] if isinstance(value, str) else ""


def entry_from_record(entry: dict[str, Any], republished_by: str | None, feed: str = "",
                      now: float | None = None) -> Entry | None:
    """The stored entry made from a record's entry object (or an HTTP-recovered one); None if it
    has no usable key. A republication carries ``republished_by=KEY`` (written as the namespaced
    ``fm:republishedBy`` element, not a category a reader shows).

    A signature proves who sent the record, not that its markup is safe: title, link and summary
    are cleaned as the hub's parser cleans (:func:`feedmesh.feeds.foreign.clean_foreign`,
    relative links against ``feed``, dates after ``now`` clamped)."""
    key = _text(entry, "key", 2048) or _text(entry, "guid", 2048) or _text(entry, "id", 2048)
    if not key:
        return None
    title, link = _text(entry, "title"), _text(entry, "link", 2048)
    summary = _text(entry, "summary")
    guid = _text(entry, "guid", 2048) or ("" if key.startswith("hash:") else key)
    # the hash of the whole entry as the feed's document has it (a republished record carries
    # it; its summary may be cut): a later fetch of the document then finds the same entry, not
    # an edit of it
    carried = _text(entry, "content_hash", 128)
    raw = Entry(key=key, guid=guid, title=title, link=link, summary=summary,
                published=_parse_time(entry.get("published")),
                republished_by=republished_by or "")
    clean = clean_foreign(raw, feed, now)
    return msgspec.structs.replace(clean, content_hash=carried or content_hash(
        clean.title, clean.link, clean.summary, ""))


@dataclass
class _Followed:
    """One followed feed on the mesh."""

    url: str                          # the URL the person follows (the archive's feed)
    element: MeshSubscribe
    group: int = 0
    received: Counter[str] = field(default_factory=Counter)   # via -> records kept
    pushed: bool = False                                       # attached to the group's tree
    refused: Counter[str] = field(default_factory=Counter)    # reason -> records


class ScribeExchange:
    """``await start(feeds)``; records reach ``keep(feed URL, entries, source)``."""

    name = "scribe"

    def __init__(self, settings: MulticastSettings, keep: Keep,
                 fetch: Callable[[str], Awaitable[FetchResult]], data: Path, *,
                 stored: Callable[[str], Awaitable[FeedInfo | None]] | None = None,
                 on_pushed: Callable[[str, bool], None] | None = None,
                 peers: Callable[[], Iterable[Address]] | None = None,
                 now: Callable[[], float] = time.time) -> None:
        """``stored(url)``: the feed-level data of the archive's last document of ``url``, so a
        known feed's element is read without a request. ``on_pushed(url, attached)`` says when
        a followed feed's group is attached (records arrive pushed) or no longer is. ``peers()``:
        other peers known from the FeedEx tracker (their FeedEx address, where a peer's overlay
        node listens too unless ``--scribe`` moved it), joined through when neither
        ``--scribe-bootstrap`` nor any followed feed's element names a bootstrap node. ``now()``:
        the peer's clock (Unix seconds), against which records' dates are clamped."""
        self.settings = settings
        self.now = now
        self.keep = keep
        self.fetch = fetch
        self.pinned = PinnedKeys(data / PINNED_FILE)
        self.endpoint = UdpNode(*settings.address, keep_deliveries=False)
        self.subscriber = Subscriber(self.endpoint, fetch, http_after=settings.http_after_s,
                                     on_received=self._on_received, keep_received=0)
        self.followed: dict[str, _Followed] = {}        # followed URL -> state
        self._by_log: dict[str, _Followed] = {}         # the log's URL (the group's) -> state
        self.not_followed: dict[str, str] = {}          # followed URL -> why not on the mesh
        self.bootstrap: Address | None = settings.bootstrap[0] if settings.bootstrap else None
        self.stored = stored
        self.on_pushed = on_pushed
        self.peers = peers
        self.bootstrap_source = "flag" if self.bootstrap is not None else ""
        self.counters: Counter[str] = Counter()
        self._warned: dict[str, str] = {}
        self._pending: list[str | tuple[str, FeedInfo]] = []
        self._started = False
        self._join_deadline = 0.0
        self._task: asyncio.Task[None] | None = None
        self._keeping: set[asyncio.Task[int]] = set()

    # -- the Exchange protocol -----------------------------------------------------------------

    async def start(self, feeds: Iterable[str]) -> None:
        await self.endpoint.open()
        self._pending.extend(feeds)
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.endpoint.close()
        if self._keeping:
            await asyncio.gather(*self._keeping, return_exceptions=True)

    def subscribe(self, feed: str) -> None:
        self._pending.append(feed)

    def fetched(self, feed: str, entries: list[Entry]) -> None:
        """Our own fetches are not multicast: only a feed's publisher (or a republisher) signs."""

    def status(self) -> dict[str, object]:
        node = self.endpoint.node
        feeds = []
        for state in self.followed.values():
            group = node.groups.get(state.group) if node is not None else None
            feeds.append({"pushed": state.pushed,
                "url": state.url, "log": state.element.group,
                "key": state.element.public_key,
                "republication": state.element.republication,
                "attached": bool(group and (group.parent is not None or group.root)),
                "seq": group.log.seq if group is not None and group.log is not None else 0,
                "received": dict(state.received), "refused": dict(state.refused)})
        refused = Counter[str]()
        for state in self.followed.values():
            refused.update(state.refused)
        udp = {k: v for k, v in self.endpoint.counters.items()
               if k in ("malformed", "oversized", "spoofed")}
        return {"protocol": self.name,
                "address": f"{self.endpoint.addr[0]}:{self.endpoint.addr[1]}",
                "joined": bool(node is not None and node.pastry.joined),
                "bootstrap": f"{self.bootstrap[0]}:{self.bootstrap[1]}" if self.bootstrap else None,
                "bootstrap_from": self.bootstrap_source or None,
                "feeds": feeds, "not_multicast": dict(self.not_followed),
                "refused": dict(refused), "datagrams_refused": udp,
                "tree": {k: v for k, v in (node.counters.items() if node is not None else ())
                         if k in ("parent-lost", "freeloader-detected", "shunned-refused")},
                "counters": dict(self.counters)}

    # -- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            if self._pending:
                pending, self._pending = self._pending, []
                await self._discover(pending)
            if not self._started and self.bootstrap is None and self.followed:
                self._bootstrap_from_peers()
            if not self._started and self.bootstrap is not None and self.followed:
                await self._join()
            elif (self._started and not self.endpoint.node.pastry.joined
                  and asyncio.get_running_loop().time() >= self._join_deadline):
                self._next_bootstrap()
            if self._started:
                await self.subscriber.check()
                self._note_refusals()
                self._note_attachment()
            await asyncio.sleep(self.subscriber.period)

    def document(self, feed: str, info: FeedInfo) -> None:
        """The archive's own fetch of ``feed`` got a document: look at its element again (an
        element may appear, or name another key), with no fetch of our own."""
        if info.subscribe is not None or feed not in self.followed:
            self._pending.append((feed, info))

    async def _discover(self, feeds: list[str | tuple[str, FeedInfo]]) -> None:
        found = await asyncio.gather(*(self._element(*([f] if isinstance(f, str) else f))
                                       for f in feeds))
        for feed, element in zip(feeds, found, strict=True):
            url = feed if isinstance(feed, str) else feed[0]
            if element is None:
                continue
            followed = self.followed.get(url)
            why = decide(self.settings.trust, element, self.pinned.get(url))
            if followed is not None:
                if why is None:
                    self._learn_rotations(followed, element)   # a rotation since the last one
                elif self._warned.get(url) != element.public_key:
                    self._warned[url] = element.public_key
                    log.warning("multicast_key_refused feed=%s why=%r", url, why)
                continue
            if why is not None:
                self.not_followed[url] = why
                log.warning("multicast_key_refused feed=%s why=%r", url, why)
                continue
            self.not_followed.pop(url, None)
            if self.settings.trust.policy == "first-use":
                self.pinned.pin(url, element.public_key)
            state = _Followed(url, element)
            self.followed[url] = state
            self._by_log[element.group] = state
            if self.bootstrap is None:
                self.bootstrap = self._bootstrap_of(element)
                self.bootstrap_source = "element" if self.bootstrap is not None else ""
            if self._started:
                self._subscribe(state)

    async def _element(self, url: str, info: FeedInfo | None = None) -> MeshSubscribe | None:
        """The element of ``url``'s document: the one the archive's fetches saw (no request of
        ours), else one fetch of the feed (a feed the archive has not fetched yet)."""
        if info is None and self.stored is not None:
            info = await self.stored(url)
        if info is not None and (info.subscribe is None or info.subscribe.public_key):
            element = info.subscribe
            if element is None:
                self.not_followed[url] = "its document has no <subscribe> element"
                return None
            if not element.group:
                element = msgspec.structs.replace(element, group=info.self_link or url)
            return element
        try:
            return await discover(self.fetch, url)   # also fetches a key given by reference
        except NotMulticast as why:
            self.not_followed[url] = str(why)
            log.info("not_multicast feed=%s why=%r", url, str(why))
            return None

    def _bootstrap_from_peers(self) -> None:
        """No bootstrap named anywhere: join through a peer the FeedEx tracker told us of."""
        if self.peers is None:
            return
        for address in self.peers():
            if tuple(address) != tuple(self.endpoint.addr):
                self.bootstrap = (address[0], int(address[1]))
                self.bootstrap_source = "tracker"
                log.info("overlay_bootstrap_from_tracker node=%s:%d", *self.bootstrap)
                return

    def _bootstrap_of(self, element: MeshSubscribe) -> Address | None:
        found = self._bootstraps_of(element)
        return found[0] if found else None

    def _bootstraps_of(self, element: MeshSubscribe) -> list[Address]:
        found = []
        for text in element.bootstrap:
            host, _, port = text.rpartition(":")
            if host and port.isdigit() and (host, int(port)) != tuple(self.endpoint.addr):
                found.append((host, int(port)))
        return found

    def _candidates(self) -> list[tuple[Address, str]]:
        """Every node we could join through, best first: the flag's, the followed feeds'
        elements', the tracker's peers."""
        seen: set[Address] = set()
        out: list[tuple[Address, str]] = []

        def add(address: Address, source: str) -> None:
            address = (address[0], int(address[1]))
            if address not in seen and address != tuple(self.endpoint.addr):
                seen.add(address)
                out.append((address, source))

        for address in self.settings.bootstrap:
            add(address, "flag")
        for state in self.followed.values():
            for address in self._bootstraps_of(state.element):
                add(address, "element")
        if self.peers is not None:
            for address in self.peers():
                add(address, "tracker")
        return out

    def _next_bootstrap(self) -> None:
        """The join through ``self.bootstrap`` has not finished in ``join_timeout_s``: send it
        through the next candidate (the same one again if it is the only one)."""
        loop = asyncio.get_running_loop()
        self._join_deadline = loop.time() + self.settings.join_timeout_s
        candidates = self._candidates()
        if not candidates:
            return
        addresses = [address for address, _ in candidates]
        current = tuple(self.bootstrap) if self.bootstrap is not None else None
        at = addresses.index(current) + 1 if current in addresses else 0
        address, source = candidates[at % len(candidates)]
        log.warning("overlay_join_slow bootstrap=%s:%d waited_s=%.0f next=%s:%d from=%s",
                    *(current or ("-", 0)), self.settings.join_timeout_s, *address, source)
        self.bootstrap, self.bootstrap_source = address, source
        self.counters["bootstrap-changed"] += 1
        handle = handle_at(*address)
        self.endpoint.act(lambda node, now: node.pastry.bootstrap_through(now, handle))

    async def _join(self) -> None:
        assert self.bootstrap is not None
        self._started = True
        await self.endpoint.start(handle_at(*self.bootstrap))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.join_timeout_s
        self._join_deadline = deadline
        # ASYNC110: ``joined`` is a field of the sans-IO node, which has no event to set: polled.
        while not self.endpoint.node.pastry.joined and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if not self.endpoint.node.pastry.joined:
            self._next_bootstrap()   # the groups are joined meanwhile, and again once we are in
        else:
            log.info("overlay_joined node=%s:%d bootstrap=%s:%d", *self.endpoint.addr,
                     *self.bootstrap)
        for state in self.followed.values():
            self._subscribe(state)

    def _subscribe(self, state: _Followed) -> None:
        element = state.element
        state.group = self.subscriber.subscribe(element.group, element.public_key,
                                                republication=element.republication)
        log.info("multicast_subscribed feed=%s log=%s key=%s republication=%s", state.url,
                 element.group, element.public_key, str(element.republication).lower())
        self._learn_rotations(state, element)

    def _learn_rotations(self, state: _Followed, element: MeshSubscribe) -> None:
        """The element's signed rotations tell the log the current key: a peer that follows a
        feed after a rotation (or missed its ``rotate`` record in a gap) accepts the new key."""
        node = self.endpoint.node
        group = node.groups.get(state.group) if node is not None and state.group else None
        if group is None or group.log is None or not element.rotations:
            return
        try:
            group.log.learn_rotations(element.rotations)
        except ValueError as why:
            self.counters["rotations-refused"] += 1
            log.warning("multicast_rotations_refused feed=%s why=%r", state.url, str(why))
            return
        log.info("multicast_key feed=%s current=%s", state.url, group.log.key)

    # -- records in ----------------------------------------------------------------------------

    def _on_received(self, received: Received) -> None:
        state = self._by_log.get(received.url)
        if state is None:
            return
        element = state.element
        entry = entry_from_record(received.entry,
                                  element.public_key if element.republication else None,
                                  state.url, self.now())
        if entry is None:
            self.counters["entries-without-key"] += 1
            return
        state.received[received.via] += 1
        source = f"scribe:{'republisher' if element.republication else 'publisher'}"
        task = asyncio.ensure_future(self.keep(state.url, [entry], source))
        self._keeping.add(task)
        task.add_done_callback(self._keeping.discard)

    def _attached(self, state: _Followed) -> bool:
        node = self.endpoint.node
        group = node.groups.get(state.group) if node is not None else None
        return bool(group and (group.parent is not None or group.root))

    def _note_attachment(self) -> None:
        for state in self.followed.values():
            attached = self._attached(state)
            if attached != state.pushed:
                state.pushed = attached
                log.info("multicast_attached feed=%s attached=%s", state.url,
                         str(attached).lower())
                if self.on_pushed is not None:
                    self.on_pushed(state.url, attached)

    def _note_refusals(self) -> None:
        node = self.endpoint.node
        for state in self.followed.values():
            group = node.groups.get(state.group) if node is not None else None
            if group is None or group.log is None:
                continue
            for reason, count in group.log.refused.items():
                new = count - state.refused[reason]
                if new > 0:
                    state.refused[reason] = count
                    log.warning("record_refused feed=%s log=%s reason=%s count=%d total=%d",
                                state.url, state.element.group, reason, new, count)

