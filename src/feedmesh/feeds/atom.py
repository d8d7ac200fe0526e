"""Atom 1.0 (RFC 4287) and Atom 0.3 (the 2003 draft: ``tagline``, ``issued``, ``modified``,
``mode="escaped|base64|xml"``).

Text constructs say what they hold: ``type="text"`` is plain text, ``html`` is escaped HTML,
``xhtml`` is inline XHTML inside one ``<div>`` that is not part of the content (Atom 0.3 spells
them as MIME types and adds a ``mode``). Titles become plain text; summaries and contents become
sanitized HTML, and plain text is escaped into HTML so the two fields always hold HTML.

Choices where the document offers several values:

* link: the first ``rel="alternate"`` link (a link without ``rel`` is an alternate); enclosures
  are ``rel="enclosure"`` links; ``self`` and ``hub`` links go to the feed's fields;
* published: ``published`` (1.0), else ``issued``, else ``created`` (0.3); updated: ``updated``
  (1.0), else ``modified`` (0.3);
* authors: the entry's own; else those of its ``source``; else the feed's (RFC 4287 4.2.1);
* an entry's language is the ``xml:lang`` in scope where its body (content, else summary) is.
"""

from __future__ import annotations

import base64
import binascii

from lxml import etree

from feedmesh.feeds.common import Context, EntryDraft
from feedmesh.feeds.urls import XML_LANG
from feedmesh.feeds.xmltext import XHTML, child_elements, inner_markup, make_keyer, text_of
from feedmesh.model import FeedInfo, Person

__all__ = ["read_atom"]

_KEYERS = {"atom": make_keyer("atom"), "atom03": make_keyer("atom03")}
_XHTML_DIV = "{" + XHTML + "}div"
_HTML_TYPES = ("html", "text/html")
_XHTML_TYPES = ("xhtml", "application/xhtml+xml")


def read_atom(root: etree._Element, ctx: Context,
              version: str) -> tuple[FeedInfo, list[EntryDraft]]:
    """Read an Atom feed; ``version`` is ``"1.0"`` or ``"0.3"``."""
    atom03 = version == "0.3"
    key_of = _KEYERS["atom03" if atom03 else "atom"]
    base = ctx.base_of(root, ctx.base)
    language = root.get(XML_LANG, "")
    fields: dict[str, object] = {"format": "atom0.3" if atom03 else "atom1.0"}
    if language:
        fields["language"] = ctx.text(language)[:35]
    authors: list[Person] = []
    hubs: list[str] = []
    entries: list[etree._Element] = []
    if key_of(root.tag) == "entry":  # an Atom entry document: one entry, no feed metadata
        fields["title"] = ""
        drafts = [_entry(root, ctx, key_of, base, language, atom03, [])]
        return FeedInfo(format=str(fields["format"]), language=language), drafts
    for child in root:
        key = key_of(child.tag)
        if not key:
            continue
        if key == "entry":
            entries.append(child)
        elif key == "title":
            fields["title"] = _title(child, ctx, key_of)
        elif key in ("subtitle", "tagline"):
            value, is_html = _text_construct(child, ctx, atom03)
            child_base = ctx.base_of(child, base)
            fields["description"] = (ctx.html(value, child_base) if is_html
                                     else ctx.plain_as_html(value))
        elif key == "link":
            rel, href = _link(child, ctx, base)
            if not href:
                continue
            if rel == "alternate" and "link" not in fields:
                fields["link"] = href
            elif rel == "self" and "self_link" not in fields:
                fields["self_link"] = href
            elif rel == "hub" and href not in hubs:
                hubs.append(href)
        elif key in ("updated", "modified"):
            if "updated" not in fields or key == "updated":
                fields["updated"] = ctx.date(text_of(child))
        elif key == "author":
            person = _person(child, ctx, key_of, base)
            if person is not None and person not in authors:
                authors.append(person)
        elif key in ("icon", "logo"):
            if key == "icon" or "icon" not in fields:
                fields["icon"] = ctx.url(text_of(child), ctx.base_of(child, base))
    if authors:
        fields["authors"] = tuple(authors)
    if hubs:
        fields["hub_links"] = tuple(hubs)
    limit = ctx.limits.max_entries
    if len(entries) > limit:
        ctx.problems.add("too_large", f"the document has {len(entries)} entries; kept the first "
                         f"{limit}")
        entries = entries[:limit]
    drafts = [_entry(entry, ctx, key_of, base, language, atom03, authors) for entry in entries]
    clean = {name: value for name, value in fields.items() if value is not None and value != ""}
    return FeedInfo(**clean), drafts


