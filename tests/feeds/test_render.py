"""The writers produce valid documents in every format, checked by independent readers.

XML formats: lxml (well-formedness, exact element text) and feedparser (a feed reader's view:
no bozo, the right version, the fields read back). JSON Feed: the JSON Feed 1.0/1.1 spec's rules,
checked field by field (no independent JSON Feed reader is installed).
"""

from __future__ import annotations

import calendar
import json
import re
from datetime import UTC, datetime, timedelta, timezone

import feedparser
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from feedmesh.feeds.render import (
    CONTENT_TYPES,
    FORMATS,
    render_feed,
    rfc822_date,
    rfc3339_date,
    writer_for,
)
from feedmesh.model import Enclosure, Entry, FeedInfo, Person

XML_FORMATS = [f for f in FORMATS if not f.startswith("json")]
JSON_FORMATS = [f for f in FORMATS if f.startswith("json")]
FEEDPARSER_VERSION = {"rss0.91": "rss091u", "rss2.0": "rss20", "rss1.0": "rss10",
                      "atom1.0": "atom10"}
RFC822 = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|"
                    r"Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$")
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")

FEED = FeedInfo(
    title="Tom & Jerry's <News>", link="http://127.0.0.1:8080/site/",
    description="All the \"news\"",
    language="en-gb", updated=datetime(2024, 3, 1, 12, 30, tzinfo=UTC),
    authors=(Person(name="Desk", email="desk@example.org"),),
    self_link="http://127.0.0.1:8080/feeds/1", hub_links=("http://127.0.0.1:8080/hub",),
    ttl_minutes=30, skip_hours=(0, 1, 2), skip_days=("Sunday",), update_period="hourly",
    update_frequency=2)


def entries(count: int = 10) -> list[Entry]:
    out = []
    for i in range(count):
        link = f"http://127.0.0.1:8080/posts/{i}?a=1&b=2"
        out.append(Entry(
            key=f"k{i}", guid=link if i % 2 else f"tag:example.org,2024:{i}",
            title=f"Café {i}: 5 < 6 & \"quotes\" ]]> \x01", link=link,
            published=datetime(2024, 3, 1, 11, i, 7, tzinfo=UTC),
            updated=datetime(2024, 3, 1, 11, i, 9, tzinfo=UTC) if i % 3 == 0 else None,
            authors=(Person(name=f"Ann {i}", email=f"ann{i}@example.org"),),
            summary=f"<p>Hello &amp; <em>welcome</em> {i}</p>",
            content=f"<p>Full <strong>text</strong> {i}</p>" if i % 2 else "",
            categories=("law", "internet"),
            enclosures=(Enclosure(url=f"http://127.0.0.1:8080/m/{i}.mp3", type="audio/mpeg",
                                  length=1000 + i),)))
    return out


ENTRIES = entries()
SOURCES = [("Origin feed", "http://127.0.0.1:8080/origin.xml")] * 10


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_xml_formats_are_well_formed_and_read_back(fmt):
    body = render_feed(FEED, ENTRIES, fmt)
    etree.fromstring(body)  # raises if not well-formed
    parsed = feedparser.parse(body)
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == FEEDPARSER_VERSION[fmt]
    assert parsed.feed.title == FEED.title
    assert len(parsed.entries) == len(ENTRIES)
    for entry, original in zip(parsed.entries, ENTRIES, strict=True):
        assert entry.title == original.title.replace("\x01", "").strip()  # readers strip
        assert entry.link == original.link
        if fmt != "rss0.91":  # 0.91 items have no id and no date
            assert entry.id == original.guid
            stamp = entry.get("published_parsed") or entry.get("updated_parsed")
            assert calendar.timegm(stamp) == int(original.published.timestamp())
        assert "welcome" in entry.summary and "<em>" in entry.summary


