"""miniflux's encoding and large-feed data, and the W3C feed validator's cases.

miniflux ships no expectations, only documents: each must parse with all its items and with text
decoded in the charset the file is really in (named below from the file and its bytes; the
reference titles are decoded with that charset, independently of our decoder). The feed
validator's cases must never crash the parser; its valid documents must not be flagged, and its
cases about dangerous markup must come out without anything a browser would execute.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import msgspec
import pytest

from feedmesh.feeds import parse_feed
from feedmesh.feeds.sanitize import html_to_text
from tests.conformance.corpus import CORPUS, available, case_id, read_header

MINIFLUX = CORPUS / "miniflux-testdata" / "internal" / "reader"
# file (under internal/reader) -> the charset its bytes are really in; None: not a feed
MINIFLUX_FILES: dict[str, str | None] = {
    "parser/testdata/encoding_ISO-8859-1.xml": "iso-8859-1",
    "parser/testdata/encoding_WINDOWS-1251.xml": "windows-1251",
    "parser/testdata/large_atom.xml": "utf-8",
    "parser/testdata/large_rss.xml": "utf-8",
    "parser/testdata/no_encoding_ISO-8859-1.xml": "iso-8859-1",
    "parser/testdata/rdf_UTF8.xml": "utf-8",
    "parser/testdata/small_atom.xml": "utf-8",
    "parser/testdata/urdu_UTF8.xml": "utf-8",
    "encoding/testdata/invalid-prolog.xml": "utf-8",
    "encoding/testdata/iso-8859-1.xml": "iso-8859-1",
    "encoding/testdata/koi8r.xml": "koi8-r",
    "encoding/testdata/utf8.xml": "utf-8",
    "encoding/testdata/utf8-incorrect-prolog.xml": "utf-8",
    "encoding/testdata/windows-1252.xml": "windows-1252",
    "encoding/testdata/windows-1252-incorrect-prolog.xml": "utf-8",  # declared 1252, bytes UTF-8
    "xml/testdata/koi8r.xml": "koi8-r",
    "xml/testdata/iso88591.xml": None,  # <note>: XML, but not a feed
    "xml/testdata/iso88591_utf8_mismatch.xml": None,
    "encoding/testdata/iso-8859-1.html": None,
    "encoding/testdata/iso-8859-1-meta-after-1024.html": None,
    "encoding/testdata/utf8.html": None,
    "encoding/testdata/utf8-meta-after-1024.html": None,
}
_ENTRY_TAG = re.compile(rb"<(?:[A-Za-z]+:)?(?:item|entry)[\s>]")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.DOTALL)
_CDATA = re.compile(r"<!\[CDATA\[(.*?)\]\]>", re.DOTALL)
_DANGER = re.compile(r"<script|<iframe|<object|<embed|<style|javascript:|vbscript:|\son\w+=|"
                     r"\sstyle=", re.IGNORECASE)


def _reference_titles(data: bytes, charset: str) -> set[str]:
    text = data.decode(charset)
    titles = set()
    for raw in _TITLE.findall(text):
        raw = _CDATA.sub(lambda found: html.escape(found.group(1)), raw)
        titles.add(html_to_text(html.unescape(raw)))
        titles.add(" ".join(html.unescape(raw).split()))
    return titles


def test_miniflux_table_covers_every_document() -> None:
    on_disk = {path.relative_to(MINIFLUX).as_posix() for path in MINIFLUX.rglob("*")
               if path.is_file()} if available() else set(MINIFLUX_FILES)
    assert on_disk == set(MINIFLUX_FILES)


@pytest.mark.parametrize("name", sorted(MINIFLUX_FILES))
def test_miniflux_document(name: str) -> None:
    data = (MINIFLUX / name).read_bytes()
    parsed = parse_feed(data)
    charset = MINIFLUX_FILES[name]
    if charset is None:
        assert not parsed.is_feed, parsed.feed
        return
    assert parsed.feed.format, parsed.error
    assert len(parsed.entries) == len(_ENTRY_TAG.findall(data)), "lost items"
    reference = _reference_titles(data, charset)
    ours = [parsed.feed.title] + [entry.title for entry in parsed.entries]
    wrong = [title for title in ours if title and title not in reference]
    assert not wrong, f"titles not decoded as {charset}: {wrong[:3]}"
    assert "\ufffd" not in msgspec.json.encode(parsed).decode("utf-8")


VALIDATOR = sorted((CORPUS / "feedvalidator-testcases").rglob("*.xml")) if available() else []
# Documents the feed validator checks that are not feeds we read (see docs/conformance.md).
_NOT_OURS = ("/rss11/", "/ext/app/")


@pytest.mark.parametrize("path", VALIDATOR, ids=[case_id(path) for path in VALIDATOR])
def test_feedvalidator_case(path: Path) -> None:
    data = path.read_bytes()
    parsed = parse_feed(data)
    error = parsed.error
    assert error is None or error.kind != "internal", error.message
    expect = read_header(data).expect
    identifier = case_id(path)
    if expect.startswith("!Error") and not any(part in identifier for part in _NOT_OURS):
        assert error is None or error.kind not in ("malformed", "forbidden", "not_a_feed"), error
    if re.search(r"SecurityRisk|DangerousStyle|ContainsHTML|ContainsUndeclaredHTML", expect):
        output = msgspec.json.encode(parsed).decode("utf-8")
        danger = _DANGER.search(output)
        assert danger is None, f"unsafe markup survived: {output[danger.start() - 80:][:200]}"
