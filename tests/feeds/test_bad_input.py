"""The bad-input checklist, as far as parsing goes: each case yields a precise, typed problem or a
correct recovery, quickly, and never an exception."""

from __future__ import annotations

import codecs

import pytest

from feedmesh.feeds import DEFAULT_LIMITS, ParseLimits, parse_feed

GOOD_ITEMS = "".join(f"<item><title>Item {n}</title><link>http://x.test/{n}</link>"
                     f"<guid>g{n}</guid></item>" for n in range(5))


def rss(body: str = GOOD_ITEMS, title: str = "T") -> bytes:
    return f"<rss version='2.0'><channel><title>{title}</title>{body}</channel></rss>".encode()


# ------------------------------------------------------------ malformed XML


def test_malformed_xml_recovers_entries_and_says_where() -> None:
    broken = rss(GOOD_ITEMS.replace("<title>Item 2</title>", "<title>Item 2</titel>"))
    parsed = parse_feed(broken)
    assert parsed.error is not None and parsed.error.kind == "malformed"
    assert parsed.error.line == 1 and parsed.error.column is not None
    assert "titel" in parsed.error.message or "mismatch" in parsed.error.message.lower()
    assert len(parsed.entries) == 5
    assert parsed.feed.format == "rss2.0"


def test_unclosed_document_keeps_what_was_read() -> None:
    text = rss().decode()
    parsed = parse_feed(text[: text.index("<item><title>Item 3")].encode())
    assert parsed.error.kind == "malformed"
    assert [e.title for e in parsed.entries] == ["Item 0", "Item 1", "Item 2"]


def test_control_characters_and_bare_ampersands_are_repaired() -> None:
    parsed = parse_feed(rss(title="Tom & Jerry\x0b\x1b & friends"))
    assert parsed.error.kind == "malformed"
    assert parsed.feed.title == "Tom & Jerry & friends"
    assert len(parsed.entries) == 5


def test_text_before_the_document_is_skipped() -> None:
    parsed = parse_feed(b"Warning: something in /var/www/feed.php on line 3\n" + rss())
    assert parsed.error.kind == "malformed" and "before the XML document" in parsed.error.message
    assert len(parsed.entries) == 5


def test_loose_fallback_reads_tag_soup() -> None:
    soup = ("<rss version='2.0'><channel><title>Soup</title>"
            + "".join(f"<item><title>Post {n}<link>http://s.test/{n}</link>"
                      f"<description>x<br>y</description></item>" for n in range(4))
            + "</channel></rss>")
    parsed = parse_feed(soup.encode())
    assert parsed.error.kind == "malformed"
    assert len(parsed.entries) == 4


# ------------------------------------------------------------ entities


