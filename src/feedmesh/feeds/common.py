"""What every format module shares: the reading context, entry drafts and field helpers.

A format module (rss, rdf, atom, jsonfeed, loose) reads its document into a
:class:`~feedmesh.model.FeedInfo` and a list of :class:`EntryDraft`; :func:`finish_entries` then
turns drafts into frozen :class:`~feedmesh.model.Entry` records with their identity
(:mod:`feedmesh.feeds.identity`). Drafts are mutable on purpose: a format fills fields in
document order and keeps the first (or best) value it meets.

The helpers on :class:`Context` apply the per-field caps of :class:`ParseLimits` and the HTML and
URL rules, so no format module can forget them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from feedmesh.feeds.dates import parse_date
from feedmesh.feeds.identity import content_hash, entry_key, unique_keys
from feedmesh.feeds.limits import ParseLimits, Problems
from feedmesh.feeds.sanitize import html_to_text, looks_like_html, sanitize_html, text_to_html
from feedmesh.feeds.urls import XML_BASE, resolve_url, scoped_base
from feedmesh.model import Enclosure, Entry, Person

__all__ = ["Context", "EntryDraft", "add_media", "finish_entries", "parse_person", "positive_int",
           "skip_days", "skip_hours"]

_EMAIL = re.compile(r"[\w.+'-]+@[\w-]+(?:\.[\w-]+)+")
_DAYS = {day[:3].lower(): day for day in (
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")}


class Context:
    """The state one document is read with: its base URL, caps, and problems met so far."""

    __slots__ = ("base", "has_xml_base", "limits", "problems")

    def __init__(self, base: str, limits: ParseLimits, problems: Problems,
                 has_xml_base: bool = True) -> None:
        self.base = base
        self.limits = limits
        self.problems = problems
        self.has_xml_base = has_xml_base
        """False when the document never says "xml:base": format modules skip the lookups."""

    def base_of(self, element: object, parent_base: str) -> str:
        """The base in scope inside ``element`` (an lxml element)."""
        if not self.has_xml_base:
            return parent_base
        return scoped_base(element.get(XML_BASE), parent_base)  # type: ignore[attr-defined]

    def text(self, value: str, what: str = "a text field") -> str:
        """A short plain-text field (id, name, term): trimmed and capped."""
        value = value.strip()
        if len(value) > self.limits.max_text_chars:
            value = self.problems.cut(value, self.limits.max_text_chars, what)
        return value

    def title(self, value: str, is_html: bool | None = None) -> str:
        """A title as plain text. ``is_html=None`` means "guess" (RSS does not say)."""
        if len(value) > self.limits.max_text_chars:
            value = self.problems.cut(value, self.limits.max_text_chars, "a title")
        if is_html is None:
            is_html = looks_like_html(value)
        return html_to_text(value) if is_html else " ".join(value.split())

    def html(self, markup: str, base: str, what: str = "an HTML field") -> str:
        """An HTML field (summary, content), capped then sanitized, URLs made absolute."""
        if len(markup) > self.limits.max_html_chars:
            markup = self.problems.cut(markup, self.limits.max_html_chars, what)
        return sanitize_html(markup, base)

    def plain_as_html(self, value: str, what: str = "a text field") -> str:
        if len(value) > self.limits.max_html_chars:
            value = self.problems.cut(value, self.limits.max_html_chars, what)
        return text_to_html(value)

    def url(self, value: str, base: str | None = None) -> str:
        value = value.strip()
        if len(value) > self.limits.max_text_chars:
            value = self.problems.cut(value, self.limits.max_text_chars, "a URL")
        return resolve_url(self.base if base is None else base, value)

    def date(self, value: str) -> datetime | None:
        return parse_date(value)

    def enclosure(self, url: str, mime_type: str, length: str, base: str) -> Enclosure | None:
        absolute = self.url(url, base)
        if not absolute:
            return None
        return Enclosure(url=absolute, type=self.text(mime_type)[:200], length=_length(length))


class EntryDraft:
    """An entry being read; fields hold final values (plain-text title, sanitized HTML)."""

    __slots__ = ("authors", "categories", "content", "enclosures", "guid", "language", "link",
                 "published", "summary", "title", "updated")

    def __init__(self) -> None:
        self.guid = ""
        self.title = ""
        self.link = ""
        self.published: datetime | None = None
        self.updated: datetime | None = None
        self.authors: list[Person] = []
        self.summary = ""
        self.content = ""
        self.enclosures: list[Enclosure] = []
        self.categories: list[str] = []
        self.language = ""

    def add_enclosure(self, enclosure: Enclosure | None) -> None:
        if enclosure is not None and all(e.url != enclosure.url for e in self.enclosures):
            self.enclosures.append(enclosure)

    def add_author(self, person: Person | None) -> None:
        if person is not None and person not in self.authors:
            self.authors.append(person)

    def add_category(self, term: str) -> None:
        term = " ".join(term.split())
        if term and term not in self.categories and len(self.categories) < 64:
            self.categories.append(term[:200])


def add_media(draft: EntryDraft, element: Any, ctx: Context, base: str,
              key_of: Callable[[object], str]) -> None:
    """Media RSS: a ``media:content`` (with a ``url``) is an enclosure; a ``media:group`` holds
    several. ``media:player`` (an HTML embed page) and thumbnails are not attachments."""
    if key_of(element.tag) == "media:group":
        for child in element:
            if key_of(child.tag) == "media:content":
                add_media(draft, child, ctx, ctx.base_of(child, base), key_of)
        return
    draft.add_enclosure(ctx.enclosure(element.get("url", ""), element.get("type", ""),
                                      element.get("fileSize", ""), base))


def finish_entries(drafts: list[EntryDraft]) -> tuple[Entry, ...]:
    """Frozen entries with their key and content hash, keys unique within the document."""
    entries = []
    for draft in drafts:
        entries.append(Entry(
            key=entry_key(draft.guid, draft.link, draft.title, draft.content or draft.summary),
            content_hash=content_hash(draft.title, draft.link, draft.summary, draft.content),
            guid=draft.guid,
            title=draft.title,
            link=draft.link,
            published=draft.published,
            updated=draft.updated,
            authors=tuple(draft.authors),
            summary=draft.summary,
            content=draft.content,
            enclosures=tuple(draft.enclosures),
            categories=tuple(draft.categories),
            language=draft.language,
        ))
    return unique_keys(entries)


def parse_person(value: str, limit: int = 400) -> Person | None:
    """An author as RSS writes one: "name", "email", "email (name)", "name (email)",
    "name <email>"."""
    value = " ".join(value.split())[:limit]
    if not value:
        return None
    found = _EMAIL.search(value)
    if found is None:
        return Person(name=value)
    email = found.group(0)
    rest = (value[:found.start()] + value[found.end():]).strip()
    rest = rest.replace("mailto:", "").replace("()", "").replace("<>", "").strip()
    if rest.startswith("(") and rest.endswith(")"):
        rest = rest[1:-1].strip()
    return Person(name=rest.strip(" ,;-"), email=email)


def skip_hours(values: list[str]) -> tuple[int, ...]:
    """RSS ``skipHours``: 0-23 (24 is read as midnight, as some publishers write it)."""
    hours = set()
    for value in values:
        value = value.strip()
        if value.isascii() and value.isdigit() and len(value) <= 2 and int(value) <= 24:
            hours.add(int(value) % 24)
    return tuple(sorted(hours))


def skip_days(values: list[str]) -> tuple[str, ...]:
    days: list[str] = []
    for value in values:
        day = _DAYS.get(value.strip()[:3].lower())
        if day is not None and day not in days:
            days.append(day)
    return tuple(days)


def positive_int(value: str) -> int | None:
    value = value.strip()
    if value.isascii() and value.isdigit() and len(value) < 10:
        return int(value)
    return None


def _length(value: str) -> int | None:
    value = value.strip()
    if value.isascii() and value.isdigit() and len(value) < 19:
        return int(value)
    return None
