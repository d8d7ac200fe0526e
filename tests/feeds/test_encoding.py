"""Encoding detection: byte order marks, HTTP charset, XML declaration, and their lies."""

from __future__ import annotations

import codecs

import pytest

from feedmesh.feeds import parse_feed
from feedmesh.feeds.encoding import decode_document, http_charset

TITLE = "Café Ωμέγα €"


def rss(title: str, declaration: str = "") -> str:
    prolog = f'<?xml version="1.0" encoding="{declaration}"?>' if declaration else ""
    return f"{prolog}<rss version=\"2.0\"><channel><title>{title}</title></channel></rss>"


@pytest.mark.parametrize(("bom", "codec"), [
    (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"), (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
])
def test_byte_order_mark_wins(bom: bytes, codec: str) -> None:
    # the declaration says UTF-8 for the UTF-16 ones: the BOM is authoritative
    data = bom + rss(TITLE, "utf-8").encode(codec)
    parsed = parse_feed(data, content_type="text/xml; charset=iso-8859-1")
    assert parsed.feed.title == TITLE
    assert parsed.error is None
    assert parsed.encoding.replace("-", "").startswith(codec.replace("-", "")[:5])


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_bom_from_the_shape_of_the_declaration(codec: str) -> None:
    parsed = parse_feed(rss(TITLE, "utf-16").encode(codec))
    assert parsed.feed.title == TITLE


@pytest.mark.parametrize(("charset", "title"), [
    ("iso-8859-1", "Café crème"), ("windows-1252", "Euro € and “quotes”"),
    ("windows-1251", "Цитата"), ("koi8-r", "Первая новость"), ("iso-8859-7", "Ωμέγα"),
    ("shift_jis", "日本語のフィード"), ("gb18030", "中文标题"), ("euc-kr", "한국어"),
])
def test_declared_charset_is_used(charset: str, title: str) -> None:
    parsed = parse_feed(rss(title, charset).encode(charset))
    assert parsed.feed.title == title
    assert parsed.error is None


def test_http_charset_beats_the_declaration_when_it_decodes() -> None:
    data = rss("Цитата", "iso-8859-1").encode("windows-1251")
    parsed = parse_feed(data, content_type="application/rss+xml; charset=windows-1251")
    assert parsed.feed.title == "Цитата"
    assert parsed.encoding == "windows-1251"


def test_wrong_http_charset_falls_back_to_the_declaration() -> None:
    data = rss("Café", "iso-8859-1").encode("iso-8859-1")
    parsed = parse_feed(data, content_type="text/xml; charset=utf-8")
    assert parsed.feed.title == "Café"
    assert parsed.error is not None and parsed.error.kind == "encoding"
    assert "HTTP Content-Type declares 'utf-8'" in parsed.error.message


def test_single_byte_declaration_over_utf8_bytes_is_recovered() -> None:
    data = rss(TITLE, "iso-8859-1").encode("utf-8")
    parsed = parse_feed(data)
    assert parsed.feed.title == TITLE  # not "CafÃ©"
    assert parsed.error is not None and parsed.error.kind == "encoding"
    assert "bytes are UTF-8" in parsed.error.message


def test_missing_charset_on_latin_bytes_reads_windows_1252() -> None:
    parsed = parse_feed(rss("Anaïs et Jürgen à la plage").encode("windows-1252"))
    assert parsed.feed.title == "Anaïs et Jürgen à la plage"
    assert parsed.error is not None and parsed.error.kind == "encoding"
    assert parsed.encoding == "windows-1252"


def test_missing_charset_on_cyrillic_bytes_is_detected() -> None:
    title = "Новости науки и техники: первая новость недели о космосе и звёздах"  # noqa: RUF001
    parsed = parse_feed(rss(title).encode("windows-1251"))
    assert parsed.feed.title == title
    assert parsed.error is not None and parsed.error.kind == "encoding"


def test_unknown_charset_is_reported_and_skipped() -> None:
    parsed = parse_feed(rss("Café", "x-no-such-charset").encode("utf-8"))
    assert parsed.feed.title == "Café"
    assert parsed.error is not None and parsed.error.kind == "encoding"
    assert "x-no-such-charset" in parsed.error.message


def test_utf16_declared_on_ascii_bytes_is_a_lie() -> None:
    parsed = parse_feed(rss("plain", "utf-16").encode("ascii"))
    assert parsed.feed.title == "plain"


def test_invalid_bytes_after_a_bom_are_replaced_and_reported() -> None:
    data = codecs.BOM_UTF8 + rss("ok").encode() .replace(b"ok", b"o\xffk")
    parsed = parse_feed(data)
    assert parsed.feed.title == "o\ufffdk"
    assert parsed.error is not None and parsed.error.kind == "encoding"


@pytest.mark.parametrize(("header", "charset"), [
    ("text/xml; charset=UTF-8", "UTF-8"), ('application/xml;charset="iso-8859-1"', "iso-8859-1"),
    ("text/xml", ""), ("", ""), ("text/html; Charset=windows-1251; q=1", "windows-1251"),
])
def test_http_charset(header: str, charset: str) -> None:
    assert http_charset(header) == charset


def test_decoded_output_is_always_utf8() -> None:
    decoded = decode_document(rss("Ωμέγα", "iso-8859-7").encode("iso-8859-7"))
    assert decoded.encoding == "iso-8859-7"
    assert "Ωμέγα" in decoded.utf8.decode("utf-8")
