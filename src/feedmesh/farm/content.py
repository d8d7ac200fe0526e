"""The words of a farm feed: its FeedInfo and one Entry per post, as the writers expect them.

Every entry is a pure function of (seed, feed, post): the same post renders the same way in every
version of the document and in every process. Article length follows the feed's
``words_median`` (set per feed by the catalog) times a log-normal factor per article.

Ids: a feed either uses its article links as guids (``permalink_guids``) or tag URIs
``tag:farm.feedmesh.invalid,2006:<seed>/<feed>/<post key>``; neither depends on the farm's port
for tag guids, and both are unique per post. Faults that touch content (dates, guids, floods)
are applied here so that the ground truth (``FarmModel.posts``) stays the plain posting process.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

from feedmesh.farm.catalog import ARTICLE_WORDS_SIGMA, FeedSpec
from feedmesh.farm.faults import Fault
from feedmesh.farm.posting import Post
from feedmesh.farm.rand import Draws, mix64
from feedmesh.farm.words import FIRST_NAMES, LAST_NAMES, vocabulary
from feedmesh.model import Enclosure, Entry, FeedInfo, Person

__all__ = ["TAG_PREFIX", "ContentMaker", "entry_guid"]

TAG_PREFIX = "tag:farm.feedmesh.invalid,2006:"
_SALT_ENTRY = 0xE7
_SALT_FEED = 0xFEED


def entry_guid(spec: FeedSpec, post: Post, base_url: str) -> str:
    """The guid a healthy feed gives ``post`` (what the ground truth reports)."""
    if spec.permalink_guids:
        return f"{base_url}/feeds/{spec.id}/posts/{post.key}"
    return f"{TAG_PREFIX}{spec.seed}/{spec.id}/{post.key}"


def _fancy(text: str) -> str:
    return text.replace("'", "\u2019")


class ContentMaker:
    """Builds the FeedInfo and Entries of one feed, served under ``base_url`` (``http://ip:port``)."""

    def __init__(self, spec: FeedSpec, base_url: str, future_offset_s: float = 0.0) -> None:
        self.spec = spec
        self.base_url = base_url
        self.future_offset = timedelta(seconds=future_offset_s)
        rng = random.Random(mix64(spec.seed, spec.id, _SALT_FEED))
        words = self.words = vocabulary()
        # Topic words: common enough to recur, rarer than function words.
        self.categories = tuple(words.vocabulary[200 + rng.randrange(5000)] for _ in range(6))
        self.people = tuple(
            Person(name=f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
                   email=(f"editor{spec.id}.{k}@example.org" if rng.random() < 0.3 else ""))
            for k in range(1 + rng.randrange(3)))
        self.description = words.sentence(rng.randrange(words.size), 8 + rng.randrange(16))
        self.site = f"{base_url}/sites/{spec.id}/"
        self.self_link = f"{base_url}/feeds/{spec.id}"
        self.feed_authors = self.people[:1] if rng.random() < 0.5 else ()
        self.entry_authors = rng.random() < 0.65  # many feeds never name an author
        self._entry_seed = mix64(spec.seed, spec.id, _SALT_ENTRY)

    def feed_info(self, updated_at: float | None) -> FeedInfo:
        spec = self.spec
        updated = None
        if updated_at is not None and spec.fault is not Fault.MISSING_DATES:
            updated = datetime.fromtimestamp(updated_at, UTC)
        ttl = spec.ttl_minutes
        period, frequency = "", None
        if ttl is not None and spec.format in ("rss1.0", "atom1.0"):
            period, frequency = (("hourly", max(1, 60 // ttl)) if ttl <= 60
                                 else ("daily", max(1, 1440 // ttl)))
            ttl = None
        skips = spec.skip_hours if spec.format.startswith("rss") else ()
        return FeedInfo(
            format=spec.format, title=f"\u201c{spec.title}\u201d" if spec.fancy else spec.title,
            link=self.site, description=self.description, language=spec.language,
            updated=updated, authors=self.feed_authors, self_link=self.self_link,
            ttl_minutes=ttl if spec.format in ("rss2.0", "json1.0", "json1.1") else None,
            skip_hours=skips, update_period=period, update_frequency=frequency)

    def entry(self, post: Post, nonce: int | None = None) -> Entry:
        """The entry of ``post``; ``nonce`` (a fetch counter) changes the guid, for
        changing_guids."""
        spec = self.spec
        # Two 64-bit draws carry every small choice (bit fields), one more per paragraph: an entry
        # is built by the hundred thousand, and each draw costs a Python-level hash.
        rng = Draws(self._entry_seed, post.block, post.index, post.burst)
        shape, picks = rng.bits(), rng.bits()
        words = self.words
        key = post.key
        link = f"{self.base_url}/feeds/{spec.id}/posts/{key}"
        u1 = ((shape >> 11) + 1) * (1.0 / (1 << 53))  # in (0, 1]
        u2 = (picks >> 40) * (1.0 / (1 << 24))
        normal = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
        body_words = max(3, round(spec.words_median * math.exp(ARTICLE_WORDS_SIGMA * normal)))
        if post.burst >= 0:
            body_words = min(body_words, 12)  # a flood's 10,000 entries are short notices
        title = words.title((picks & 0xFFFFFFFF) % words.size, 4 + (shape & 7))
        paragraphs = []
        left = body_words
        while left > 0:
            draw = rng.bits()
            size = min(left, 30 + (draw >> 58) % 50)
            if left - size < 8:
                size = left
            paragraphs.append(f"<p>{words.sentence((draw & 0xFFFFFFFF) % words.size, size)}</p>")
            left -= size
        summary = "".join(paragraphs)
        if (shape >> 3) & 0xFF < 10:  # ~4 % of titles
            title = "Q&A: " + title
        if spec.fancy:
            title, summary = _fancy(title), _fancy(summary).replace(". ", " \u2014 ", 1)
        guid = link if spec.permalink_guids else f"{TAG_PREFIX}{spec.seed}/{spec.id}/{key}"
        if spec.fault is Fault.DUPLICATE_GUIDS:
            guid = self.site
        elif nonce is not None:
            guid = f"{guid}#fetch-{nonce}"
        published = None
        if spec.fault is not Fault.MISSING_DATES:
            published = datetime.fromtimestamp(post.time, UTC)
            if spec.fault is Fault.FUTURE_DATES:
                published += self.future_offset
        pool = self.categories
        first = (picks >> 32) % len(pool)
        categories = tuple(pool[(first + k) % len(pool)] for k in range((shape >> 11) % 3))
        enclosures: tuple[Enclosure, ...] = ()
        if spec.podcast:
            enclosures = (Enclosure(url=f"{self.base_url}/media/{spec.id}/{key}.mp3",
                                    type="audio/mpeg",
                                    length=5_000_000 + (shape >> 20) % 60_000_000),)
        authors = (self.people[(shape >> 14) % len(self.people)],) if self.entry_authors else ()
        return Entry(key=guid, guid=guid, title=title, link=link, published=published,
                     authors=authors, summary=summary, categories=categories,
                     enclosures=enclosures)
