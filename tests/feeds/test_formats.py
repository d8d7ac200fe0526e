"""Each format family read into the model, field by field, including the publisher's hints."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from feedmesh.feeds import parse_feed
from feedmesh.model import Enclosure, Person

RSS2 = b"""<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"
     xmlns:content="http://purl.org/rss/1.0/modules/content/"
     xmlns:dc="http://purl.org/dc/elements/1.1/"
     xmlns:sy="http://purl.org/rss/1.0/modules/syndication/"
     xmlns:media="http://search.yahoo.com/mrss/">
<channel>
  <title>News &amp; Views</title>
  <link>http://news.test/</link>
  <description>All the &lt;b&gt;news&lt;/b&gt;</description>
  <language>en-us</language>
  <lastBuildDate>Mon, 04 Mar 2024 10:00:00 GMT</lastBuildDate>
  <managingEditor>editor@news.test (The Editor)</managingEditor>
  <atom:link rel="self" href="http://news.test/rss.xml"/>
  <atom:link rel="hub" href="https://hub.test/"/>
  <ttl>30</ttl>
  <skipHours><hour>0</hour><hour>1</hour><hour>24</hour><hour>99</hour></skipHours>
  <skipDays><day>Saturday</day><day>sunday</day><day>Funday</day></skipDays>
  <sy:updatePeriod>hourly</sy:updatePeriod>
  <sy:updateFrequency>2</sy:updateFrequency>
  <sy:updateBase>2000-01-01T12:00+00:00</sy:updateBase>
  <image><url>/logo.png</url><title>logo</title><link>http://news.test/</link></image>
  <item>
    <title>First &amp;amp; foremost</title>
    <link>http://news.test/1</link>
    <guid isPermaLink="false">urn:news:1</guid>
    <description>&lt;p&gt;Short&lt;/p&gt;</description>
    <content:encoded><![CDATA[<p>Long <a href="/more">more</a></p>]]></content:encoded>
    <pubDate>Mon, 04 Mar 2024 09:00:00 +0100</pubDate>
    <author>jane@news.test (Jane Doe)</author>
    <dc:creator>John Roe</dc:creator>
    <category>Politics</category><category>World</category>
    <enclosure url="http://news.test/a.mp3" type="audio/mpeg" length="1234"/>
    <media:content url="http://news.test/a.jpg" type="image/jpeg"/>
  </item>
  <item>
    <guid>http://news.test/2</guid>
    <description>Second</description>
    <dc:date>2024-03-03T08:00:00Z</dc:date>
  </item>
</channel>
</rss>"""


def test_rss2() -> None:
    parsed = parse_feed(RSS2, url="http://news.test/rss.xml")
    assert parsed.error is None and parsed.encoding == "utf-8"
    feed = parsed.feed
    assert feed.format == "rss2.0"
    assert feed.title == "News & Views"
    assert feed.link == "http://news.test/"
    assert feed.description == "All the <b>news</b>"
    assert feed.language == "en-us"
    assert feed.updated == datetime(2024, 3, 4, 10, tzinfo=UTC)
    assert feed.authors == (Person(name="The Editor", email="editor@news.test"),)
    assert feed.self_link == "http://news.test/rss.xml"
    assert feed.hub_links == ("https://hub.test/",)
    assert feed.ttl_minutes == 30
    assert feed.skip_hours == (0, 1)
    assert feed.skip_days == ("Saturday", "Sunday")
    assert (feed.update_period, feed.update_frequency) == ("hourly", 2)
    assert feed.update_base == datetime(2000, 1, 1, 12, tzinfo=UTC)
    assert feed.icon == "http://news.test/logo.png"

    first, second = parsed.entries
    assert first.guid == first.key == "urn:news:1"
    assert first.title == "First & foremost"
    assert first.link == "http://news.test/1"
    assert first.summary == "<p>Short</p>"
    assert first.content == '<p>Long <a href="http://news.test/more">more</a></p>'
    assert first.published == datetime(2024, 3, 4, 8, tzinfo=UTC)
    assert first.updated is None
    assert first.authors == (Person(name="Jane Doe", email="jane@news.test"),
                             Person(name="John Roe"))
    assert first.categories == ("Politics", "World")
    assert first.enclosures == (Enclosure("http://news.test/a.mp3", "audio/mpeg", 1234),
                                Enclosure("http://news.test/a.jpg", "image/jpeg"))
    assert first.language == "en-us"
    assert len(first.content_hash) == 32
    # a permalink guid doubles as the link; dc:date is the publication date
    assert second.link == "http://news.test/2" and second.key == "http://news.test/2"
    assert second.published == datetime(2024, 3, 3, 8, tzinfo=UTC)


def test_rss091_with_netscape_doctype_and_html_entities() -> None:
    data = b"""<?xml version="1.0" encoding="ISO-8859-1"?>
