"""A named crawler's side of feed ownership (``feedmesh crawler --name NAME``): it crawls the
feeds the ownership table (:class:`~feedmesh.store.FeedOwnership`) gives NAME, and follows the
table while it runs.

How a feed changes hands while every crawler runs (docs/locality.md, "Ownership"):

1. ``feedmesh map --apply`` *stages* the move in the table (the owner keeps the feed, with a
   ``next_owner``) and sends ``OwnersChanged`` on the ``feeds`` subject;
2. the owner, told, stops starting fetches of the feed, waits until the fetches of it in flight
   are committed (their entries published), forgets it, and *releases* it in the table (it
   changes hands, epoch + 1); then it sends ``OwnersChanged`` in turn;
3. the new owner, told, reads the feed's fetch state from the store (committed by step 2, so
   its validators are the last ones) and crawls it.

At no moment do two crawlers fetch the feed, and each fetch's entries are committed and
published before the feed moves. A crawler that is not running when its feeds are staged
releases them at its next start; the feeds of a crawler that left are *transferred* by
``map --apply`` at once (there is no one to wait for). Feeds nobody owns (added by a web
process, or by ``--opml``) are claimed by the rule of :func:`feedmesh.locality.place_new_feeds`;
the table keeps the first claim, so each gets one owner.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from feedmesh.hub.tiers.crawler import CrawlerTier
from feedmesh.locality import place_new_feeds
from feedmesh.store import FeedOwnership, IngestStore, StoreThread

__all__ = ["CrawlerOwnership"]

log = logging.getLogger("feedmesh.hub.owners")


class CrawlerOwnership:
    def __init__(self, name: str, table: FeedOwnership, tier: CrawlerTier, store: IngestStore,
                 io: StoreThread) -> None:
        self.name = name
        self.table = table
        self.tier = tier
        self.store = store
        self._io = io
        self._lock = asyncio.Lock()

    async def start(self) -> bool:
        """Before the crawler loads its feeds: claim the unowned ones, hand over those staged
        away from this crawler (none of its fetches is in flight yet), and give the crawler the
        rest. True when some were handed over (the others should be told)."""
        await self.claim()
        rows = await self._io.call(self.table.owned_by, self.name)
        staged = [f for f, row in rows.items() if row.next_owner]
        released = await self._io.call(self.table.release, self.name, staged) if staged else {}
        self.tier.crawler.owner_name = self.name
        self.tier.crawler.owned = {f: row.epoch for f, row in rows.items() if f not in released}
        log.info("ownership_loaded crawler=%s feeds=%d released=%d", self.name,
                 len(self.tier.crawler.owned), len(released))
        return bool(released)

    async def claim(self, feed_ids: Iterable[int] | None = None) -> None:
        """Give an owner to each of these feeds (every feed of the store when None) that has
        none."""
        wanted = None if feed_ids is None else set(feed_ids)

        def unowned() -> dict[int, str] | None:
            urls = {row.id: row.source_url for row in self.store.feeds()}
            owners = self.table.owners()
            new = {f: url for f, url in urls.items()
                   if f not in owners and (wanted is None or f in wanted)}
            if not new:
                return None
            owned = {f: (urls[f], row.owner) for f, row in owners.items() if f in urls}
            return place_new_feeds(new, owned, self.name)

        choices = await self._io.call(unowned)
        if choices:
            await self._io.call(self.table.claim, choices)

    async def reconcile(self) -> bool:
        """Follow the table: hand over the feeds staged away from this crawler (after their
        fetches in flight are committed), forget those transferred away, crawl those gained.
        True when some were handed over (the others should be told)."""
        async with self._lock:
            owned = self.tier.crawler.owned
            assert owned is not None
            rows = await self._io.call(self.table.owned_by, self.name)
            staged = {f for f, row in rows.items() if row.next_owner
                      and row.next_owner != self.name}
            keep = set(rows) - staged
            # A feed back at a new epoch (it went away and came back between two looks): its
            # state here is stale; it is dropped and taken again from the store.
            again = {f for f in keep & owned.keys() if rows[f].epoch != owned[f]}
            lost = sorted((owned.keys() - set(rows)) | (owned.keys() & staged) | again)
            gained = sorted((keep - owned.keys()) | again)
            if lost:
                await self.tier.drop(lost)
            released = (await self._io.call(self.table.release, self.name, sorted(staged))
                        if staged else {})
            if gained:
                found = await self._io.call(lambda: [self.store.feed(f) for f in gained])
                self.tier.gain([row for row in found if row is not None],
                               {f: rows[f].epoch for f in gained})
            if lost or gained or released:
                log.info("ownership_changed crawler=%s gained=%d lost=%d released=%d feeds=%d",
                         self.name, len(gained), len(lost), len(released), len(owned))
            return bool(released)
