"""The farm's model: (config, feed, farm time) -> the document, its validators, and the truth.

:class:`FarmModel` is deterministic: ``document(feed_id, t)`` depends only on the config, the base
URLs and ``t``. It keeps each feed's latest document until the feed's content next changes (a new
post, or an old one leaving the look-back window), so serving a request is a dictionary lookup
and a comparison; documents are rendered only when content changed. The cache is bounded by
``config.cache_mb``; past it, random documents are dropped (random, not LRU: a crawler sweeping
100k feeds in a loop would make LRU miss every time) and re-rendered when asked for again.

Validators encode the version: the ETag names the newest post (``"<seed>-<feed>-<post key>"``),
so an ``If-None-Match`` from an older version tells exactly which entries are newer, and an RFC
3229 delta (:meth:`FarmModel.delta`) is a render of just those. Last-Modified is the newest post's
second.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from email.utils import formatdate

import brotli

from feedmesh.farm.catalog import FeedCatalog, FeedSpec
from feedmesh.farm.config import FarmConfig
from feedmesh.farm.content import ContentMaker, entry_guid
from feedmesh.farm.faults import Fault
from feedmesh.farm.posting import PROFILES, Post, PostingProcess
from feedmesh.feeds.render import CONTENT_TYPES, writer_for

__all__ = ["FarmModel", "FeedDocument", "compress", "http_date", "parse_etag_version"]

_XML_CONTENT_TYPES = ("application/xml; charset=utf-8", "text/xml; charset=utf-8")


def http_date(t: float) -> str:
    return formatdate(t, usegmt=True)


def parse_etag_version(etag: str, seed: int, feed_id: int) -> tuple[int, int, int] | None:
    """The post order encoded in one of this farm's ETags for ``feed_id`` (None if not ours)."""
    tag = etag.strip()
    if tag.startswith("W/"):
        tag = tag[2:]
    tag = tag.strip('"')
    prefix = f"{seed}-{feed_id}-"
    if not tag.startswith(prefix):
        return None
    parts = tag[len(prefix):].split(".")
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        return None
    if len(numbers) == 2:
        return (numbers[0], numbers[1], -1)
    if len(numbers) == 3:
        return (numbers[0], numbers[1], numbers[2])
    return None


class FeedDocument:
    """One version of a feed's document, with its validators and lazily compressed bodies."""

    __slots__ = (
        "_encoded",
        "body",
        "content_type",
        "etag",
        "feed_id",
        "last_modified",
        "nbytes",
        "newest",
        "oldest",
        "posts",
        "valid_from",
        "valid_until",
    )

    def __init__(self, feed_id: int, body: bytes, content_type: str, posts: list[Post],
                 etag: str, last_modified: str, valid_from: float, valid_until: float) -> None:
        self.feed_id = feed_id
        self.body = body
        self.content_type = content_type
        self.posts = posts
        """The posts listed, newest first."""
        self.newest = posts[0].order if posts else None
        self.oldest = posts[-1].order if posts else None
        self.etag = etag
        self.last_modified = last_modified
        self.valid_from = valid_from
        self.valid_until = valid_until
        self._encoded: dict[str, bytes] = {}
        # Body, plus what the object, its validators and its list of posts (tuples) take.
        self.nbytes = len(body) + 400 + 120 * len(posts)

    def encoded(self, coding: str) -> bytes:
        """The body in ``identity``, ``gzip`` or ``br`` (compressed once, then kept)."""
        if coding == "identity":
            return self.body
        data = self._encoded.get(coding)
        if data is None:
            data = self._encoded[coding] = compress(self.body, coding)
            self.nbytes += len(data)
        return data


def compress(body: bytes, coding: str) -> bytes:
    if coding == "gzip":
        # Level 4 and quality 3: within 2 % of the default levels' size, 2.5x faster (measured).
        packer = zlib.compressobj(4, zlib.DEFLATED, 31)  # gzip framing, mtime 0: reproducible
        return packer.compress(body) + packer.flush()
    if coding == "br":
        return brotli.compress(body, quality=3)
    raise ValueError(f"unknown content coding {coding!r}")