<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN"
  "http://my.netscape.com/publish/formats/rss-0.91.dtd">
<rss version="0.91"><channel><title>Caf&eacute; &amp; co</title>
<item><title>D&eacute;j&agrave; vu&hellip;</title><link>http://x.test/1</link></item>
</channel></rss>"""
    parsed = parse_feed(data)
    assert parsed.error is None
    assert parsed.feed.format == "rss0.91"
    assert parsed.feed.title == "Café & co"
    assert parsed.entries[0].title == "Déjà vu…"


ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:lang="en">
  <title type="html">The &lt;i&gt;Blog&lt;/i&gt;</title>
  <subtitle>Thoughts &amp; more</subtitle>
  <link href="http://blog.test/"/>
  <link rel="self" href="http://blog.test/atom.xml"/>
  <link rel="hub" href="http://hub.test/"/>
  <updated>2024-03-04T10:00:00+02:00</updated>
  <author><name>Ann</name><email>ann@blog.test</email><uri>/ann</uri></author>
  <icon>/favicon.ico</icon>
  <logo>/logo.png</logo>
  <id>urn:blog</id>
  <entry xml:lang="de">
    <title type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">Ein <b>Titel</b></div></title>
    <id>urn:blog:1</id>
    <link rel="alternate" type="text/html" href="/posts/1"/>
    <link rel="enclosure" href="/a.ogg" type="audio/ogg" length="99"/>
    <published>2024-03-01T00:00:00Z</published>
    <updated>2024-03-02T00:00:00Z</updated>
    <summary>Plain &lt;summary&gt;</summary>
    <content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"
      ><p>Hallo <a href="welt">Welt</a></p></div></content>
    <category term="tech" label="Technology"/>
  </entry>
  <entry>
    <id>urn:blog:2</id>
    <title>Second</title>
    <updated>2024-03-03T00:00:00Z</updated>
    <content type="text">5 &lt; 6</content>
  </entry>
</feed>"""


def test_atom10() -> None:
    parsed = parse_feed(ATOM, url="http://blog.test/atom.xml")
    assert parsed.error is None
    feed = parsed.feed
    assert feed.format == "atom1.0"
    assert feed.title == "The Blog"
    assert feed.description == "Thoughts &amp; more"
    assert feed.link == "http://blog.test/"
    assert feed.self_link == "http://blog.test/atom.xml"
    assert feed.hub_links == ("http://hub.test/",)
    assert feed.updated == datetime(2024, 3, 4, 8, tzinfo=UTC)
    assert feed.authors == (Person("Ann", "ann@blog.test", "http://blog.test/ann"),)
    assert feed.icon == "http://blog.test/favicon.ico"
    assert feed.language == "en"
    first, second = parsed.entries
    assert first.title == "Ein Titel"
    assert first.key == first.guid == "urn:blog:1"
    assert first.link == "http://blog.test/posts/1"
    assert first.enclosures == (Enclosure("http://blog.test/a.ogg", "audio/ogg", 99),)
    assert first.published == datetime(2024, 3, 1, tzinfo=UTC)
    assert first.updated == datetime(2024, 3, 2, tzinfo=UTC)
    assert first.summary == "Plain &lt;summary&gt;"
    assert first.content == '<p>Hallo <a href="http://blog.test/welt">Welt</a></p>'
    assert first.categories == ("tech",)
    assert first.language == "de"
    assert first.authors == feed.authors  # inherited from the feed (RFC 4287 4.2.1)
    assert second.content == "5 &lt; 6"
    assert second.language == "en"


def test_atom03() -> None:
    data = b"""<feed version="0.3" xmlns="http://purl.org/atom/ns#">
      <title>Old</title><tagline>tag</tagline>
      <link rel="alternate" type="text/html" href="http://old.test/"/>
      <modified>2004-01-01T00:00:00Z</modified>
      <entry><title mode="escaped" type="text/html">&lt;b&gt;Hi&lt;/b&gt;</title>
        <id>tag:old,2004:1</id><issued>2003-12-31T00:00:00Z</issued>
        <content type="text/html" mode="base64">PHA+Ym9keTwvcD4=</content></entry>
    </feed>"""
    parsed = parse_feed(data)
    assert parsed.feed.format == "atom0.3"
    assert parsed.feed.description == "tag"
    assert parsed.feed.updated == datetime(2004, 1, 1, tzinfo=UTC)
    entry = parsed.entries[0]
    assert entry.title == "Hi"
    assert entry.content == "<p>body</p>"
    assert entry.published == datetime(2003, 12, 31, tzinfo=UTC)