def _entry(entry: etree._Element, ctx: Context, key_of, feed_base: str, language: str,
           atom03: bool, feed_authors: list[Person]) -> EntryDraft:
    draft = EntryDraft()
    base = ctx.base_of(entry, feed_base)
    language = entry.get(XML_LANG) or language
    draft.language = language
    dates: dict[str, str] = {}
    source_authors: list[Person] = []
    summary_language = ""
    for child in entry:
        key = key_of(child.tag)
        if not key:
            continue
        if key == "id":
            if not draft.guid:
                draft.guid = ctx.text(text_of(child), "an id")
        elif key == "title":
            if not draft.title:
                draft.title = _title(child, ctx, key_of)
        elif key == "link":
            rel, href = _link(child, ctx, base)
            if not href:
                continue
            if rel == "alternate" and not draft.link:
                draft.link = href
            elif rel == "enclosure":
                draft.add_enclosure(ctx.enclosure(href, child.get("type", ""),
                                                  child.get("length", ""), base))
        elif key in ("summary", "content"):
            value, is_html = _text_construct(child, ctx, atom03)
            child_base = ctx.base_of(child, base)
            html = ctx.html(value, child_base) if is_html else ctx.plain_as_html(value)
            child_language = child.get(XML_LANG) or language
            if key == "content":
                if not draft.content:
                    draft.content = html
                    draft.language = child_language
            elif not draft.summary:
                draft.summary = html
                summary_language = child_language
        elif key in ("published", "issued", "created", "updated", "modified"):
            dates.setdefault(key, text_of(child))
        elif key == "author":
            draft.add_author(_person(child, ctx, key_of, base))
        elif key == "category":
            draft.add_category(child.get("term") or child.get("label") or text_of(child))
        elif key == "dc:subject":
            draft.add_category(text_of(child))
        elif key == "source":
            for source_child in child:
                if key_of(source_child.tag) == "author":
                    person = _person(source_child, ctx, key_of, base)
                    if person is not None:
                        source_authors.append(person)
    if not draft.content and summary_language:
        draft.language = summary_language
    for name in ("published", "issued", "created"):
        if name in dates:
            draft.published = ctx.date(dates[name])
            if draft.published is not None:
                break
    for name in ("updated", "modified"):
        if name in dates:
            draft.updated = ctx.date(dates[name])
            if draft.updated is not None:
                break
    if not draft.authors:
        draft.authors = list(source_authors or feed_authors)
    return draft


def _title(element: etree._Element, ctx: Context, key_of) -> str:
    value, is_html = _text_construct(element, ctx, key_of is _KEYERS["atom03"])
    return ctx.title(value, is_html)


def _text_construct(element: etree._Element, ctx: Context, atom03: bool) -> tuple[str, bool]:
    """(value, is_html) of an Atom text construct or content element."""
    kind = (element.get("type") or "text").strip().lower()
    if atom03:
        mode = (element.get("mode") or "xml").strip().lower()
        if mode == "base64":
            return _base64_text(text_of(element)), kind in _HTML_TYPES or kind in _XHTML_TYPES
        if mode == "escaped":
            return text_of(element), kind != "text/plain" and kind != "text"
    if kind in _XHTML_TYPES or (len(element) and kind not in ("text", "text/plain")
                                and kind not in _HTML_TYPES):
        children = child_elements(element)
        if len(children) == 1 and children[0].tag == _XHTML_DIV and not (element.text or "").strip():
            return inner_markup(children[0]), True
        return inner_markup(element), True
    if kind in _HTML_TYPES:
        return text_of(element), True
    if kind in ("text", "text/plain") or kind.startswith("text/"):
        return text_of(element), False
    if element.get("src") is not None:
        return "", False  # out-of-line content: nothing here to show
    if kind.endswith(("+xml", "/xml")):
        return text_of(element), False
    return "", False  # base64 of a binary media type: not something a reader shows inline


def _base64_text(value: str) -> str:
    try:
        return base64.b64decode(value.strip(), validate=False).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def _link(element: etree._Element, ctx: Context, base: str) -> tuple[str, str]:
    rel = (element.get("rel") or "alternate").strip()
    if rel.startswith("http://www.iana.org/assignments/relation/"):
        rel = rel.rsplit("/", 1)[1]
    href = ctx.url(element.get("href", ""), ctx.base_of(element, base))
    return rel, href


def _person(element: etree._Element, ctx: Context, key_of, base: str) -> Person | None:
    name = email = uri = ""
    person_base = ctx.base_of(element, base)
    for child in element:
        key = key_of(child.tag)
        if key == "name" and not name:
            name = ctx.text(" ".join(text_of(child).split()), "an author name")
        elif key == "email" and not email:
            email = ctx.text(text_of(child), "an email")
        elif key in ("uri", "url") and not uri:
            uri = ctx.url(text_of(child), ctx.base_of(child, person_base))
    if not (name or email or uri):
        return None
    return Person(name=name, email=email, uri=uri)
