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

from feedmesh.feeds.common import Context, EntryDraft, add_media
from feedmesh.feeds.subscribe import read_xml_subscribe
from feedmesh.feeds.xmltext import (
    NAMESPACES,
    XHTML,
    child_elements,
    inner_markup,
    language_of,
    make_keyer,
    namespace_of,
    text_of,
)
from feedmesh.model import FeedInfo, Person

__all__ = ["read_atom"]

_KEYERS = {"atom": make_keyer("atom"), "atom03": make_keyer("atom03")}
_XHTML_DIV = "{" + XHTML + "}div"
_HTML_TYPES = ("html", "text/html")
_XHTML_TYPES = ("xhtml", "application/xhtml+xml")


def read_atom(root: etree._Element, ctx: Context,
              version: str) -> tuple[FeedInfo, list[EntryDraft]]:
    """Read an Atom feed; ``version`` is ``"1.0"`` or ``"0.3"`` (and the drafts before 0.3)."""
    atom03 = version == "0.3"
    namespace = namespace_of(root.tag)
    if namespace and namespace not in NAMESPACES:  # Echo, Necho, Pie: the drafts before Atom 0.3
        key_of = make_keyer("atom03", namespace)
    else:
        key_of = _KEYERS["atom03" if atom03 else "atom"]
    base = ctx.base_of(root, ctx.base)
    language = language_of(root, "")
    fields: dict[str, object] = {"format": "atom0.3" if atom03 else "atom1.0"}
    if language:
        fields["language"] = language
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
            fields["updated"] = ctx.date(text_of(child)) or fields.get("updated")
        elif key == "author":
            person = _person(child, ctx, key_of, base)
            if person is not None and person not in authors:
                authors.append(person)
        elif key == "fm:subscribe" and "subscribe" not in fields:
            fields["subscribe"] = read_xml_subscribe(child, key_of, ctx.problems.warn)
        elif key in ("icon", "logo") and (key == "icon" or "icon" not in fields):
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
    language = language_of(entry, language)
    draft.language = language
    dates: dict[str, str] = {}
    source_authors: list[Person] = []
    summary_language: str | None = None
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
            child_language = language_of(child, language)
            if key == "content":
                if not draft.content:
                    draft.content = html
                    draft.language = child_language
            elif not draft.summary:
                draft.summary = html
                summary_language = child_language
        elif key in ("published", "issued", "created", "updated", "modified"):
            dates[key] = text_of(child)  # the last of repeated values, as feedparser does
        elif key == "author":
            draft.add_author(_person(child, ctx, key_of, base))
        elif key == "category":
            draft.add_category(child.get("term") or child.get("label") or text_of(child))
        elif key == "dc:subject":
            draft.add_category(text_of(child))
        elif key == "media:content" or key == "media:group":
            add_media(draft, child, ctx, ctx.base_of(child, base), key_of)
        elif key == "source":
            for source_child in child:
                if key_of(source_child.tag) == "author":
                    person = _person(source_child, ctx, key_of, base)
                    if person is not None:
                        source_authors.append(person)
    if not draft.content and summary_language is not None:
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
    is_html = kind in _HTML_TYPES or kind in _XHTML_TYPES
    mode = (element.get("mode") or "xml").strip().lower()  # Atom 0.3; harmless in 1.0
    if mode == "base64":
        return _base64_text(text_of(element)), is_html
    if mode == "escaped":
        return text_of(element), kind not in ("text", "text/plain")
    children = child_elements(element)
    if children and kind in _HTML_TYPES and "<" in text_of(element):
        return text_of(element), True  # escaped HTML wrapped in a <div> (TypePad did this)
    if children:  # inline markup, whatever the type claims
        if (not atom03 and kind == "xhtml" and len(children) == 1
                and children[0].tag == _XHTML_DIV and not (element.text or "").strip()):
            return inner_markup(children[0]), True  # RFC 4287 3.1.1.3: the div is a wrapper
        return inner_markup(element), True
    if is_html:
        return text_of(element), True
    if kind in ("text", "text/plain") or kind.startswith("text/") or kind.endswith(
            ("+xml", "/xml")):
        return text_of(element), False
    if element.get("src") is not None:
        return "", False  # out-of-line content: nothing here to show
    # any other media type is base64 (RFC 4287 4.1.3.3); show it only when it is text
    return _base64_text(text_of(element)), False


def _base64_text(value: str) -> str:
    """Decoded base64 when it is UTF-8 text, else "" (binary media is not shown inline)."""
    try:
        decoded = base64.b64decode("".join(value.split()), validate=True)
        text = decoded.decode("utf-8")
    except (binascii.Error, ValueError):
        return ""
    return "" if "\x00" in text else text


def _link(element: etree._Element, ctx: Context, base: str) -> tuple[str, str]:
    rel = (element.get("rel") or "alternate").strip()
    if rel.startswith("http://www.iana.org/assignments/relation/"):
        rel = rel.rsplit("/", 1)[1]
    target = element.get("href")
    if target is None:  # the drafts before Atom 0.3 put the URL in the element's text
        target = text_of(element)
    href = ctx.url(target, ctx.base_of(element, base))
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