def test_undeclared_html_entities_are_recovered() -> None:
    parsed = parse_feed(rss(title="caf&eacute;&nbsp;au&nbsp;lait &copy; &bogus;"))
    assert parsed.error.kind == "malformed" and "eacute" in parsed.error.message
    assert parsed.feed.title == "café au lait © &bogus;"
    assert len(parsed.entries) == 5


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE rss [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<rss version="2.0"><channel><title>&lol9;</title>
<item><title>&lol9;</title></item></channel></rss>"""


def test_billion_laughs_is_refused_without_expansion() -> None:
    parsed = parse_feed(BILLION_LAUGHS)
    assert parsed.error.kind == "forbidden"
    assert "declares entities" in parsed.error.message  # refused on sight, before any expansion
    assert "lol" not in parsed.feed.title and not parsed.entries


@pytest.mark.parametrize("entity", [
    '<!ENTITY xxe SYSTEM "file:///etc/passwd">',
    '<!ENTITY xxe SYSTEM "http://127.0.0.1:9/steal">',
    '<!ENTITY % remote SYSTEM "http://127.0.0.1:9/evil.dtd"> %remote;',
])
def test_external_entities_are_refused(entity: str) -> None:
    data = (f'<?xml version="1.0"?><!DOCTYPE rss [{entity}]>'
            "<rss><channel><title>&xxe;</title></channel></rss>").encode()
    parsed = parse_feed(data)
    assert parsed.error.kind == "forbidden"
    assert "root:" not in repr(parsed)


def test_entity_declaration_hidden_after_junk_is_still_refused() -> None:
    data = (b'junk <?xml version="1.0"?><!DOCTYPE rss [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            b"<rss><channel><title>&x;</title></channel></rss>")
    parsed = parse_feed(data)
    assert parsed.error is not None
    assert "root:" not in repr(parsed)
    assert not parsed.feed.title.startswith("root")


def test_doctype_in_content_is_not_mistaken_for_a_declaration() -> None:
    body = ("<item><title>XML tips</title><description>"
            "<![CDATA[Write <!DOCTYPE x [<!ENTITY a 'b'>]>]]>"
            "</description></item>")
    parsed = parse_feed(rss(body))
    assert parsed.error is None
    assert len(parsed.entries) == 1


# ------------------------------------------------------------ not a feed


@pytest.mark.parametrize(("data", "words"), [
    (b"", "empty"),
    (b"   \n\t  ", "empty"),
    (b"<!DOCTYPE html><html><head><title>Home</title></head><body>hi</body></html>", "HTML page"),
    (b"<html><body>Moved</body></html>", "HTML page"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "binary"),
    (b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + bytes(200), "binary"),
    (b"Just some text, no markup at all.", "plain text"),
    (b"<?xml version='1.0'?><catalog><book/></catalog>", "<catalog>"),
    (b'{"not": "a feed"}', "not a JSON Feed"),
    (b"[1, 2, 3]", "not a JSON Feed"),
])
def test_not_a_feed(data: bytes, words: str) -> None:
    parsed = parse_feed(data)
    assert not parsed.is_feed
    assert parsed.error.kind == "not_a_feed"
    assert words in parsed.error.message
    assert parsed.feed.format == "" and not parsed.entries


def test_html_page_names_the_feeds_it_links_to() -> None:
    page = (b'<!doctype html><html><head><link rel="alternate" type="application/rss+xml" '
            b'href="/feed.xml"><link rel="alternate" type="application/atom+xml" '
            b'href="https://other.test/atom"></head><body></body></html>')
    parsed = parse_feed(page, url="https://site.test/blog/")
    assert "https://site.test/feed.xml" in parsed.error.message
    assert "https://other.test/atom" in parsed.error.message


def test_malformed_json_feed_says_where() -> None:
    parsed = parse_feed(b'{"version": "https://jsonfeed.org/version/1.1",\n "items": [,]}')
    assert parsed.error.kind == "malformed"
    assert parsed.error.line == 2 and parsed.error.column is not None


# ------------------------------------------------------------ charsets


def test_wrong_charset_is_recovered_and_reported() -> None:
    data = rss(title="Grüße").replace(b"<rss", b'<?xml version="1.0" encoding="us-ascii"?><rss')
    parsed = parse_feed(data)
    assert parsed.feed.title == "Grüße"
    assert parsed.error.kind == "encoding"


def test_missing_charset_is_guessed_and_reported() -> None:
    parsed = parse_feed(rss(title="Grüße aus Köln").decode().encode("iso-8859-1"))
    assert parsed.feed.title == "Grüße aus Köln"
    assert parsed.error.kind == "encoding"


def test_utf16_with_bom() -> None:
    data = codecs.BOM_UTF16_LE + ('<?xml version="1.0" encoding="UTF-16"?>'
                                  + rss(title="Ünïcödé").decode()).encode("utf-16-le")
    parsed = parse_feed(data)
    assert parsed.error is None
    assert parsed.feed.title == "Ünïcödé" and len(parsed.entries) == 5


# ------------------------------------------------------------ identity trouble


def test_duplicate_guids_never_share_a_key() -> None:
    body = "".join(f"<item><guid>same</guid><title>Post {n}</title></item>" for n in range(4))
    parsed = parse_feed(rss(body))
    assert len({e.key for e in parsed.entries}) == 4


def test_changing_guids_keep_stable_content_hashes() -> None:
    def fetch(session: int) -> list[str]:
        body = "".join(f"<item><guid>post-{n}-{session}</guid><title>Post {n}</title></item>"
                       for n in range(3))
        return [e.content_hash for e in parse_feed(rss(body)).entries]
    assert fetch(1) == fetch(2)


# ------------------------------------------------------------ dates


def test_missing_dates_are_none_and_future_dates_are_kept() -> None:
    body = ("<item><guid>a</guid></item>"
            "<item><guid>b</guid><pubDate>garbage</pubDate></item>"
            "<item><guid>c</guid><pubDate>Fri, 01 Jan 2100 00:00:00 GMT</pubDate></item>")
    a, b, c = parse_feed(rss(body)).entries
    assert a.published is None and b.published is None
    assert c.published is not None and c.published.year == 2100  # the store clamps for display


# ------------------------------------------------------------ size and work caps


def test_100_mb_feed_is_cut_quickly() -> None:
    item = "<item><title>Big</title><description>" + "x" * 2000 + "</description></item>"
    head = "<rss version='2.0'><channel><title>Huge</title>"
    data = (head + item * (100 * 1024 * 1024 // len(item) + 1) + "</channel></rss>").encode()
    assert len(data) > 100 * 1024 * 1024
    parsed = parse_feed(data)
    assert parsed.error.kind == "too_large"
    # Cut, not read through: only the first max_bytes were looked at.
    assert f"read only the first {DEFAULT_LIMITS.max_bytes} bytes" in parsed.error.message
    assert parsed.feed.title == "Huge"
    assert len(parsed.entries) == 1000  # max_entries of the default limits
    assert all(entry.title == "Big" for entry in parsed.entries)


def test_huge_json_feed_is_refused() -> None:
    data = b'{"version": "https://jsonfeed.org/version/1.1", "items": [' + b'{"id": "1"},' * 100
    parsed = parse_feed(data + b'{"id": "x"}]}', limits=ParseLimits(max_bytes=256))
    assert parsed.error.kind == "too_large" and not parsed.entries


def test_entry_and_field_caps() -> None:
    body = "".join(f"<item><guid>{n}</guid><title>{'t' * 50}</title>"
                   f"<description>{'d' * 500}</description></item>" for n in range(20))
    limits = ParseLimits(max_entries=7, max_text_chars=10, max_html_chars=100)
    parsed = parse_feed(rss(body), limits=limits)
    assert parsed.error.kind == "too_large"
    assert len(parsed.entries) == 7
    assert all(len(e.title) <= 10 and len(e.summary) <= 100 for e in parsed.entries)


def test_deep_nesting_is_refused() -> None:
    deep = b"<rss><channel><title>x</title>" + b"<a>" * 10000 + b"</a>" * 10000 + \
        b"</channel></rss>"
    parsed = parse_feed(deep)
    assert parsed.error.kind in ("too_large", "malformed")
    deep_json = b'{"version": "https://jsonfeed.org/version/1", "items": ' + b"[" * 100000 + \
        b"]" * 100000 + b"}"
    parsed = parse_feed(deep_json)
    assert parsed.error is not None and parsed.error.kind in ("too_large", "malformed")


def test_a_bug_of_ours_becomes_a_typed_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*_: object) -> None:
        raise KeyError("a bug")
    monkeypatch.setattr("feedmesh.feeds.parser.read_rss", explode)
    parsed = parse_feed(rss())
    assert parsed.error.kind == "internal"
    assert "KeyError" in parsed.error.message and "a bug" in parsed.error.message
