"""RSS 0.91, 0.92 and 2.0 (``<rss><channel><item>``), and the channel/item readers RDF reuses.

Only direct children of ``channel`` and ``item`` count (an ``<image><title>`` is not the channel
title). The first value of a field wins, except where a better source is known to exist:

* title: ``title``, else ``dc:title``;  link: ``link``, else ``atom:link rel=alternate``, else a
  ``guid`` that is a permalink URL (``isPermaLink`` absent or true);
* summary: ``description`` (else ``dc:description``, ``itunes:summary``);  content:
  ``content:encoded``, else ``xhtml:body``. Both are HTML in practice, escaped or naked;
* published: ``pubDate``, else ``dc:date``, ``dcterms:issued``, ``dcterms:created``;
  updated: ``dcterms:modified``, else ``atom:updated``;
* authors: ``author``, ``dc:creator``, ``itunes:author`` (all of them, deduplicated);
* categories: ``category``, ``dc:subject``;  enclosures: ``enclosure`` and ``media:content``
  (also inside ``media:group``);
* feed ``updated``: ``lastBuildDate``, else ``dc:date``/``dcterms:modified``, else ``pubDate``.

Titles in RSS may or may not be HTML (the spec never said); :meth:`Context.title` guesses from
the presence of tags or entities, as feedparser does.
"""

from __future__ import annotations

from collections.abc import Callable

from lxml import etree

from feedmesh.feeds.common import (
    Context,
    EntryDraft,
    add_media,
    parse_person,
    positive_int,
    skip_days,
    skip_hours,
)
from feedmesh.feeds.subscribe import read_xml_subscribe
from feedmesh.feeds.xmltext import (
    NAMESPACES,
    inner_markup,
    language_of,
    make_keyer,
    namespace_of,
    text_of,
)
from feedmesh.model import FeedInfo, Person

__all__ = ["keyer_for", "read_channel", "read_item", "read_items", "read_rss", "rss_format"]

key_of = make_keyer("rss")
_ITEM = "item"
_CONTENT_KEYS = ("content:encoded", "xhtml:body", "body", "fullitem")


def keyer_for(root: etree._Element) -> Callable[[object], str]:
    """The shared keyer, or one that also reads the root's own unknown namespace as RSS."""
    namespace = namespace_of(root.tag)
    if not namespace or namespace in NAMESPACES:
        return key_of
    return make_keyer("rss", namespace)


def rss_format(version: str) -> str:
    version = version.strip()
    if version.startswith("0.91"):
        return "rss0.91"
    if version.startswith(("0.92", "0.93", "0.94")):
        return "rss0.92"
    if version in ("0.9", "0.90"):
        return "rss0.90"
    return "rss2.0"


def read_rss(root: etree._Element, ctx: Context) -> tuple[FeedInfo, list[EntryDraft]]:
    """Read an ``<rss>`` document (items under ``channel``, or stray ones under ``rss``)."""
    key_of = keyer_for(root)
    base = ctx.base_of(root, ctx.base)
    channel = None
    for child in root:
        if key_of(child.tag) == "channel":
            channel = child
            break
    if channel is None:
        channel = root
    channel_base = ctx.base_of(channel, base)
    language = language_of(channel, language_of(root, ""))
    fields = read_channel(channel, ctx, channel_base, key_of)
    language = str(fields.get("language") or language)
    items = [child for child in channel if key_of(child.tag) == _ITEM]
    if channel is not root:
        items.extend(child for child in root if key_of(child.tag) == _ITEM)
    drafts = read_items(items, ctx, channel_base, language, key_of)
    fields["format"] = rss_format(root.get("version", ""))
    return FeedInfo(**fields), drafts


def read_items(items: list[etree._Element], ctx: Context, base: str, language: str,
               key_of: Callable[[object], str] = key_of) -> list[EntryDraft]:
    limit = ctx.limits.max_entries
    if len(items) > limit:
        ctx.problems.add("too_large", f"the document has {len(items)} items; kept the first "
                         f"{limit}")
        items = items[:limit]
    return [read_item(item, ctx, base, language, key_of) for item in items]