def test_rss10_rdf() -> None:
    data = b"""<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
         xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="http://rdf.test/"><title>RDF</title><link>http://rdf.test/</link>
    <description>d</description><dc:language>fr</dc:language></channel>
  <item rdf:about="http://rdf.test/1"><title>Un</title><link>http://rdf.test/1</link>
    <dc:date>2024-01-01T00:00:00+01:00</dc:date><dc:creator>Luc</dc:creator>
    <dc:subject>art</dc:subject></item>
  <item rdf:about="urn:rdf:2"><title>Deux</title></item>
</rdf:RDF>"""
    parsed = parse_feed(data)
    assert parsed.feed.format == "rss1.0"
    assert parsed.feed.language == "fr"
    one, two = parsed.entries
    assert one.guid == "http://rdf.test/1"
    assert one.published == datetime(2023, 12, 31, 23, tzinfo=UTC)
    assert one.authors == (Person(name="Luc"),)
    assert one.categories == ("art",)
    assert two.guid == "urn:rdf:2" and two.link == ""


def test_rss090() -> None:
    data = b"""<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
      xmlns="http://my.netscape.com/rdf/simple/0.9/"><channel><title>Old</title>
      <link>http://o.test/</link></channel><item><title>i</title><link>http://o.test/i</link>
      </item></rdf:RDF>"""
    parsed = parse_feed(data)
    assert parsed.feed.format == "rss0.90"
    assert parsed.entries[0].link == "http://o.test/i"


def test_json_feed_11() -> None:
    document = {
        "version": "https://jsonfeed.org/version/1.1", "title": "JSON", "language": "en",
        "home_page_url": "https://json.test/", "feed_url": "https://json.test/feed.json",
        "icon": "/icon.png", "authors": [{"name": "Jo", "url": "mailto:jo@json.test"}],
        "hubs": [{"type": "WebSub", "url": "https://hub.test/"}],
        "items": [
            {"id": 1, "url": "/p/1", "title": "One", "content_html": "<p>x<script>1</script></p>",
             "summary": "s & t", "date_published": "2024-03-01T10:00:00-05:00",
             "date_modified": "2024-03-02T00:00:00Z", "tags": ["a", "b", 3],
             "attachments": [{"url": "/a.mp3", "mime_type": "audio/mpeg",
                              "size_in_bytes": 10}]},
            {"id": "2", "content_text": "plain <text>", "external_url": "https://ext.test/"},
            "not an item",
        ],
    }
    parsed = parse_feed(json.dumps(document).encode())
    assert parsed.error is None
    feed = parsed.feed
    assert feed.format == "json1.1"
    assert feed.link == "https://json.test/"
    assert feed.self_link == "https://json.test/feed.json"
    assert feed.icon == "https://json.test/icon.png"
    assert feed.hub_links == ("https://hub.test/",)
    assert feed.authors == (Person(name="Jo", email="jo@json.test"),)
    one, two = parsed.entries
    assert one.guid == "1" and one.link == "https://json.test/p/1"
    assert one.content == "<p>x</p>"
    assert one.summary == "s &amp; t"
    assert one.published == datetime(2024, 3, 1, 15, tzinfo=UTC)
    assert one.categories == ("a", "b")
    assert one.enclosures == (Enclosure("https://json.test/a.mp3", "audio/mpeg", 10),)
    assert one.authors == feed.authors
    assert two.content == "plain &lt;text&gt;" and two.link == "https://ext.test/"


def test_json_that_is_not_a_feed() -> None:
    parsed = parse_feed(b'{"hello": "world"}')
    assert not parsed.is_feed and "not a JSON Feed" in parsed.error.message


def test_atom_entry_document() -> None:
    parsed = parse_feed(b'<entry xmlns="http://www.w3.org/2005/Atom"><id>x</id>'
                        b"<title>Alone</title></entry>")
    assert parsed.feed.format == "atom1.0"
    assert [e.title for e in parsed.entries] == ["Alone"]
