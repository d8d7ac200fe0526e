"""Every expectation we deliberately answer differently, with the reason. Mirrored, case by case,
in docs/conformance.md (a test keeps the two in step).

Keys are case ids (the path inside the corpus folder), optionally followed by ``::field`` for the
field-by-field corpora; ``*`` matches any run of characters (``entries[*].content``). A case
listed here that starts to pass fails the suite: the list must stay true.
"""

from __future__ import annotations

import re

__all__ = ["KNOWN", "REASONS", "known_reason", "matches"]

REASONS = {
    "svg-mathml": (
        "SVG and MathML are not in the sanitizer's allow-list. Inline SVG can carry scripts and "
        "event handlers and has a history of sanitizer bypasses (namespace confusion); feeds "
        "almost never use it. The markup is removed, its text kept."),
    "verbatim-id": (
        "Entry ids are kept verbatim (trimmed), never resolved against the document URL: the id "
        "is the entry's identity and must not change when the same feed is fetched from another "
        "URL (a redirect, a mirror, http vs https)."),
    "image-only-title": (
        "Titles are plain text; a title that is only an <img> has no text, so it is empty."),
    "case-sensitive-names": (
        "XML element names are case-sensitive; <TiTlE> is not <title>. (iTunes tolerates it; no "
        "feed we know of relies on it.)"),
    "no-http-headers": (
        "parse_feed takes the document URL and Content-Type; the HTTP Content-Language header is "
        "not an input, so it cannot supply the feed language."),
    "empty-fields-omitted": (
        "Empty fields are omitted from our records (\"\" is the default); feedparser keeps an "
        "empty string for an empty element, so `feed['description'] == ''` finds no key."),
    "rss-summary-element": (
        "<summary> is not an RSS element; feedparser reads it as content when a description is "
        "also present. We ignore unknown RSS elements."),
    "html5-parsing": (
        "HTML is parsed as browsers do (HTML5, via ammonia): `<!'` opens a bogus comment and "
        "`<!DOCTYPE` is a doctype, so they vanish, exactly as they would in a browser."),
    "made-up-elements": (
        "Elements outside the formats and the namespaces we read (here a made-up <tags>) are "
        "ignored."),
    "entity-declarations-refused": (
        "A document type declaration that declares entities is refused (kind `forbidden`): it "
        "is how entity bombs and XXE are written, and no real feed needs it. These two cases "
        "are well-formed, so feedparser expects no problem."),
    "feed-rs-author-placeholder": (
        "feed-rs names an RSS author written as \"email (Name)\" literally \"author\"; we read "
        "the name and the email."),
    "media-player-not-attachment": (
        "feed-rs lists a <media:player> URL (an HTML embed page) as media content; we keep only "
        "<media:content> URLs (files) as enclosures."),
    "xml2js-mixed-content": (
        "rss-parser (xml2js) loses the order of text and elements in naked-markup content, so "
        "its expected text is scrambled (\"submitted byto benjaab123\"); ours reads in document "
        "order."),
    "rss-parser-wrong-charset": (
        "The document declares no charset and is not UTF-8; rss-parser decoded it as UTF-8 and "
        "its expectation holds U+FFFD replacement characters. We read it as windows-1252 and "
        "report an `encoding` problem."),
}

KNOWN: dict[str, str] = {
    **{f"feedparser/wellformed/namespace/{name}.xml": "svg-mathml" for name in (
        "atommathml", "atomsvg", "atomsvgdesc", "atomsvgtitle", "atomxlink", "rss2.0mathml",
        "rss2.0svg", "rss2.0svg5", "rss2.0svgtitle", "rss2.0xlink")},
    "feedparser/wellformed/base/http_entry_id_base_content_location.xml": "verbatim-id",
    "feedparser/wellformed/base/http_entry_id_base_docuri.xml": "verbatim-id",
    "feedparser/wellformed/atom10/tag_in_attr.xml": "image-only-title",
    "feedparser/wellformed/itunes/itunes_core_element_uppercase.xml": "case-sensitive-names",
    "feedparser/wellformed/lang/http_content_language.xml": "no-http-headers",
    "feedparser/wellformed/rss/channel_description_shorttag.xml": "empty-fields-omitted",
    "feedparser/wellformed/rss/item_description_and_summary.xml": "rss-summary-element",
    "feedparser/wellformed/rss/item_summary_and_description.xml": "rss-summary-element",
    "feedparser/wellformed/rss/item_description_not_a_doctype.xml": "html5-parsing",
    "feedparser/wellformed/rss/item_description_not_a_doctype2.xml": "html5-parsing",
    "feedparser/wellformed/rss/item_madeup_tags_element.xml": "made-up-elements",
    "feedparser/wellformed/rdf/doctype_contains_entity_decl.xml": "entity-declarations-refused",
    "feedparser/wellformed/rss/entity_in_doctype.xml": "entity-declarations-refused",
    "feed-rs-fixtures/rss2/rss_2.0_ilgiornale.xml::entries[0].authors":
        "feed-rs-author-placeholder",
    "feed-rs-fixtures/rss2/rss_2.0_relurl_1.xml::entries[*].authors": "feed-rs-author-placeholder",
    "feed-rs-fixtures/rss2/rss_2.0_spiegel.xml::entries[0].enclosures":
        "media-player-not-attachment",
    "feed-rs-fixtures/rss2/rss_2.0_vimeo_media.xml::entries[0].enclosures":
        "media-player-not-attachment",
    "rss-parser-node/input/reddit-home.rss::entries[*].content": "xml2js-mixed-content",
    "rss-parser-node/input/reddit-atom.rss::entries[*].summary": "xml2js-mixed-content",
    "rss-parser-node/input/uolNoticias.rss::entries[*].title": "rss-parser-wrong-charset",
    "rss-parser-node/input/uolNoticias.rss::entries[*].summary": "rss-parser-wrong-charset",
}


def matches(pattern: str, case: str) -> bool:
    """Does a KNOWN key cover ``case``? (``*`` is the only wildcard; brackets are literal.)"""
    if "*" not in pattern:
        return pattern == case
    return re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), case) is not None


def known_reason(case: str) -> str | None:
    """The reason key when ``case`` (``path`` or ``path::field``) is a listed difference."""
    if case in KNOWN:
        return KNOWN[case]
    for pattern, reason in KNOWN.items():
        if matches(pattern, case):
            return reason
    return None
