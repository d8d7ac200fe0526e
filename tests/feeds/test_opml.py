"""OPML import/export, including hostile lists."""

import pytest

from feedmesh.feeds.opml import OpmlError, OpmlOutline, parse_opml, render_opml

GOOD = b"""<?xml version="1.0"?>
<opml version="2.0"><head><title>My feeds</title></head><body>
  <outline text="Tech"><outline text="A" xmlUrl="http://a.example/feed" htmlUrl="http://a.example/"/>
    <outline text="Deep"><outline title="B" xmlUrl="https://b.example/rss"/></outline></outline>
  <outline text="C" xmlUrl="http://c.example/atom" type="rss"/>
  <outline text="dup" xmlUrl="http://c.example/atom"/>
  <outline text="mail" xmlUrl="mailto:x@example.com"/>
  <outline text="just a note"/>
</body></opml>"""


def test_parse_folders_titles_and_skips():
    result = parse_opml(GOOD)
    assert result.title == "My feeds"
    assert [(o.url, o.title, o.category) for o in result.outlines] == [
        ("http://a.example/feed", "A", "Tech"),
        ("https://b.example/rss", "B", "Tech/Deep"),
        ("http://c.example/atom", "C", ""),
    ]
    assert result.outlines[0].html_url == "http://a.example/"
    assert len(result.skipped) == 3
    assert "listed twice" in result.skipped[0] and "not an http(s) URL" in result.skipped[1]
    assert result.skipped[2] == "line 8: 'just a note' has no feed URL (xmlUrl)"


def test_round_trip():
    outlines = [OpmlOutline(url="http://x/?a=1&b=2", title='Quote " & <angle>'),
                OpmlOutline(url="http://y/")]
    result = parse_opml(render_opml("Export & co", outlines))
    assert result.title == "Export & co"
    # OPML requires a text attribute; an untitled feed is labelled by its URL.
    assert [(o.url, o.title) for o in result.outlines] == [
        (o.url, o.title or o.url) for o in outlines]


def test_round_trip_keeps_folders_and_sites():
    listed = parse_opml(GOOD).outlines
    again = parse_opml(render_opml("again", listed)).outlines
    key = lambda o: (o.url, o.title, o.category, o.html_url)  # noqa: E731
    assert sorted(map(key, again)) == sorted(map(key, listed))
    assert {o.category for o in again} == {"Tech", "Tech/Deep", ""}


@pytest.mark.parametrize(("data", "message"), [
    ((b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>'
      b"<opml><body/></opml>"), "declares entities"),
    ((b'<!DOCTYPE opml [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><opml><body>'
      b'<outline text="&xxe;" xmlUrl="http://x/"/></body></opml>'), "declares entities"),
    (b"<opml><body><outline", "not well-formed XML at line 1"),
    (b"<html><body>hi</body></html>", "root element is <html>"),
    (b"<opml><head/></opml>", "no <body>"),
])
def test_hostile_and_broken_documents(data, message):
    with pytest.raises(OpmlError, match=message):
        parse_opml(data)


def test_limits():
    many = b"<opml><body>" + b"".join(
        b'<outline xmlUrl="http://h%d.example/f"/>' % i for i in range(101)) + b"</body></opml>"
    with pytest.raises(OpmlError, match="more than 100 feeds"):
        parse_opml(many, max_outlines=100)
    assert len(parse_opml(many).outlines) == 101
    with pytest.raises(OpmlError, match="over the 1000-byte limit"):
        parse_opml(many, max_bytes=1000)


def test_hundred_thousand_outlines_parse():
    many = b"<opml><body>" + b"".join(
        b'<outline text="f" xmlUrl="http://h%d.example/f"/>' % i for i in range(100_000)
    ) + b"</body></opml>"
    result = parse_opml(many)
    assert len(result.outlines) == 100_000
    assert result.outlines[-1].url == "http://h99999.example/f"
