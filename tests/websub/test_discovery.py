"""Discovery (WebSub section 4), table-driven: Link headers, feed links, HTML links, priority."""

from __future__ import annotations

import pytest

from feedmesh.feeds import parse_feed
from feedmesh.websub.discovery import MAX_HUBS, discover, html_links, parse_link_header

URL = "http://pub.test/feed"

ATOM = b"""<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
<link rel="hub" href="http://hub.test/atom"/><link rel="self" href="http://pub.test/atom-self"/>
<entry><id>1</id><title>x</title></entry></feed>"""
RSS = b"""<?xml version="1.0"?><rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom">
<channel><title>t</title><link>http://pub.test/</link>
<atom:link rel="hub" href="http://hub.test/rss"/><atom:link rel="self" href="/rss-self"/>
<item><guid>1</guid><title>x</title></item></channel></rss>"""
JSON = (b'{"version": "https://jsonfeed.org/version/1.1", "title": "t", '
        b'"feed_url": "http://pub.test/json-self", "hubs": [{"type": "WebSub", '
        b'"url": "http://hub.test/json"}], "items": [{"id": "1", "title": "x"}]}')
HTML = b"""<!doctype html><html><head><title>p</title>
<link rel="hub" href="http://hub.test/html"><link rel="self" href="http://pub.test/page-self">
<link rel="stylesheet" href="/s.css"></head><body>hello</body></html>"""
PLAIN_ATOM = b"""<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
<entry><id>1</id><title>x</title></entry></feed>"""


def _info(body: bytes):
    return parse_feed(body, url=URL).feed


@pytest.mark.parametrize(("value", "expected"), [
    ('<http://hub.test/>; rel="hub", <http://pub.test/self>; rel="self"',
     [("http://hub.test/", {"hub"}), ("http://pub.test/self", {"self"})]),
    ('<http://hub.test/a>; rel=hub', [("http://hub.test/a", {"hub"})]),
    ('</rel/hub>; rel="hub self"', [("http://pub.test/rel/hub", {"hub", "self"})]),
    ('<http://x.test/>; title="a, b"; rel="hub"', [("http://x.test/", {"hub"})]),
    ('<ftp://x.test/>; rel="hub", <javascript:alert(1)>; rel="self"', []),
    ("garbage, <unterminated", []),
    ('<http://x.test/>', []),  # no rel: nothing to say
])
def test_link_headers_are_read_leniently(value, expected):
    got = [(url, set(rels)) for url, rels in parse_link_header(value, URL)]
    assert got == expected


@pytest.mark.parametrize(("case", "kwargs", "topic", "hubs", "source"), [
    # websub.rocks 100: HTTP header discovery
    ("100 header", {"link_header": '<http://hub.test/h>; rel="hub", '
                                    '<http://pub.test/h-self>; rel="self"'},
     "http://pub.test/h-self", ("http://hub.test/h",), "header"),
    # 101: HTML tag discovery
    ("101 html", {"html": HTML}, "http://pub.test/page-self", ("http://hub.test/html",),
     "document"),
    # 102: Atom feed discovery
    ("102 atom", {"info": ATOM}, "http://pub.test/atom-self", ("http://hub.test/atom",),
     "document"),
    # 103: RSS feed discovery (atom:link, a relative self)
    ("103 rss", {"info": RSS}, "http://pub.test/rss-self", ("http://hub.test/rss",),
     "document"),
    ("json feed hubs", {"info": JSON}, "http://pub.test/json-self", ("http://hub.test/json",),
     "document"),
    # 104: discovery priority: the header wins over the document
    ("104 priority", {"link_header": '<http://hub.test/h>; rel="hub"', "info": ATOM},
     URL, ("http://hub.test/h",), "header"),
    ("no hub", {"info": PLAIN_ATOM}, URL, (), ""),
    ("self without hub", {"link_header": '<http://pub.test/s>; rel="self"'},
     "http://pub.test/s", (), ""),
])
def test_discovery_follows_the_websub_rocks_cases(case, kwargs, topic, hubs, source):
    if "info" in kwargs:
        kwargs["info"] = _info(kwargs["info"])
    found = discover(URL, **kwargs)
    assert (found.topic, found.hubs, found.source) == (topic, hubs, source), case


def test_a_long_hub_list_is_cut_and_duplicates_go():
    header = ", ".join(f'<http://hub{i % 6}.test/>; rel="hub"' for i in range(50))
    found = discover(URL, link_header=header)
    assert found.hubs == tuple(f"http://hub{i}.test/" for i in range(MAX_HUBS))


def test_html_links_survive_garbage():
    assert html_links(b"<link rel=hub href=http://h.test/><<<\x00\xff<link", URL) == [
        ("http://h.test/", frozenset({"hub"}))]