class FarmModel:
    """Pure model of a farm. ``base_urls[h]`` is how host ``h`` is reached (``http://ip:port``)."""

    def __init__(self, config: FarmConfig, base_urls: Sequence[str]) -> None:
        if len(base_urls) != config.hosts:
            raise ValueError(f"need {config.hosts} base URLs, got {len(base_urls)}")
        self.config = config
        self.base_urls = tuple(u.rstrip("/") for u in base_urls)
        self.catalog = FeedCatalog(config)
        self.lookback_s = config.lookback_days * 86400.0
        self._processes: dict[int, PostingProcess] = {}
        self._makers: dict[int, ContentMaker] = {}
        self._docs: dict[int, FeedDocument] = {}
        self._doc_ids: list[int] = []
        self._doc_slot: dict[int, int] = {}
        self._cache_bytes = 0
        self._budget = int(config.cache_mb * 1024 * 1024)
        self._evict_rng = random.Random(config.seed)
        self.renders = 0

    # -- what a feed is -------------------------------------------------------------------------

    def spec(self, feed_id: int) -> FeedSpec:
        return self.catalog.spec(feed_id)

    def base_url(self, feed_id: int) -> str:
        return self.base_urls[feed_id % self.config.hosts]

    def feed_url(self, feed_id: int) -> str:
        return f"{self.base_url(feed_id)}/feeds/{feed_id}"

    def process(self, feed_id: int) -> PostingProcess:
        proc = self._processes.get(feed_id)
        if proc is None:
            spec = self.spec(feed_id)
            burst = self.config.flood_entries if spec.fault is Fault.FLOOD else 1
            proc = PostingProcess(self.config.seed, feed_id, spec.rate_per_day,
                                  PROFILES[spec.profile], burst)
            if len(self._processes) > 20_000:
                self._processes.clear()
            self._processes[feed_id] = proc
        return proc

    def maker(self, feed_id: int) -> ContentMaker:
        maker = self._makers.get(feed_id)
        if maker is None:
            if len(self._makers) > 20_000:
                self._makers.clear()
            maker = self._makers[feed_id] = ContentMaker(
                self.spec(feed_id), self.base_url(feed_id), self.config.future_offset_s)
        return maker

    # -- ground truth ---------------------------------------------------------------------------

    def posts(self, feed_id: int, start: float, end: float) -> list[Post]:
        """Every post of the feed with ``start < time <= end``, oldest first (the ground truth)."""
        return self.process(feed_id).posts_between(start, end)

    def post(self, feed_id: int, key: str, t: float) -> Post | None:
        """The post named ``key`` (``block.index[.burst]``) if it was posted by farm time ``t``
        (its article page answers; a later or unknown one does not exist yet)."""
        parts = key.split(".")
        if not 2 <= len(parts) <= 3 or not all(p.isdigit() and len(p) < 12 for p in parts):
            return None
        block, index, *burst = (int(p) for p in parts)
        want = (block, index, burst[0] if burst else -1)
        for post in self.process(feed_id).block_posts(block):
            if post.order == want:
                return post if post.time <= t else None
        return None

    def guid(self, feed_id: int, post: Post) -> str:
        """The guid the healthy version of this feed gives ``post``."""
        return entry_guid(self.spec(feed_id), post, self.base_url(feed_id))

    # -- documents ------------------------------------------------------------------------------

    def document(self, feed_id: int, t: float) -> FeedDocument:
        """The document of the feed at farm time ``t`` (cached until its content changes)."""
        doc = self.cached(feed_id, t)
        if doc is None:
            doc = self.render(feed_id, t)
            self.remember(doc)
        return doc

    def cached(self, feed_id: int, t: float) -> FeedDocument | None:
        """The kept document if it is still the one for time ``t``, else None."""
        doc = self._docs.get(feed_id)
        if doc is not None and doc.valid_from <= t < doc.valid_until:
            return doc
        return None

    def remember(self, doc: FeedDocument) -> None:
        """Keep ``doc`` (rendered with :meth:`render`, possibly in another thread) as current."""
        self._remember(doc.feed_id, doc)

    def window(self, feed_id: int, t: float) -> tuple[list[Post], float]:
        """The posts a document at ``t`` lists (newest first) and when that list next changes."""
        spec = self.spec(feed_id)
        proc = self.process(feed_id)
        posts = proc.last_posts(t, spec.entries_cap, t - self.lookback_s)
        until = proc.next_post_after(t, max(proc.block_s * 2.0, 86400.0))
        if posts:
            until = min(until, posts[-1].time + self.lookback_s)
        return posts, until

    def render(self, feed_id: int, t: float, nonce: int | None = None) -> FeedDocument:
        """Render the document at ``t`` afresh (``nonce``: a fetch counter for changing guids).

        Touches no shared state but memo dictionaries, so it may run in a worker thread (the
        server renders 10,000-entry flood documents there to keep answering other feeds).
        """
        spec = self.spec(feed_id)
        posts, until = self.window(feed_id, t)
        body = self._render_posts(spec, posts, posts[0].time if posts else None, nonce)
        self.renders += 1
        newest = posts[0] if posts else None
        etag = f'"{self.config.seed}-{feed_id}-{newest.key if newest else "0"}"'
        last_modified = http_date(newest.time) if newest else ""
        return FeedDocument(feed_id, body, self.content_type(spec), posts, etag, last_modified,
                            t, float(until))

    def delta(self, doc: FeedDocument, since: tuple[int, int, int]) -> bytes | None:
        """RFC 3229 ``feed`` delta: the document with only the entries newer than version ``since``.

        None when ``since`` is older than the oldest listed entry (the delta could not be complete,
        so the caller should send the whole document) or not older than the current version.
        """
        if doc.newest is None or doc.oldest is None or not (doc.oldest <= since < doc.newest):
            return None
        newer = [p for p in doc.posts if p.order > since]
        spec = self.spec(doc.feed_id)
        return self._render_posts(spec, newer, doc.posts[0].time, None)

    def content_type(self, spec: FeedSpec) -> str:
        if spec.fault is Fault.UTF16:
            return CONTENT_TYPES[spec.format].split(";")[0]
        if spec.format.startswith(("rss", "atom")) and spec.id % 5 == 0:
            return _XML_CONTENT_TYPES[spec.id % 2]  # many real feeds say only "XML"
        return CONTENT_TYPES[spec.format]

    def _render_posts(self, spec: FeedSpec, posts: list[Post], updated_at: float | None,
                      nonce: int | None) -> bytes:
        maker = self.maker(spec.id)
        writer = writer_for(spec.format)
        feed = maker.feed_info(updated_at)
        entries = [maker.entry(p, nonce) for p in posts]
        text = writer.render(feed, entries)
        return apply_content_fault(spec.fault, spec.format, text)

    def _remember(self, feed_id: int, doc: FeedDocument) -> None:
        old = self._docs.get(feed_id)
        if old is not None:
            self._cache_bytes -= old.nbytes
        else:
            self._doc_slot[feed_id] = len(self._doc_ids)
            self._doc_ids.append(feed_id)
        self._docs[feed_id] = doc
        self._cache_bytes += doc.nbytes
        while self._cache_bytes > self._budget and len(self._doc_ids) > 1:
            self._forget(self._doc_ids[self._evict_rng.randrange(len(self._doc_ids))])

    def _forget(self, feed_id: int) -> None:
        slot = self._doc_slot.pop(feed_id)
        last = self._doc_ids.pop()
        if last != feed_id:
            self._doc_ids[slot] = last
            self._doc_slot[last] = slot
        self._cache_bytes -= self._docs.pop(feed_id).nbytes

    def body(self, doc: FeedDocument, coding: str) -> bytes:
        """``doc``'s body in a content coding, counting a newly kept variant against the budget."""
        before = doc.nbytes
        data = doc.encoded(coding)
        if doc.nbytes != before and self._docs.get(doc.feed_id) is doc:
            self._cache_bytes += doc.nbytes - before
        return data

    def cache_stats(self) -> dict[str, int]:
        return {"documents": len(self._docs), "bytes": self._cache_bytes, "renders": self.renders}


def apply_content_fault(fault: Fault, fmt: str, text: str) -> bytes:
    """Encode a rendered document, breaking it as the feed's content fault says."""
    if fault is Fault.MALFORMED:
        if fmt.startswith("json"):
            return text[: text.rfind("]")].encode()  # cut before the closing of items
        text = text.replace("</title>", " & more</title>", 2)
        closing = text.rfind("</")
        return text[:closing].rstrip().encode()  # the root element is never closed
    if fault is Fault.WRONG_CHARSET:
        return text.encode("cp1252", errors="replace")  # still declared utf-8
    if fault is Fault.UTF16:
        if not fmt.startswith("json"):
            text = text.replace('encoding="utf-8"', 'encoding="UTF-16"', 1)
        return b"\xff\xfe" + text.encode("utf-16-le")
    return text.encode("utf-8")
