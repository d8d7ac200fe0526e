"""Field-by-field comparison with feed-rs (``*.serde.json``) and rss-parser (``output/*.json``).

Both projects store their whole parsed result. We compare the fields that exist in our model
(ids, titles, links, dates, summaries, contents, authors, categories, enclosures), one
:class:`Check` per field per entry, so a share can be counted and every failing field named.

Normalizations, applied to both sides so that only meaning is compared:

* titles, summaries and contents are compared as the text a reader sees (tags dropped, entities
  decoded, whitespace collapsed), because we sanitize HTML and they do not;
* dates are compared as instants; URLs exactly (both sides resolve the same relative URLs);
* URLs are compared as URLs (scheme and host case-insensitive, an empty path is "/"), language
  tags case-insensitively with "_" read as "-" (BCP 47), lists with whitespace collapsed;
* an id feed-rs *generated* (a hash or UUID that appears nowhere in the document) is not a
  declared id and is not compared; likewise fields a project left empty are not expectations;
* rss-parser's ``xml2js-options`` case was produced with xml2js's ``emptyTag: "EMPTY"`` option,
  so the literal value ``EMPTY`` stands for "no value" and is not an expectation.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

from feedmesh.feeds.dates import parse_date
from feedmesh.feeds.sanitize import html_to_text
from feedmesh.model import Entry, ParsedFeed, Person

__all__ = ["Check", "compare_feed_rs", "compare_rss_parser"]

_GENERATED_ID = re.compile(r"^[0-9a-f]{28,32}$")


class Check(msgspec.Struct, frozen=True):
    """One expectation: ``field`` (e.g. ``entries[3].title``) should be ``expected``."""

    field: str
    expected: str
    actual: str
    ok: bool


def _text(value: object) -> str:
    return html_to_text(value) if isinstance(value, str) else ""


def _instant(value: object) -> datetime | None:
    if isinstance(value, str) and value:
        moment = parse_date(value)
        if moment is not None:
            return moment.astimezone(UTC)
    return None


def _check_text(checks: list[Check], field: str, expected: object, actual: str) -> None:
    wanted = _text(expected)
    if wanted and wanted != "EMPTY":
        got = _text(actual)
        checks.append(Check(field, wanted, got, got == wanted))


def _check_exact(checks: list[Check], field: str, expected: object, actual: str) -> None:
    if isinstance(expected, str) and expected.strip() and expected.strip() != "EMPTY":
        checks.append(Check(field, expected.strip(), actual, actual == expected.strip()))


def _url(value: str) -> str:
    value = " ".join(value.split())
    try:
        parts = urlsplit(value)
    except ValueError:
        return value
    if not parts.scheme:
        return value
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/",
                       parts.query, parts.fragment))


def _check_url(checks: list[Check], field: str, expected: object, actual: str) -> None:
    if isinstance(expected, str) and expected.strip():
        wanted = expected.strip()
        checks.append(Check(field, wanted, actual, _url(actual) == _url(wanted)))


def _check_language(checks: list[Check], field: str, expected: object, actual: str) -> None:
    if isinstance(expected, str) and expected.strip():
        def norm(tag: str) -> str:
            return tag.strip().lower().replace("_", "-")
        checks.append(Check(field, expected.strip(), actual, norm(actual) == norm(expected)))


def _check_date(checks: list[Check], field: str, expected: object,
                actual: datetime | None) -> None:
    wanted = _instant(expected)
    if wanted is not None:
        got = actual.isoformat() if actual is not None else ""
        checks.append(Check(field, wanted.isoformat(), got, actual == wanted))


def _check_members(checks: list[Check], field: str, expected: list[str], actual: list[str],
                   urls: bool = False) -> None:
    """Every expected value must be among ours (we may know more, e.g. media:content)."""
    norm = _url if urls else (lambda value: " ".join(value.split()))
    wanted = [value.strip() for value in expected if isinstance(value, str) and value.strip()]
    if wanted:
        ours = {norm(value) for value in actual}
        missing = [value for value in wanted if norm(value) not in ours]
        checks.append(Check(field, " | ".join(wanted), " | ".join(actual), not missing))


def _author_matches(wanted: str, ours: list[Person]) -> bool:
    """An author as another parser spelled it ("name", "email (name)", "name (mailto:email)")."""
    wanted = " ".join(wanted.split())
    for person in ours:
        if wanted in (person.name, person.email):
            return True
        if person.name and person.name in wanted and (not person.email or person.email in wanted):
            return True
    return False


def _alternate(links: list[dict[str, Any]] | None) -> str:
    for link in links or []:
        if link.get("rel") in (None, "alternate") and link.get("href"):
            return str(link["href"]).strip()
    return ""


# ---------------------------------------------------------------- feed-rs


def compare_feed_rs(expected: dict[str, Any], parsed: ParsedFeed, source: bytes) -> list[Check]:
    checks: list[Check] = []
    feed = parsed.feed
    _check_text(checks, "feed.title", (expected.get("title") or {}).get("content"), feed.title)
    _check_url(checks, "feed.link", _alternate(expected.get("links")), feed.link)
    _check_date(checks, "feed.updated", expected.get("updated"), feed.updated)
    _check_language(checks, "feed.language", expected.get("language"), feed.language)
    if expected.get("ttl") is not None:
        wanted = str(expected["ttl"])
        got = "" if feed.ttl_minutes is None else str(feed.ttl_minutes)
        checks.append(Check("feed.ttl", wanted, got, wanted == got))
    entries = expected.get("entries") or []
    checks.append(Check("entries.count", str(len(entries)), str(len(parsed.entries)),
                        len(entries) == len(parsed.entries)))
    # A count that differs is reported above; the entries both sides have are compared.
    for index, (wanted, ours) in enumerate(zip(entries, parsed.entries, strict=False)):
        checks.extend(_feed_rs_entry(f"entries[{index}]", wanted, ours, source))
    return checks


def _feed_rs_entry(prefix: str, wanted: dict[str, Any], ours: Entry,
                   source: bytes) -> list[Check]:
    checks: list[Check] = []
    identifier = wanted.get("id") or ""
    generated = _GENERATED_ID.match(identifier.replace("-", "")) and (
        identifier.encode("utf-8") not in source)
    if identifier and not generated:
        _check_exact(checks, f"{prefix}.id", identifier, ours.guid)
    _check_text(checks, f"{prefix}.title", (wanted.get("title") or {}).get("content"), ours.title)
    _check_url(checks, f"{prefix}.link", _alternate(wanted.get("links")), ours.link)
    _check_date(checks, f"{prefix}.published", wanted.get("published"), ours.published)
    _check_date(checks, f"{prefix}.updated", wanted.get("updated"), ours.updated or ours.published)
    _check_text(checks, f"{prefix}.summary", (wanted.get("summary") or {}).get("content"),
                ours.summary)
    _check_text(checks, f"{prefix}.content", (wanted.get("content") or {}).get("body"),
                ours.content)
    for author in wanted.get("authors") or []:
        name = " ".join((author.get("name") or "").split())
        if name:
            spelled = " | ".join(f"{p.name} <{p.email}>" for p in ours.authors)
            checks.append(Check(f"{prefix}.authors", name, spelled,
                                _author_matches(name, list(ours.authors))))
    terms = [category.get("term") or "" for category in wanted.get("categories") or []]
    _check_members(checks, f"{prefix}.categories", terms, list(ours.categories))
    urls = [content.get("url") or "" for media in wanted.get("media") or []
            for content in media.get("content") or []]
    _check_members(checks, f"{prefix}.enclosures", urls, [e.url for e in ours.enclosures],
                   urls=True)
    return checks


# ---------------------------------------------------------------- rss-parser


def compare_rss_parser(expected: dict[str, Any], parsed: ParsedFeed,
                       is_atom: bool) -> list[Check]:
    checks: list[Check] = []
    feed = parsed.feed
    _check_text(checks, "feed.title", expected.get("title"), feed.title)
    _check_url(checks, "feed.link", expected.get("link"), feed.link)
    _check_language(checks, "feed.language", expected.get("language"), feed.language)
    items = expected.get("items") or []
    checks.append(Check("entries.count", str(len(items)), str(len(parsed.entries)),
                        len(items) == len(parsed.entries)))
    # A count that differs is reported above; the entries both sides have are compared.
    for index, (wanted, ours) in enumerate(zip(items, parsed.entries, strict=False)):
        prefix = f"entries[{index}]"
        _check_text(checks, f"{prefix}.title", wanted.get("title"), ours.title)
        _check_url(checks, f"{prefix}.link", wanted.get("link"), ours.link)
        identifier = wanted.get("id") if is_atom else wanted.get("guid")
        if isinstance(identifier, dict):  # xml2js shape of <guid isPermaLink="..">
            identifier = identifier.get("_")
        _check_exact(checks, f"{prefix}.id", identifier, ours.guid)
        _check_date(checks, f"{prefix}.date", wanted.get("isoDate"),
                    ours.published or ours.updated)
        body = wanted.get("content")
        if is_atom:
            _check_text(checks, f"{prefix}.content", body, ours.content or ours.summary)
        else:
            _check_text(checks, f"{prefix}.summary", body, ours.summary)
            _check_text(checks, f"{prefix}.content", wanted.get("content:encoded"), ours.content)
        author = wanted.get("creator") or wanted.get("author")
        if isinstance(author, str) and author.strip() and author.strip() != "EMPTY":
            spelled = " | ".join(f"{p.name} <{p.email}>" for p in ours.authors)
            checks.append(Check(f"{prefix}.author", author.strip(), spelled,
                                _author_matches(author, list(ours.authors))))
        categories = wanted.get("categories") or []
        terms = [c if isinstance(c, str) else (c.get("_") or "") for c in categories
                 if isinstance(c, (str, dict))]
        _check_members(checks, f"{prefix}.categories", terms, list(ours.categories))
        enclosure = wanted.get("enclosure") or {}
        _check_members(checks, f"{prefix}.enclosures", [enclosure.get("url") or ""],
                       [e.url for e in ours.enclosures], urls=True)
    return checks
