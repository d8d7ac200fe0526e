"""HTML sanitizing, plain-text titles, xml:base and relative URL resolution."""

from __future__ import annotations

import pytest

from feedmesh.feeds import parse_feed
from feedmesh.feeds.sanitize import html_to_text, looks_like_html, sanitize_html
from feedmesh.feeds.urls import resolve_url, scoped_base


@pytest.mark.parametrize(("dirty", "clean"), [
    ("<p>ok <script>alert(1)</script>fine</p>", "<p>ok fine</p>"),
    ("<style>p{}</style><b>bold</b>", "<b>bold</b>"),
    ('<a href="javascript:alert(1)">x</a>', "<a>x</a>"),
    ('<img src="x.png" onerror="alert(1)">', '<img src="http://ex.test/a/x.png">'),
    ('<p style="position:fixed" class="c" id="i">t</p>', "<p>t</p>"),
    ('<iframe src="http://evil"></iframe>text', "text"),
    ("<!-- comment -->kept", "kept"),
    ('<a href="/rel">r</a>', '<a href="http://ex.test/rel">r</a>'),
    ('<a href="../up">r</a>', '<a href="http://ex.test/up">r</a>'),
    ('<a href="//cdn.test/x">r</a>', '<a href="http://cdn.test/x">r</a>'),
    ('<a href="mailto:a@b.test">m</a>', '<a href="mailto:a@b.test">m</a>'),
    ('<video src="v.mp4" controls></video>',
     '<video src="http://ex.test/a/v.mp4" controls=""></video>'),
    ("plain & simple", "plain &amp; simple"),
    ("no markup", "no markup"),
])
def test_sanitize(dirty: str, clean: str) -> None:
    assert sanitize_html(dirty, "http://ex.test/a/b.html") == clean


def test_sanitize_without_base_keeps_relative_urls() -> None:
    assert sanitize_html('<a href="/rel">r</a>', "") == '<a href="/rel">r</a>'


@pytest.mark.parametrize(("markup", "text"), [
    ("Example <b>Atom</b>", "Example Atom"),
    ("AT&amp;T &lt;3", "AT&T <3"),
    ("<p>two\n\n  lines</p>", "two lines"),
    ("x<script>evil()</script>y", "xy"),
    ("caf&eacute;&nbsp;noir", "café noir"),
])
def test_html_to_text(markup: str, text: str) -> None:
    assert html_to_text(markup) == text


@pytest.mark.parametrize(("text", "is_html"), [
    ("a <b>bold</b> claim", True), ("AT&amp;T", True), ("x &#169; y", True),
    ("5 < 6 and 7 > 3", False), ("Q&A", False), ("plain", False),
])
def test_looks_like_html(text: str, is_html: bool) -> None:
    assert looks_like_html(text) is is_html


@pytest.mark.parametrize(("base", "url", "resolved"), [
    ("http://a.test/x/y", "z", "http://a.test/x/z"),
    ("http://a.test/x/y", "/z", "http://a.test/z"),
    ("http://a.test/x/y", "https://b.test/", "https://b.test/"),
    ("http://a.test/x/y", "javascript:alert(1)", ""),
    ("http://a.test/x/y", "  JavaScript:alert(1)", ""),
    ("http://a.test/x/y", "data:text/html,<script>", ""),
    ("http://a.test/x/y", "", ""),
    ("", "relative/only", "relative/only"),
    ("http://a.test/", "http://[::1", "http://[::1"),
])
def test_resolve_url(base: str, url: str, resolved: str) -> None:
    assert resolve_url(base, url) == resolved


def test_scoped_base() -> None:
    assert scoped_base(None, "http://a.test/") == "http://a.test/"
    assert scoped_base("sub/", "http://a.test/x/") == "http://a.test/x/sub/"
    assert scoped_base("javascript:alert(1)", "http://a.test/") == "http://a.test/"
    assert scoped_base("http:///a.test/b/", "http://z.test/") == "http://a.test/b/"


def test_xml_base_scopes_links_and_content() -> None:
    atom = b"""<feed xmlns="http://www.w3.org/2005/Atom" xml:base="http://site.test/blog/">
      <link href="./"/>
      <entry xml:base="2024/post/">
        <id>tag:x,2024:1</id>
        <link href="index.html"/>
        <link rel="enclosure" href="../audio.mp3" type="audio/mpeg" length="12"/>
        <content type="html" xml:base="media/"
          >&lt;img src="pic.png"&gt;&lt;a href="/top"&gt;t&lt;/a&gt;</content>
      </entry>
      <entry><id>2</id><link href="second.html"/></entry>
    </feed>"""
    parsed = parse_feed(atom, url="http://feeds.test/atom.xml")
    assert parsed.feed.link == "http://site.test/blog/"
    first, second = parsed.entries
    assert first.link == "http://site.test/blog/2024/post/index.html"
    assert first.enclosures[0].url == "http://site.test/blog/2024/audio.mp3"
    assert first.enclosures[0].length == 12
    assert 'src="http://site.test/blog/2024/post/media/pic.png"' in first.content
    assert 'href="http://site.test/top"' in first.content
    assert second.link == "http://site.test/blog/second.html"


def test_document_url_is_the_base_without_xml_base() -> None:
    parsed = parse_feed(b"<rss><channel><link>/home</link><item><link>p/1</link>"
                        b"<description>&lt;a href='x'&gt;x&lt;/a&gt;</description></item>"
                        b"</channel></rss>", url="http://news.test/feeds/rss.xml")
    assert parsed.feed.link == "http://news.test/home"
    assert parsed.entries[0].link == "http://news.test/feeds/p/1"
    assert parsed.entries[0].summary == '<a href="http://news.test/feeds/x">x</a>'


def test_unsafe_document_url_is_not_a_base() -> None:
    parsed = parse_feed(b"<rss><channel><link>/home</link></channel></rss>",
                        url="javascript:alert(1)")
    assert parsed.feed.link == "/home"


@pytest.mark.parametrize("base", [
    "http://a.test", "http://a.test/", "http://a.test/x/y", "http://a.test/x/y/",
    "http://a.test/x/y?q=1/2", "http://a.test/x/y#f/g", "https://a.test:8080/p/q.xml?x"])
def test_fast_relative_resolution_agrees_with_urljoin(base: str) -> None:
    from urllib.parse import urljoin

    for url in ["/r", "/r/s?x", "//cdn.test/z", "z.png", "sub/z.png", "?q", "#f", "../up",
                "./here", "/a/../b", "x/./y"]:
        html = f'<a href="{url}">x</a>'
        expected = f'<a href="{urljoin(base, url)}">x</a>'
        assert sanitize_html(html, base) == expected.replace("&", "&amp;"), url
