"""The republisher (section 4.3.2 of the paper): legacy feeds onto the mesh.

It polls feeds that know nothing of the mesh with feedmesh's fetcher (conditional GET: ETag and
Last-Modified), parses them with feedmesh's parser, and multicasts each entry it has not seen yet
as a record of its own log for that feed: signed with *its* key (from a ``feedmesh keys`` folder),
``republication: true``, group = the legacy feed's URL. Subscribers accept such records only in a
log they opened as a republication log with this republisher's key, i.e. only if they chose to
trust it.

The first poll of a feed only learns what is there (history is not multicast); every later poll
multicasts what is new, oldest first. An entry already multicast whose content changed (its
content hash) is multicast again as an *edit record*: a record of type ``entry`` whose entry
carries the same key and ``"edit": true``. Records signed by ``feedmesh keys rotate``/``revoke``
(the folder's outbox) are multicast first. The log heads and what was multicast per feed (entry
key -> content hash, ``republished.json``) live in the key folder, so a restarted republisher
continues its logs, sends nothing twice and, on its first poll, multicasts what was posted while
it was down.

The hub can be the poller instead (``feedmesh serve --republish``): its crawler hands each new
entry to :meth:`Republisher.multicast`, and nothing is polled here.

It also serves, over HTTP (``feedmesh republish --http``), its own RSS feed of each legacy feed:
the entries it multicast lately and the ``<subscribe>`` element (its key, the group, its overlay
address) from which a client bootstraps with one fetch. That feed is named as the legacy feed
names itself (its ``<title>``); each item's ``<source url="legacy URL">`` carries the legacy
feed's title, and the republication mark is the namespaced ``fm:republishedBy`` element (the
republisher's key), never a category a reader would show. Until something is multicast, the
feed holds what the legacy feed held at the republisher's first poll, each item marked
``fm:backlog`` (the feed's state, not news): a peer that follows it starts full, from one fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, deque
from collections.abc import Iterable
from datetime import datetime

from msgspec.structs import replace

from feedmesh.feeds import parse_feed
from feedmesh.feeds.render import render_feed
from feedmesh.fetch import Fetcher, FetchRequest
from feedmesh.mesh.keys import KeyStore
from feedmesh.mesh.overlay import republication_topic
from feedmesh.mesh.records import FeedWriter, open_record
from feedmesh.mesh.transport.udp import UdpNode
from feedmesh.model import Entry, FeedInfo, FetchOutcome, MeshSubscribe

__all__ = ["RECENT", "Republisher", "entry_record"]

log = logging.getLogger("feedmesh.mesh.republish")
MAX_TEXT = 4_000   # characters of summary kept in a record: records must fit a datagram
RECENT = 20        # entries of each feed in the republisher's own HTTP feed
REMEMBERED = 2_000  # entries of each feed remembered as multicast (a feed's document holds fewer)


def entry_record(entry: Entry, source: str) -> dict[str, object]:
    """The JSON object a record carries for one legacy entry (bounded in size)."""
    def when(moment: datetime | None) -> str:
        return moment.isoformat() if moment is not None else ""
    body = {"key": entry.key, "guid": entry.guid, "title": entry.title[:500],
            "link": entry.link, "summary": (entry.summary or entry.content)[:MAX_TEXT],
            "published": when(entry.published or entry.updated), "source": source,
            "content_hash": entry.content_hash}
    return {k: v for k, v in body.items() if v}


class Republisher:
    def __init__(self, endpoint: UdpNode, keys: KeyStore, fetcher: Fetcher,
                 urls: Iterable[str]) -> None:
        self.endpoint = endpoint
        self.keys = keys
        self.fetcher = fetcher
        self.urls = list(dict.fromkeys(urls))
        self.identity = keys.identity()
        self.counters: Counter[str] = Counter()
        # per feed: entry key -> content hash of what was multicast (or learned on a first poll)
        self._seen: dict[str, dict[str, str]] = keys.republished()
        self.recent: dict[str, deque[Entry]] = {url: deque(maxlen=RECENT) for url in self.urls}
        self.titles: dict[str, str] = {}
        """Each legacy feed's own title (its document's), once known."""
        self._validators: dict[str, tuple[str, str]] = {}
        self._writers: dict[str, FeedWriter] = {}

    def feed_document(self, index: int, bootstrap: str, self_link: str) -> bytes:
        """The republisher's own RSS 2.0 feed of legacy feed ``index``: what it multicast lately,
        with the ``<subscribe>`` element a client bootstraps from (key, group, overlay node)."""
        return self.document_of(self.urls[index], bootstrap, self_link)

    def add(self, url: str) -> None:
        """Republish ``url`` too (the hub's crawler found it; it is polled elsewhere)."""
        if url not in self.recent:
            self.urls.append(url)
            self.recent[url] = deque(maxlen=RECENT)

    def document_of(self, url: str, bootstrap: str, self_link: str) -> bytes:
        """:meth:`feed_document` by the legacy feed's URL."""
        self.add(url)
        title = self.title_of(url)
        info = FeedInfo(title=title, link=url, self_link=self_link,
                        description=f"Entries of {title} ({url}) republished on the mesh, "
                                    f"signed by {self.identity}",
                        subscribe=MeshSubscribe(group=url, public_key=self.identity,
                                                bootstrap=(bootstrap,), republication=True,
                                                rotations=self.keys.rotations()))
        entries = [replace(e, republished_by=self.identity) for e in self.recent[url]]
        return render_feed(info, entries, "rss2.0", source_titles=[(title, url)] * len(entries))

    def title_of(self, url: str) -> str:
        """The legacy feed's own title; its URL until a poll (or the hub) has told it."""
        return self.titles.get(url) or url

    def learn_title(self, url: str, title: str) -> None:
        if title.strip():
            self.titles[url] = title.strip()

    def topic(self, url: str) -> str:
        """The group this republisher's log of ``url`` travels in (not the publisher's own)."""
        return republication_topic(url, self.identity)

    def send_outbox(self) -> int:
        """Multicast the rotate/revoke records ``feedmesh keys`` signed, then forget them."""
        sent = 0
        for path in self.keys.outbox():
            wire = path.read_bytes()
            record = open_record(wire)
            topic = self.topic(record.url) if record.republication else None
            self.endpoint.publish(record.url, record.seq, wire, topic=topic)
            path.unlink()
            sent += 1
        self._writers.clear()   # heads moved: resume from the folder
        return sent

    async def poll_once(self) -> int:
        """Poll every feed once; returns how many records were multicast."""
        results = await asyncio.gather(*(self._poll(url) for url in self.urls))
        return sum(results)

    async def run(self, interval: float, stop: asyncio.Event, *, poll_first: bool = True) -> None:
        """Poll every ``interval`` seconds until ``stop`` (``poll_first`` False: the caller has
        just polled, wait an interval first)."""
        polled = not poll_first
        while not stop.is_set():
            if not polled:
                await self.poll_once()
            polled = False
            with contextlib.suppress(TimeoutError):   # the interval passed: poll again
                await asyncio.wait_for(stop.wait(), interval)

    async def _poll(self, url: str) -> int:
        etag, modified = self._validators.get(url, ("", ""))
        result = await self.fetcher.fetch(FetchRequest(url, etag=etag, last_modified=modified))
        self.counters[f"fetch-{result.outcome}"] += 1
        if result.outcome == FetchOutcome.NOT_MODIFIED:
            return 0
        if not result.ok:
            log.warning("republish_fetch_failed feed=%s outcome=%s why=%r", url, result.outcome,
                        result.error.message if result.error else "")
            return 0
        self._validators[url] = (result.etag, result.last_modified)
        parsed = parse_feed(result.body, url=result.final_url or url,
                            content_type=result.content_type)
        if parsed.error is not None and not parsed.entries:
            log.warning("republish_parse_failed feed=%s why=%r", url, parsed.error.message)
            return 0
        self.learn_title(url, parsed.feed.title)
        seen = self._seen.get(url)
        if not self.recent[url]:   # nothing to show yet: the feed's state, marked as such
            self.recent[url].extend(replace(e, backlog=True) for e in parsed.entries[:RECENT]
                                    if seen is None or e.key in seen)
        if seen is None:   # first poll ever: learn what is there, multicast nothing
            self._seen[url] = {e.key: e.content_hash for e in parsed.entries}
            self._save_seen()
            return 0
        sent = 0
        for entry in reversed(parsed.entries):
            if entry.key not in seen:
                self.multicast(url, entry)
            elif seen[entry.key] != entry.content_hash:
                self.multicast(url, entry, edit=True)
            else:
                continue
            sent += 1
        return sent

    def multicast(self, url: str, entry: Entry, *, edit: bool = False) -> None:
        """Sign ``entry`` of legacy feed ``url`` into our log of it and send it to the group
        (``edit``: an entry multicast before, changed since)."""
        self.add(url)
        writer = self._writers.get(url)
        if writer is None:
            writer = self._writers[url] = self.keys.writer(url, republication=True)
        body = entry_record(entry, url)
        if edit:
            body["edit"] = True
        wire = writer.append(body)
        self.keys.save_head(writer)
        seen = self._seen.setdefault(url, {})
        seen.pop(entry.key, None)
        seen[entry.key] = entry.content_hash   # newest last: the oldest are forgotten first
        while len(seen) > REMEMBERED:
            del seen[next(iter(seen))]
        self._save_seen()
        self.endpoint.publish(url, writer.seq, wire, topic=self.topic(url))
        self.recent[url] = deque((e for e in self.recent[url] if e.key != entry.key),
                                 maxlen=RECENT)
        self.recent[url].appendleft(entry)
        self.counters["edits" if edit else "multicast"] += 1
        log.info("republished feed=%s seq=%d entry=%s bytes=%d edit=%s", url, writer.seq,
                 entry.key, len(wire), str(edit).lower())

    def _save_seen(self) -> None:
        self.keys.save_republished(self._seen)
