"""The last resort for broken XML: feedparser's loose (SGML) parser, mapped onto our model.

libxml2's recovering parser keeps every element it can close, which is most of a broken feed,
but it gives up on some damage (an unclosed ``<item>`` early on swallows the rest). feedparser's
loose parser reads tag soup item by item. It is ~6x slower than our own reader, so the front door
calls it only when recovery lost entries (fewer than the document's ``<item>``/``<entry>`` tags),
only for documents up to :data:`LOOSE_MAX_BYTES`, and never for a document that declares entities
(feedparser's strict pass uses expat, which would expand them).

feedparser is asked not to sanitize (nh3 does, as for every other path) but to resolve relative
URLs, and is given our decoded UTF-8 so it does not second-guess the encoding.
"""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime
from typing import Any

import feedparser

from feedmesh.feeds.common import Context, EntryDraft, parse_person
from feedmesh.model import FeedInfo, Person

__all__ = ["LOOSE_MAX_BYTES", "read_loose"]

LOOSE_MAX_BYTES = 2 * 1024 * 1024
_FORMATS = {
    "rss090": "rss0.90", "rss091u": "rss0.91", "rss091n": "rss0.91", "rss092": "rss0.92",
    "rss093": "rss0.92", "rss094": "rss0.92", "rss20": "rss2.0", "rss": "rss2.0",
    "rss10": "rss1.0", "atom03": "atom0.3", "atom10": "atom1.0", "atom": "atom1.0",
}


def read_loose(utf8: bytes, ctx: Context) -> tuple[FeedInfo, list[EntryDraft]] | None:
    """Read ``utf8`` with feedparser; ``None`` when it does not recognize a feed either."""
    headers = {"content-type": "application/xml; charset=utf-8"}
    if ctx.base:
        headers["content-location"] = ctx.base
    try:
        result = feedparser.parse(io.BytesIO(utf8), response_headers=headers,
                                  sanitize_html=False, resolve_relative_uris=True)
    except Exception:  # noqa: BLE001 - feedparser is a fallback: its failure is not ours
        return None
    feed_format = _FORMATS.get(result.get("version") or "")
    if feed_format is None:
        return None
    try:
        return _convert(result, feed_format, ctx)
    except (AttributeError, TypeError, ValueError):  # feedparser's loose shapes vary; give up
        return None


def _convert(result: Any, feed_format: str, ctx: Context) -> tuple[FeedInfo, list[EntryDraft]]:
    feed = result.get("feed") or {}
    fields: dict[str, object] = {"format": feed_format}
    fields["title"] = _title(feed, ctx)
    fields["link"] = ctx.url(_str(feed.get("link")))
    subtitle = feed.get("subtitle_detail") or {}
    if subtitle.get("value"):
        fields["description"] = _html(subtitle, ctx)
    fields["language"] = ctx.text(_str(feed.get("language")))[:35]
    # dict.get: feedparser's own .get() would quietly answer "published" for "updated"
    fields["updated"] = _time(dict.get(feed, "updated_parsed"))
    authors = _people(feed)
    if authors:
        fields["authors"] = tuple(authors)
    for link in feed.get("links") or []:
        if link.get("rel") == "self" and "self_link" not in fields:
            fields["self_link"] = ctx.url(_str(link.get("href")))
    entries = list(result.get("entries") or [])
    if len(entries) > ctx.limits.max_entries:
        ctx.problems.add("too_large", f"the document has {len(entries)} entries; kept the first "
                         f"{ctx.limits.max_entries}")
        entries = entries[:ctx.limits.max_entries]
    drafts = [_entry(entry, ctx, str(fields["language"])) for entry in entries]
    clean = {name: value for name, value in fields.items() if value is not None and value != ""}
    return FeedInfo(**clean), drafts


def _entry(entry: Any, ctx: Context, language: str) -> EntryDraft:
    draft = EntryDraft()
    draft.guid = ctx.text(_str(entry.get("id")), "an id")
    draft.title = _title(entry, ctx)
    draft.link = ctx.url(_str(entry.get("link")))
    summary = entry.get("summary_detail") or {}
    if summary.get("value"):
        draft.summary = _html(summary, ctx)
    contents = entry.get("content") or []
    if contents and contents[0].get("value"):
        draft.content = _html(contents[0], ctx)
    if draft.content == draft.summary and "content" in entry:
        draft.summary = ""  # feedparser copies content into summary; keep each where it was
    draft.published = _time(dict.get(entry, "published_parsed"))
    draft.updated = _time(dict.get(entry, "updated_parsed"))
    draft.authors = _people(entry)
    for tag in entry.get("tags") or []:
        draft.add_category(_str(tag.get("term")) or _str(tag.get("label")))
    for enclosure in entry.get("enclosures") or []:
        draft.add_enclosure(ctx.enclosure(_str(enclosure.get("href")), _str(enclosure.get("type")),
                                          _str(enclosure.get("length")), ctx.base))
    draft.language = language
    return draft


def _str(value: object) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _title(holder: Any, ctx: Context) -> str:
    detail = holder.get("title_detail") or {}
    value = _str(detail.get("value")) or _str(holder.get("title"))
    return ctx.title(value, detail.get("type", "text/html") != "text/plain")


def _html(detail: Any, ctx: Context) -> str:
    value = _str(detail.get("value"))
    if detail.get("type") == "text/plain":
        return ctx.plain_as_html(value)
    return ctx.html(value, _str(detail.get("base")) or ctx.base)


def _people(holder: Any) -> list[Person]:
    people: list[Person] = []
    for author in holder.get("authors") or []:
        person = Person(name=_str(author.get("name")), email=_str(author.get("email")),
                        uri=_str(author.get("href")))
        if (person.name or person.email) and person not in people:
            people.append(person)
    if not people and holder.get("author"):
        person = parse_person(_str(holder["author"]))
        if person is not None:
            people.append(person)
    return people


def _time(value: time.struct_time | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime(*value[:6], tzinfo=UTC)
    except (TypeError, ValueError):
        return None