def read_channel(channel: etree._Element, ctx: Context, base: str,
                 key_of: Callable[[object], str] = key_of) -> dict[str, object]:
    """Feed-level fields of an RSS or RDF channel, as ``FeedInfo`` keyword arguments."""
    fields: dict[str, object] = {}
    authors: list[Person] = []
    hubs: list[str] = []
    dates: dict[str, str] = {}
    for child in channel:
        key = key_of(child.tag)
        if not key or key == _ITEM:
            continue
        if key == "title" or (key == "dc:title" and "title" not in fields):
            fields["title"] = ctx.title(text_of(child))
        elif key == "link":
            if not fields.get("link"):
                fields["link"] = ctx.url(text_of(child), ctx.base_of(child, base))
        elif key == "atom:link":
            rel = child.get("rel", "alternate")
            href = ctx.url(child.get("href", ""), ctx.base_of(child, base))
            if not href:
                continue
            if rel == "self" and "self_link" not in fields:
                fields["self_link"] = href
            elif rel == "hub" and href not in hubs:
                hubs.append(href)
            elif rel == "alternate" and "alternate" not in fields:
                fields["alternate"] = href
        elif key in ("description", "dc:description", "itunes:summary", "itunes:subtitle"):
            if "description" not in fields:
                fields["description"] = _html_of(child, ctx, ctx.base_of(child, base))
        elif key in ("language", "dc:language"):
            fields.setdefault("language", ctx.text(text_of(child)).replace("_", "-")[:35])
        elif key in ("lastBuildDate", "pubDate", "dc:date", "dcterms:modified"):
            dates.setdefault(key, text_of(child))
        elif key in ("managingEditor", "dc:creator", "dc:author", "itunes:author", "author"):
            person = parse_person(text_of(child))
            if person is not None and person not in authors:
                authors.append(person)
        elif key == "ttl":
            fields["ttl_minutes"] = positive_int(text_of(child))
        elif key == "skipHours":
            hours = [text_of(hour) for hour in child if key_of(hour.tag) == "hour"]
            fields["skip_hours"] = skip_hours(hours)
        elif key == "skipDays":
            fields["skip_days"] = skip_days([text_of(d) for d in child if key_of(d.tag) == "day"])
        elif key == "sy:updatePeriod":
            period = text_of(child).strip().lower()
            if period in ("hourly", "daily", "weekly", "monthly", "yearly"):
                fields["update_period"] = period
        elif key == "sy:updateFrequency":
            fields["update_frequency"] = positive_int(text_of(child))
        elif key == "sy:updateBase":
            fields["update_base"] = ctx.date(text_of(child))
        elif key == "image":
            url = next((text_of(c) for c in child if key_of(c.tag) == "url"), "")
            if url and "icon" not in fields:
                fields["icon"] = ctx.url(url, ctx.base_of(child, base))
        elif key == "fm:subscribe" and "subscribe" not in fields:
            fields["subscribe"] = read_xml_subscribe(child, key_of, ctx.problems.warn)
        elif key == "itunes:image" and "icon" not in fields:
            fields["icon"] = ctx.url(child.get("href", "") or text_of(child), base)
    alternate = fields.pop("alternate", "")
    if not fields.get("link") and alternate:
        fields["link"] = alternate
    for name in ("lastBuildDate", "dc:date", "dcterms:modified", "pubDate"):
        if name in dates:
            updated = ctx.date(dates[name])
            if updated is not None:
                fields["updated"] = updated
                break
    if authors:
        fields["authors"] = tuple(authors)
    if hubs:
        fields["hub_links"] = tuple(hubs)
    return {name: value for name, value in fields.items() if value is not None and value != ""}


