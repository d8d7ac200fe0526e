"""A private feed rendered with entries written once for every feed that holds them
(:class:`RenderedItems`) is the same bytes as one written whole, in every format served."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import feedparser
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedmesh.hub.front.feed_document import EXTENSIONS, RenderedItems, render_private_feed
from feedmesh.hub.push.messages import webhook_entry
from feedmesh.model import Entry, Person
from feedmesh.store import ReflectedItem, Subscription

SUB = Subscription(id=7, account_id=1, name="", query="people OR time", keep=10, reflector=0,
                   generation=0, created_at=0.0, changed_at=0.0)
FORMATS = sorted(EXTENSIONS.values())


def item(n: int, *, stored_at: float | None = None, title: str | None = None,
         dated: bool = True, authors: tuple[Person, ...] = (), degraded: bool = False,
         source: str = "Feed") -> ReflectedItem:
    entry = Entry(key=f"k{n}", guid=f"g{n}", title=title or f"Entry {n} & <more>",
                  link=f"http://a.test/{n}",
                  published=datetime.fromtimestamp(1.7e9 + n, UTC) if dated else None,
                  summary=f"<p>body of {n}</p>", authors=authors)
    return ReflectedItem(entry_id=n, feed_id=n % 3, feed_url=f"http://f{n % 3}.test/feed",
                         feed_title=source, first_seen_at=1.7e9 + n,
                         stored_at=1.7e9 + n if stored_at is None else stored_at, entry=entry,
                         degraded=degraded)


def render(items: list[ReflectedItem], fmt: str, cache: RenderedItems | None = None,
           sub: Subscription = SUB) -> bytes:
    return render_private_feed(sub, items, fmt, base_url="http://hub.test",
                               self_url="http://hub.test/f/tok.rss", cache=cache)


@pytest.mark.parametrize("fmt", FORMATS)
def test_cached_items_give_the_same_document_in_every_format(fmt):
    cache = RenderedItems()
    undated = item(9, dated=False)  # published_entry dates it: Atom needs no feed date
    written = item(5, authors=(Person(name="Ann", email="ann@a.test"),))
    feeds = [[item(4), item(3), undated], [written, item(4), item(2)],
             [item(4), item(3)], []]
    for feed in feeds + feeds:  # the second round is served from the cache
        assert render(feed, fmt, cache) == render(feed, fmt)
    assert cache.misses == 5 and cache.hits == 11  # five entries, 16 items
    # The same entries in another subscription's feed: its own title, the shared items.
    other = Subscription(id=8, account_id=2, name="mine", query="world", keep=10, reflector=0,
                         generation=0, created_at=0.0, changed_at=0.0)
    assert render(feeds[0], fmt, cache, other) == render(feeds[0], fmt, None, other)
    assert cache.misses == 5


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_changed_entry_or_source_is_written_anew(fmt):
    cache = RenderedItems()
    render([item(1)], fmt, cache)
    changed = item(1, stored_at=1.8e9, title="Edited")  # a changed entry is stored anew
    assert render([changed], fmt, cache) == render([changed], fmt)
    assert b"Edited" in render([changed], fmt, cache)
    for variant in (item(1, degraded=True), item(1, source="Renamed")):
        assert render([variant], fmt, cache) == render([variant], fmt)
    assert cache.misses == 4


def test_the_cache_keeps_to_its_size_dropping_the_least_recently_used():
    cache = RenderedItems(max_chars=2_000)
    for n in range(50):
        render([item(n)], "rss2.0", cache)
        assert cache.chars <= 2_000
    render([item(49)], "rss2.0", cache)
    assert cache.hits == 1  # the newest is kept
    render([item(0)], "rss2.0", cache)
    assert cache.misses == 51  # the oldest was dropped


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 30), max_size=12, unique=True),
       st.sampled_from(FORMATS), st.text(max_size=20))
def test_any_feed_renders_the_same_with_the_cache(numbers, fmt, title):
    cache = RenderedItems()
    feed = [item(n, title=title or None, dated=n % 4 != 0) for n in numbers]
    assert render(feed, fmt, cache) == render(feed, fmt)
    assert render(feed, fmt, cache) == render(feed, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_entry_has_an_id_of_its_own_in_each_feed_and_keeps_it(fmt):
    """Readers key items by id across feeds (issue 33, item 5): an entry two subscriptions hold
    has two ids, each the same on every render, cached or whole, and in the webhook's JSON."""
    other = Subscription(id=8, account_id=1, name="", query="people", keep=10, reflector=0,
                         generation=0, created_at=1.7e9 + 0.25, changed_at=0.0)
    items = [item(n) for n in (3, 2, 1)]
    cache = RenderedItems()

    def ids(sub: Subscription, cache: RenderedItems | None) -> list[str]:
        body = render(items, fmt, cache, sub=sub)
        if fmt == "json1.1":
            return [i["id"] for i in json.loads(body)["items"]]
        return [e.id for e in feedparser.parse(body).entries]

    mine, theirs = ids(SUB, cache), ids(other, cache)
    assert len(set(mine)) == len(set(theirs)) == 3 and not set(mine) & set(theirs)
    assert ids(SUB, None) == ids(SUB, cache) == mine  # a cache hit writes the feed's own id
    assert ids(other, RenderedItems()) == theirs
    # entry-<n>.<16 hex digits>: nothing in it counts subscriptions.
    assert all(re.fullmatch(r"tag:feedmesh,2026:entry-\d+\.[0-9a-f]{16}", i) for i in mine)
    assert [webhook_entry(i, SUB)["id"] for i in items] == mine
    # The same subscription made at another instant (another hub, or re-created) differs.
    again = Subscription(id=7, account_id=1, name="", query="people OR time", keep=10,
                         reflector=0, generation=3, created_at=1.0, changed_at=5.0)
    assert not set(ids(again, None)) & set(mine)