@pytest.mark.parametrize("fmt", ["rss2.0", "atom1.0"])
def test_rich_fields_read_back(fmt):
    parsed = feedparser.parse(render_feed(FEED, ENTRIES, fmt))
    links = parsed.feed.links
    assert any(link.get("rel") == "self" and link.href == FEED.self_link for link in links)
    assert any(link.get("rel") == "hub" and link.href == FEED.hub_links[0] for link in links)
    for entry, original in zip(parsed.entries, ENTRIES, strict=True):
        assert [t.term for t in entry.tags] == list(original.categories)
        assert entry.enclosures[0].href == original.enclosures[0].url
        assert entry.enclosures[0].type == "audio/mpeg"
        assert int(entry.enclosures[0].length) == original.enclosures[0].length
        assert original.authors[0].name in entry.author
        if original.content:
            assert "<strong>text</strong>" in entry.content[0].value


def test_rss20_channel_hints_and_dates():
    root = etree.fromstring(render_feed(FEED, ENTRIES, "rss2.0"))
    channel = root.find("channel")
    assert channel.findtext("ttl") == "30"
    assert [h.text for h in channel.findall("skipHours/hour")] == ["0", "1", "2"]
    assert [d.text for d in channel.findall("skipDays/day")] == ["Sunday"]
    sy = "{http://purl.org/rss/1.0/modules/syndication/}"
    assert channel.findtext(f"{sy}updatePeriod") == "hourly"
    assert channel.findtext(f"{sy}updateFrequency") == "2"
    assert RFC822.match(channel.findtext("lastBuildDate"))
    for item in channel.findall("item"):
        assert RFC822.match(item.findtext("pubDate"))
    parsed = feedparser.parse(render_feed(FEED, ENTRIES, "rss2.0"))
    assert parsed.feed.ttl == "30" and parsed.feed.sy_updateperiod == "hourly"


def test_guid_is_permalink_only_when_it_is_the_link():
    items = etree.fromstring(render_feed(FEED, ENTRIES, "rss2.0")).findall("channel/item")
    for item, original in zip(items, ENTRIES, strict=True):
        guid = item.find("guid")
        expected = "true" if original.guid == original.link else "false"
        assert guid.get("isPermaLink") == expected and guid.text == original.guid
    bare = Entry(key="local-key-1", title="no guid, no link")
    item = etree.fromstring(render_feed(FEED, [bare], "rss2.0")).find("channel/item")
    assert item.find("guid").text == "local-key-1"
    assert item.find("guid").get("isPermaLink") == "false"


@pytest.mark.parametrize("fmt", ["rss1.0", "atom1.0"])
def test_dates_are_rfc3339_in_rdf_and_atom(fmt):
    body = render_feed(FEED, ENTRIES, fmt).decode()
    found = re.findall(r"<(?:dc:date|published|updated)>([^<]+)<", body)
    assert found and all(RFC3339.match(value) for value in found)


def test_atom_ids_author_fallback_and_updated():
    anonymous = [Entry(key="k", guid="12345", title="t",
                       published=datetime(2024, 1, 1, tzinfo=UTC))]
    feed = FeedInfo(title="No authors", link="http://127.0.0.1/x")
    root = etree.fromstring(render_feed(feed, anonymous, "atom1.0"))
    ns = "{http://www.w3.org/2005/Atom}"
    assert root.find(f"{ns}author/{ns}name").text == "No authors"  # feed-level author required
    assert root.findtext(f"{ns}updated") == "2024-01-01T00:00:00Z"  # newest entry
    entry = root.find(f"{ns}entry")
    assert entry.findtext(f"{ns}id") == "urn:feedmesh:entry:12345"  # ids must be IRIs
    assert entry.findtext(f"{ns}updated") == "2024-01-01T00:00:00Z"  # falls back to published
    assert not feedparser.parse(render_feed(feed, anonymous, "atom1.0")).bozo


def test_rss10_items_table_and_mod_enclosure():
    root = etree.fromstring(render_feed(FEED, ENTRIES, "rss1.0"))
    rdf = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
    seq = [li.get(f"{rdf}resource") for li in root.iter(f"{rdf}li")]
    items = [i.get(f"{rdf}about") for i in root.iter("{http://purl.org/rss/1.0/}item")]
    assert seq == items == [e.guid for e in ENTRIES]
    enc = root.find(".//{http://purl.oclc.org/net/rss_2.0/enc#}enclosure")
    assert enc.get(f"{rdf}resource") == ENTRIES[0].enclosures[0].url