def read_item(item: etree._Element, ctx: Context, base: str, language: str,
              key_of: Callable[[object], str] = key_of) -> EntryDraft:
    """One ``<item>`` of RSS 0.9x/1.0/2.0."""
    draft = EntryDraft()
    base = ctx.base_of(item, base)
    draft.language = language_of(item, language)
    summary_source: tuple[etree._Element, str] | None = None
    summary_fallback: tuple[etree._Element, str] | None = None
    content_source: tuple[etree._Element, str] | None = None
    permalink_guid = ""
    alternate = fallback_title = ""
    dates: dict[str, str] = {}
    for child in item:
        key = key_of(child.tag)
        if not key:
            continue
        if key == "title":
            if not draft.title:
                draft.title = ctx.title(text_of(child))
        elif key == "link":
            if not draft.link:
                draft.link = ctx.url(text_of(child), ctx.base_of(child, base))
        elif key == "guid":
            if not draft.guid:
                draft.guid = ctx.text(text_of(child), "a guid")
                if child.get("isPermaLink", "true").strip().lower() != "false":
                    permalink_guid = draft.guid
        elif key == "description":
            summary_source = (child, ctx.base_of(child, base))
        elif key in ("dc:description", "itunes:summary"):
            if summary_fallback is None:
                summary_fallback = (child, ctx.base_of(child, base))
        elif key in _CONTENT_KEYS:
            if content_source is None:
                content_source = (child, ctx.base_of(child, base))
                draft.language = language_of(child, draft.language)
        elif key in ("pubDate", "dc:date", "dcterms:issued", "dcterms:created",
                     "dcterms:modified", "atom:updated"):
            dates.setdefault(key, text_of(child))
        elif key in ("author", "dc:creator", "dc:author", "itunes:author"):
            draft.add_author(parse_person(text_of(child)))
        elif key in ("category", "dc:subject", "media:category"):
            draft.add_category(text_of(child))
        elif key == "itunes:category":
            _add_itunes_categories(draft, child, key_of)
        elif key == "enclosure":
            draft.add_enclosure(ctx.enclosure(child.get("url", ""), child.get("type", ""),
                                              child.get("length", ""), ctx.base_of(child, base)))
        elif key == "media:content" or key == "media:group":
            add_media(draft, child, ctx, ctx.base_of(child, base), key_of)
        elif key in ("dc:title", "media:title") and not fallback_title:
            fallback_title = text_of(child)
        elif (key == "atom:link" and not alternate
              and child.get("rel", "alternate") == "alternate"):
            alternate = ctx.url(child.get("href", ""), ctx.base_of(child, base))
    if not draft.title and fallback_title:
        draft.title = ctx.title(fallback_title)
    summary_source = summary_source or summary_fallback
    if summary_source is not None:
        draft.summary = _html_of(summary_source[0], ctx, summary_source[1])
    if content_source is not None:
        draft.content = _html_of(content_source[0], ctx, content_source[1])
    if not draft.link:
        draft.link = alternate or (ctx.url(permalink_guid, base) if _is_url(permalink_guid) else "")
    for name in ("pubDate", "dc:date", "dcterms:issued", "dcterms:created"):
        if name in dates:
            draft.published = ctx.date(dates[name])
            if draft.published is not None:
                break
    for name in ("dcterms:modified", "atom:updated"):
        if name in dates:
            draft.updated = ctx.date(dates[name])
            if draft.updated is not None:
                break
    return draft


def _html_of(element: etree._Element, ctx: Context, base: str) -> str:
    """An RSS HTML field: escaped HTML as text, or naked markup as child elements."""
    markup = inner_markup(element) if len(element) else (element.text or "")
    return ctx.html(markup, base, "a summary or content")


def _add_itunes_categories(draft: EntryDraft, element: etree._Element,
                           key_of: Callable[[object], str]) -> None:
    draft.add_category(element.get("text", ""))
    for child in element:
        if key_of(child.tag) == "itunes:category":
            _add_itunes_categories(draft, child, key_of)


def _is_url(value: str) -> bool:
    return value.startswith(("http://", "https://"))
