"""A private feed carries no date later than when the hub first saw its entries, in any format:
an entry dated 6.5 hours ahead would otherwise sit on top of every reader's list, and push the
feed's own Atom ``<updated>`` and JSON Feed ``date_modified`` into the future too."""

from __future__ import annotations

import calendar
import json
from datetime import UTC, datetime, timedelta

import feedparser
import pytest

from feedmesh.feeds.render import render_feed
from feedmesh.hub.web.feeds import published_entry
from feedmesh.model import Entry, FeedInfo
from feedmesh.store import ReflectedItem

SEEN = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def item(n: int, published: datetime | None, updated: datetime | None) -> ReflectedItem:
    return ReflectedItem(entry_id=n, feed_id=1, feed_url="http://x/f", feed_title="X",
                         first_seen_at=SEEN.timestamp(), stored_at=SEEN.timestamp() + 1,
                         entry=Entry(key=str(n), title=f"t{n}", link=f"http://x/{n}",
                                     published=published, updated=updated))


ITEMS = [item(1, SEEN + timedelta(hours=6.5), SEEN + timedelta(hours=7)),
         item(2, None, SEEN + timedelta(days=400)),
         item(3, SEEN - timedelta(hours=1), None)]


@pytest.mark.parametrize("fmt", ["rss2.0", "atom1.0", "json1.1"])
def test_no_date_in_a_served_feed_is_in_the_future(fmt):
    entries = [published_entry(i) for i in ITEMS]
    body = render_feed(FeedInfo(title="mine", link="http://hub/"), entries, fmt)
    if fmt == "json1.1":
        doc = json.loads(body)
        dates = [doc.get("date_modified")] + [d for i in doc["items"]
                                              for d in (i.get("date_published"),
                                                        i.get("date_modified"))]
        stamps = [datetime.fromisoformat(d.replace("Z", "+00:00")) for d in dates if d]
    else:
        parsed = feedparser.parse(body)
        structs = [parsed.feed.get("updated_parsed")] + [
            e.get(k) for e in parsed.entries for k in ("published_parsed", "updated_parsed")]
        stamps = [datetime.fromtimestamp(calendar.timegm(s), UTC) for s in structs if s]
    assert len(stamps) >= 3
    assert max(stamps) <= SEEN, (fmt, max(stamps))
    assert min(stamps) == SEEN - timedelta(hours=1)  # a date in the past is kept as it is