def check_json_feed(doc: dict, version: str) -> None:
    """The JSON Feed spec's rules (https://jsonfeed.org/version/1 and /1.1)."""
    assert doc["version"] == {"1.0": "https://jsonfeed.org/version/1",
                              "1.1": "https://jsonfeed.org/version/1.1"}[version]
    assert isinstance(doc["title"], str) and isinstance(doc["items"], list)
    for key in ("home_page_url", "feed_url", "description", "icon"):
        assert isinstance(doc.get(key, ""), str)
    ids = [item["id"] for item in doc["items"]]
    assert all(isinstance(i, str) and i for i in ids)
    for item in doc["items"]:
        assert "content_html" in item or "content_text" in item
        for key in ("date_published", "date_modified"):
            if key in item:
                assert RFC3339.match(item[key]) and datetime.fromisoformat(item[key])
        for attachment in item.get("attachments", []):
            assert attachment["url"] and attachment["mime_type"]
        if version == "1.1" and "authors" in item:
            assert isinstance(item["authors"], list)
            assert all("name" in a or "url" in a for a in item["authors"])
        assert isinstance(item.get("tags", []), list)
        assert "<" not in item.get("summary", "")  # summary is plain text


@pytest.mark.parametrize("fmt", JSON_FORMATS)
def test_json_feed_follows_the_spec(fmt):
    body = render_feed(FEED, ENTRIES, fmt, source_titles=SOURCES)
    doc = json.loads(body)
    check_json_feed(doc, fmt[4:])
    assert doc["feed_url"] == FEED.self_link and doc["hubs"][0]["url"] == FEED.hub_links[0]
    assert doc["_feedmesh"]["ttl_minutes"] == 30 and doc["_feedmesh"]["skip_hours"] == [0, 1, 2]
    first = doc["items"][0]
    assert first["title"] == ENTRIES[0].title.replace("\x01", "")
    assert first["content_html"] == ENTRIES[0].summary
    assert first["date_published"] == "2024-03-01T11:00:07Z"
    assert first["_feedmesh"] == {"source_title": "Origin feed", "source_url": SOURCES[0][1]}
    second = doc["items"][1]
    assert second["content_html"] == ENTRIES[1].content and second["summary"] == "Hello & welcome 1"
    assert ("authors" in first) == (fmt == "json1.1") and first["author"]["name"] == "Ann 0"


def test_source_titles_in_rss_and_atom():
    rss = etree.fromstring(render_feed(FEED, ENTRIES, "rss2.0", source_titles=SOURCES))
    source = rss.find("channel/item/source")
    assert (source.text, source.get("url")) == SOURCES[0]
    atom = etree.fromstring(render_feed(FEED, ENTRIES, "atom1.0",
                                        source_titles=["Plain title"] * 10))
    ns = "{http://www.w3.org/2005/Atom}"
    assert atom.find(f"{ns}entry/{ns}source/{ns}title").text == "Plain title"
    assert not feedparser.parse(render_feed(FEED, ENTRIES, "atom1.0", source_titles=SOURCES)).bozo
    with pytest.raises(ValueError, match="2 items for 10 entries"):
        render_feed(FEED, ENTRIES, "rss2.0", source_titles=SOURCES[:2])


def test_unknown_format_names_the_known_ones():
    with pytest.raises(ValueError, match=r"rss2\.0"):
        render_feed(FEED, ENTRIES, "rss3")


def test_date_helpers():
    naive = datetime(2003, 6, 10, 4, 0, 0)  # noqa: DTZ001 - a naive date is taken as UTC
    assert rfc822_date(naive) == "Tue, 10 Jun 2003 04:00:00 GMT"
    shifted = datetime(2003, 6, 10, 6, 0, 0, 250000, tzinfo=timezone(timedelta(hours=2)))
    assert rfc3339_date(shifted) == "2003-06-10T04:00:00.250000Z"
    assert rfc822_date(shifted) == "Tue, 10 Jun 2003 04:00:00 GMT"


def test_writer_parts_compose_the_document():
    writer = writer_for("atom1.0")
    items = [writer.item(e, FEED) for e in ENTRIES]
    text = writer.head(FEED, ENTRIES) + writer.separator.join(items) + writer.tail(FEED)
    assert text.encode() == render_feed(FEED, ENTRIES, "atom1.0")
    assert writer.content_type == CONTENT_TYPES["atom1.0"]


