"""The writers' exact output, byte for byte, in every format: a change to a writer that changes a
byte shows here (the farm's documents, their ETags and the reflector's feeds all depend on them).

The expected documents are ``data/render/<case>.<format>``, written by the writers as they were
when this test was added. If a change is meant to alter the output, look at the diff of the data
files, then regenerate them: ``.venv/bin/python -m tests.feeds.test_render_bytes``.

The cases cover every field the writers read: feed hints (ttl, skips, sy:*), hubs, icons, several
authors of every shape, enclosures with and without type and length, categories, sources of every
shape (none, a title, a title and URL, a title with an empty URL), guids that are links, tags,
plain strings and absent, dates aware, naive, with microseconds and missing, and text with markup,
entities, quotes, CDATA ends, control characters XML forbids, non-characters, emoji, CJK,
right-to-left and combining characters.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from feedmesh.feeds.render import FORMATS, render_feed
from feedmesh.model import Enclosure, Entry, FeedInfo, Person

DATA = Path(__file__).parent / "data" / "render"

ODD = ("5 < 6 & 7 > 3, \"double\" 'single' ]]> &amp; &lt;b&gt; "
       "\x00\x01\x08\x0b\x0c\x1f\ud800\ufffe\uffff\udfff")
WORLD = "Café Zürich ☕ 🚀 日本語のフィード עברית مرحبا e\u0301 \u200b\u00a0end"

FULL_FEED = FeedInfo(
    format="rss2.0", title=f"Tom & Jerry's <News> {WORLD}", link="https://example.org/site/?a=1&b=2",
    description="<p>All the \"news\" &amp; <em>views</em></p>", language="en-GB",
    updated=datetime(2024, 3, 1, 12, 30, 15, 250_000, tzinfo=UTC),
    authors=(Person(name="Desk & Co", email="desk@example.org", uri="https://example.org/desk"),
             Person(name="Second")),
    self_link="https://example.org/feeds/1?format=x&y=\"z\"",
    hub_links=("https://hub.example.org/", "https://pubsubhubbub.example/?q=<1>"),
    ttl_minutes=45, skip_hours=(0, 1, 23), skip_days=("Saturday", "Sunday"),
    update_period="hourly", update_frequency=3, icon="https://example.org/icon.png?s=16&t=1")

BARE_FEED = FeedInfo(title="Bare", self_link="http://127.0.0.1:8080/feeds/2",
                     updated=datetime(2001, 1, 1, 0, 0, 0))  # noqa: DTZ001 - naive: taken as UTC

EMAIL_ONLY_FEED = FeedInfo(title="", link="", description="", language="fr",
                           authors=(Person(email="only@example.org"),),
                           update_frequency=1, ttl_minutes=0)

EST = timezone(timedelta(hours=-5))
IST = timezone(timedelta(hours=5, minutes=30))

ENTRIES = [
    # Every field; the guid is the link (RSS isPermaLink="true"); an aware non-UTC date.
    Entry(key="k-full", guid="https://example.org/posts/1?x=1&y=2",
          title=f"Full entry: {ODD}", link="https://example.org/posts/1?x=1&y=2",
          published=datetime(2024, 2, 29, 23, 59, 59, tzinfo=EST),
          updated=datetime(2024, 3, 1, 6, 0, 0, 123_456, tzinfo=IST),
          authors=(Person(name="Ann O'Neil", email="ann@example.org", uri="https://ann.example"),
                   Person(email="bob@example.org"), Person(name="Çağrı 🙂"), Person()),  # noqa: RUF001
          summary="<p>Hello &amp; <em>welcome</em> to <a href=\"https://e.org/?a=1&amp;b=2\">x</a></p>",
          content=f"<p>Full <strong>text</strong> {WORLD}</p><pre>\tindented\r\nline</pre>",
          enclosures=(Enclosure(url="https://cdn.example.org/a b.mp3?x=1&y=2", type="audio/mpeg",
                                length=123_456_789),
                      Enclosure(url="https://cdn.example.org/b.bin"),
                      Enclosure(url="https://cdn.example.org/c.png", type="image/png", length=0)),
          categories=("law & order", "<tag>", "\"quoted\"", "日本"), language="fr-CA"),
    # A tag URI guid (an IRI, kept), a link that differs, no title but a summary.
    Entry(key="k-tag", guid="tag:example.org,2024:entry/2", link="http://example.org/2",
          summary="<p>Only a summary, no title</p>",
          published=datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC)),
    # A guid that is not an IRI (wrapped in a URN), no link, no dates, summary == content.
    Entry(key="k-plain", guid="my id / 42 ?&", title="Same summary and content",
          summary="<p>same</p>", content="<p>same</p>", categories=("",)),
    # No guid and no link: the stable key is the id. Content only; updated without published.
    Entry(key="sha256:abcdef0123456789", title=WORLD, content="<ul><li>one</li></ul>",
          updated=datetime(2024, 3, 1, 12, 0, 0, 1)),  # noqa: DTZ001 - naive, one microsecond
    # A guid that is an http link but not the entry's link (isPermaLink="false").
    Entry(key="k-other", guid="http://example.org/elsewhere", link="http://example.org/here",
          title="Guid elsewhere", published=datetime(2024, 1, 1, tzinfo=UTC),
          authors=(Person(name="Name only"),), enclosures=(Enclosure(url="http://e.org/v.mp4",
                                                                      type="video/mp4"),)),
    # Nothing but the key.
    Entry(key="k-empty"),
]

SOURCES = ["Source title only", ("Source & title", "https://source.example.org/feed?a=1&b=2"),
           ("Title, empty URL", ""), None, ("日本のソース", "http://127.0.0.1/src"), None]

CASES = {
    "full_sources": (FULL_FEED, ENTRIES, SOURCES),
    "full": (FULL_FEED, ENTRIES, None),
    "bare": (BARE_FEED, ENTRIES[3:], None),
    "email_only": (EMAIL_ONLY_FEED, ENTRIES[:2], [None, "x"]),
    "empty": (BARE_FEED, [], None),
}


def rendered(case: str, fmt: str) -> bytes:
    feed, entries, sources = CASES[case]
    return render_feed(feed, entries, fmt, source_titles=sources)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_output_is_byte_identical(case: str, fmt: str) -> None:
    expected = (DATA / f"{case}.{fmt}").read_bytes()
    assert rendered(case, fmt) == expected


def test_every_expected_file_is_a_case() -> None:
    assert sorted(p.name for p in DATA.iterdir() if p.name != ".gitattributes") == sorted(
        f"{case}.{fmt}" for case in CASES for fmt in FORMATS)


def regenerate() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        for fmt in FORMATS:
            (DATA / f"{case}.{fmt}").write_bytes(rendered(case, fmt))


if __name__ == "__main__":
    regenerate()
    sys.exit(0)
