"""``feedmesh crawl``: every feed of an OPML list crawled into a store, cycle by cycle, without a
hub (no filters, no reflectors): the ingestion pipeline alone (:class:`~feedmesh.crawl.Crawler`).
"""

from __future__ import annotations

from collections.abc import Callable

from feedmesh.clock import SystemClock
from feedmesh.compose.engines import open_ingest_store
from feedmesh.compose.opml import BLOCKED_HINT, load_opml
from feedmesh.crawl import Crawler, CrawlSettings, CrawlStats
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.fetch.redact import redact_credentials

__all__ = ["CrawlList", "CrawlStats"]


class _Documents:
    """What the crawl tells of each document (:class:`~feedmesh.crawl.pipeline.CrawlEvents`):
    the problems of documents that parsed only in part, and the feeds whose document holds no
    entry, which a fetch's state does not record (the fetch itself went well)."""

    def __init__(self) -> None:
        self.problems: dict[int, tuple[str, str]] = {}
        self.empty: set[int] = set()

    async def ingested(self, entries: list) -> None:
        """Stored is all this crawl wants."""

    def feed_info(self, feed_id: int, info: object) -> None:
        """Nothing kept."""

    def document(self, feed_id: int, result: object, parsed: object) -> None:
        error, entries = parsed.error, parsed.entries  # type: ignore[attr-defined]
        if error is not None:
            self.problems[feed_id] = (f"parse:{error.kind}",
                                      f"{error.message} ({len(entries)} entries recovered)")
        else:
            self.problems.pop(feed_id, None)
        if entries:
            self.empty.discard(feed_id)
        else:
            self.empty.add(feed_id)

    def deactivated(self, feed_id: int) -> None:
        """Its state says so."""


class CrawlList:
    """The feeds of one list in the store at ``db``, crawled with ``fetch``'s manners
    (``async with``: the store and the fetcher open inside)."""

    def __init__(self, db: str, fetch: FetchSettings, *, concurrency: int) -> None:
        self.db = db
        self.fetch = fetch
        self.concurrency = concurrency
        self.ids: list[int] = []
        self.skipped: list[str] = []

    async def __aenter__(self) -> CrawlList:
        clock = SystemClock()
        self.store = open_ingest_store(self.db)
        try:
            self.fetcher = await Fetcher(self.fetch, clock=clock).__aenter__()
        except BaseException:
            self.store.close()
            raise
        self._documents = _Documents()
        self.crawler = Crawler(self.store, self.fetcher, clock,
                               settings=CrawlSettings(concurrency=self.concurrency),
                               events=self._documents)
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.crawler.aclose()
        finally:
            await self.fetcher.close()
            self.store.close()

    async def add(self, opml: str) -> list[int]:
        """The list's feeds added to the store (known ones keep their ids); their ids."""
        result = await load_opml(opml, self.fetch)
        self.skipped = list(result.skipped)
        self.ids = await self.crawler.add_feeds(o.url for o in result.outlines)
        return self.ids

    async def cycle(self, progress: Callable[[CrawlStats], None] | None = None,
                    stop: object = None) -> CrawlStats:
        """One cycle over the list's feeds (``stop``, an event: fetches not begun when it is
        set are not begun; what was fetched is committed)."""
        return await self.crawler.crawl(self.ids, progress=progress, stop=stop)

    def failures(self) -> list[dict[str, object]]:
        """Every feed whose last fetch failed, whose last document parsed only in part, or whose
        document holds no entry: its id, URL (without credentials), outcome and why. Every
        error the cycle counted has its feed here."""
        failed = []
        documents = self._documents
        for feed_id, state in sorted(self.crawler.states.items()):
            if state.last_error:
                outcome = state.last_outcome
                why = state.last_error + (BLOCKED_HINT if outcome == "blocked" else "")
            elif feed_id in documents.problems:
                outcome, why = documents.problems[feed_id]
            elif feed_id in documents.empty:
                outcome, why = "empty", "the document is a feed with no entries in it"
            else:
                continue
            failed.append({"id": feed_id, "url": redact_credentials(state.url),
                           "outcome": outcome, "error": why, "active": state.active})
        return failed