def test_empty_feed_is_valid_in_every_format():
    bare = FeedInfo(title="Empty")
    for fmt in XML_FORMATS:
        etree.fromstring(render_feed(bare, [], fmt))
    for fmt in JSON_FORMATS:
        check_json_feed(json.loads(render_feed(bare, [], fmt)), fmt[4:])


@settings(max_examples=150, deadline=None)
@given(title=st.text(max_size=40), summary=st.text(max_size=80), fmt=st.sampled_from(FORMATS))
def test_any_text_is_escaped_into_a_valid_document(title, summary, fmt):
    entry = Entry(key="k", guid="tag:x,2024:1", title=title, link="http://127.0.0.1/a",
                  summary=summary, published=datetime(2024, 1, 1, tzinfo=UTC))
    body = render_feed(FeedInfo(title=title, link="http://127.0.0.1/"), [entry], fmt)
    clean = re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]", "", title)
    if fmt.startswith("json"):
        doc = json.loads(body)
        assert doc["title"] == clean and doc["items"][0].get("title", "") == clean
        return
    root = etree.fromstring(body)
    texts = [el.text or "" for el in root.iter() if isinstance(el.tag, str)
             and etree.QName(el).localname == "title"]
    # XML parsers normalize CR and CRLF line ends to LF.
    assert clean.replace("\r\n", "\n").replace("\r", "\n") in texts


ARCHIVED = msgspec.structs.replace(FEED, prev_archive="http://127.0.0.1:8080/feeds/1/archive/7",
                                   current_link="http://127.0.0.1:8080/feeds/1", archive=True)
FH = "http://purl.org/syndication/history/1.0"


@pytest.mark.parametrize(("fmt", "link"), [("rss2.0", "{http://www.w3.org/2005/Atom}link"),
                                           ("rss1.0", "{http://www.w3.org/2005/Atom}link"),
                                           ("atom1.0", "{http://www.w3.org/2005/Atom}link")])
def test_rfc5005_links_and_archive_marker_in_xml(fmt, link):
    """An archive page (RFC 5005 section 4) names its older page (``prev-archive``) and the
    feed it belongs to (``current``), and says it is one (``fh:archive``, namespaced)."""
    root = etree.fromstring(render_feed(ARCHIVED, entries(2), fmt))
    links = {e.get("rel"): e.get("href") for e in root.iter(link)}
    assert links["prev-archive"] == ARCHIVED.prev_archive
    assert links["current"] == ARCHIVED.current_link
    assert len(list(root.iter(f"{{{FH}}}archive"))) == 1
    assert not feedparser.parse(render_feed(ARCHIVED, entries(2), fmt)).bozo
    plain = etree.fromstring(render_feed(FEED, entries(2), fmt))
    if fmt == "atom1.0":  # one logical feed: the archive page has the current feed's id
        current = msgspec.structs.replace(FEED, self_link=ARCHIVED.current_link)
        assert root.findtext("{http://www.w3.org/2005/Atom}id") == etree.fromstring(
            render_feed(current, [], fmt)).findtext("{http://www.w3.org/2005/Atom}id")
    assert not list(plain.iter(f"{{{FH}}}archive"))
    assert {e.get("rel") for e in plain.iter(link)} & {"prev-archive", "current"} == set()


@pytest.mark.parametrize("fmt", JSON_FORMATS)
def test_json_feed_pages_back_by_next_url(fmt):
    """JSON Feed's paging field is ``next_url`` ("the next n items": older ones), never the
    feed's own URL; the archive marker and the current feed go in the ``_feedmesh`` object."""
    doc = json.loads(render_feed(ARCHIVED, entries(2), fmt))
    assert doc["next_url"] == ARCHIVED.prev_archive != doc["feed_url"]
    assert doc["_feedmesh"]["archive"] is True
    assert doc["_feedmesh"]["current_url"] == ARCHIVED.current_link
    plain = json.loads(render_feed(FEED, entries(2), fmt))
    assert "next_url" not in plain and "archive" not in plain["_feedmesh"]
