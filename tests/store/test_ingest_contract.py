"""What every IngestStore must do (:mod:`feedmesh.store.ports`): atomic intents, dedup inside
the transaction, entry ids in commit order, restarts. Run against each implementation
(tests/store/conftest.py)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import msgspec

from feedmesh.fetch import FeedFetchState
from feedmesh.model import Entry, FeedInfo
from feedmesh.store import FeedUpdate


def entry(n: int, content: str = "") -> Entry:
    return Entry(key=f"guid-{n}", content_hash=f"h{n}{content}", title=f"post {n}",
                 published=datetime(2026, 11, 1, tzinfo=UTC))


def test_add_feeds_is_idempotent_and_ordered(ingest):
    rows = ingest.add_feeds(["http://a/1", "http://b/2", "http://a/1", " "], now=10.0)
    assert [r.source_url for r in rows] == ["http://a/1", "http://b/2"]
    again = ingest.add_feeds(["http://b/2"], now=20.0)
    assert again[0].id == rows[1].id and again[0].added_at == 10.0
    assert rows[0].state == FeedFetchState(url="http://a/1")


def test_apply_stores_new_then_only_changes(ingest):
    (feed,) = ingest.add_feeds(["http://a/1"], now=0.0)
    state = msgspec.structs.replace(feed.state, etag='"v1"', doc_hash=42)
    out = ingest.apply([FeedUpdate(feed_id=feed.id, state=state, seen_at=100.0,
                                  info=FeedInfo(title="A"), entries=(entry(1), entry(2)),
                                  backlog=True)])
    assert [(i.entry.key, i.updated, i.first_seen_at) for i in out] == [
        ("guid-1", False, 100.0), ("guid-2", False, 100.0)]
    out = ingest.apply([FeedUpdate(feed_id=feed.id, state=state, seen_at=200.0,
                                  entries=(entry(1), entry(2, "edited"), entry(3)))])
    assert [(i.entry.key, i.updated) for i in out] == [("guid-3", False), ("guid-2", True)]
    assert out[1].first_seen_at == 100.0  # an edit keeps the entry's first sighting
    assert ingest.entry_count() == 3
    row = ingest.feed(feed.id)
    assert row.state.etag == '"v1"' and row.title == "A" and row.info.title == "A"
    postings = ingest.postings(feed.id)
    assert [(p.first_seen_at, p.backlog) for p in postings] == [(100.0, True), (100.0, True),
                                                                 (200.0, False)]
    assert postings[0].published == datetime(2026, 11, 1, tzinfo=UTC).timestamp()


def test_intents_of_one_feed_in_one_batch_apply_one_after_the_other(ingest):
    (feed,) = ingest.add_feeds(["http://a/1"], now=0.0)
    first = msgspec.structs.replace(feed.state, etag='"1"')
    second = msgspec.structs.replace(feed.state, etag='"2"')
    out = ingest.apply([
        FeedUpdate(feed_id=feed.id, state=first, seen_at=1.0, info=FeedInfo(title="A"),
                   entries=(entry(1), entry(2))),
        FeedUpdate(feed_id=feed.id, state=second, seen_at=2.0,
                   entries=(entry(1), entry(2, "edited"), entry(3), entry(4, "")))])
    assert [(i.entry.key, i.updated, i.first_seen_at) for i in out] == [
        ("guid-1", False, 1.0), ("guid-2", False, 1.0), ("guid-3", False, 2.0),
        ("guid-4", False, 2.0), ("guid-2", True, 1.0)]
    assert out[1].id == out[4].id and [i.id for i in out[:4]] == sorted(i.id for i in out[:4])
    row = ingest.feed(feed.id)
    assert row.state.etag == '"2"' and row.title == "A"
    assert [e.entry for e in ingest.entries(feed.id)] == [entry(4, ""), entry(3),
                                                          entry(2, "edited"), entry(1)]


def test_entries_round_trip(ingest):
    (feed,) = ingest.add_feeds(["http://a/1"], now=0.0)
    ingest.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=1.0,
                            entries=(entry(1), entry(2)))])
    got = ingest.entries(feed.id)
    assert [g.entry for g in got] == [entry(2), entry(1)]
    assert ingest.recent_entries(1)[0].entry == entry(2)
    assert [g.entry.key for g in ingest.entries_after(got[1].id - 1, 1)] == ["guid-1"]


def test_pruning_keeps_what_the_document_still_holds(ingest_opener):
    s = ingest_opener(max_entries_per_feed=5)
    (feed,) = s.add_feeds(["http://a/1"], now=0.0)
    flood = tuple(entry(n) for n in range(50))
    assert len(s.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=1.0,
                                   entries=flood)])) == 50
    assert s.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=2.0,
                               entries=flood)]) == []
    for n in range(50, 60):
        s.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=3.0,
                            entries=(entry(n),))])
    assert s.entry_count() <= 100
    s.close()


def test_the_entry_count_follows_inserts_pruning_and_removed_feeds(ingest_opener):
    s = ingest_opener(max_entries_per_feed=5)
    one, two = s.add_feeds(["http://a/1", "http://a/2"], now=0.0)

    def stored() -> int:
        return len(s.entries_after(0, 10**6))

    s.apply([FeedUpdate(feed_id=one.id, state=one.state, seen_at=1.0,
                        entries=tuple(entry(n) for n in range(3))),
             FeedUpdate(feed_id=two.id, state=two.state, seen_at=1.0,
                        entries=tuple(entry(n) for n in range(100, 104)))])
    assert s.entry_count() == stored() == 7
    for n in range(3, 9):  # one's oldest are pruned past 5
        s.apply([FeedUpdate(feed_id=one.id, state=one.state, seen_at=2.0 + n,
                            entries=(entry(n),))])
    assert s.entry_count() == stored() < 13
    s.remove_feed(two.id)  # its entries go with it
    assert s.entry_count() == stored() == len(s.entries(one.id))
    s.close()
    s = ingest_opener(max_entries_per_feed=5)  # and as the next start reads it
    assert s.entry_count() == stored()
    s.close()


def test_removed_feed_update_is_ignored(ingest):
    (feed,) = ingest.add_feeds(["http://a/1"], now=0.0)
    ingest.remove_feed(feed.id)
    assert ingest.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=1.0,
                                   entries=(entry(1),))]) == []
    assert ingest.feeds() == []


def test_state_survives_restart(ingest_opener):
    s = ingest_opener()
    (feed,) = s.add_feeds(["http://a/1"], now=0.0)
    s.apply([FeedUpdate(feed_id=feed.id, state=msgspec.structs.replace(feed.state, etag='"e"'),
                        seen_at=1.0, entries=(entry(1),))])
    s.close()
    s = ingest_opener()
    assert s.feed(feed.id).state.etag == '"e"' and s.entry_count() == 1
    s.close()


def test_entry_ids_follow_commit_order_so_a_watermark_misses_nothing(ingest):
    """Two writers commit while a reader follows ``entries_after`` from its watermark, as the
    hub's replay does: every entry is read exactly once."""
    feeds = ingest.add_feeds(["http://a/1", "http://b/2"], now=0.0)
    errors: list[BaseException] = []

    def write(feed, start: int) -> None:
        try:
            for n in range(start, start + 200, 5):
                ingest.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=float(n),
                                         entries=tuple(entry(k) for k in range(n, n + 5)))])
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(feed, 1000 * i))
               for i, feed in enumerate(feeds)]
    for thread in writers:
        thread.start()
    seen: list[int] = []
    watermark = 0
    while True:
        finished = not any(thread.is_alive() for thread in writers)
        chunk = ingest.entries_after(watermark, 50)
        seen += [item.id for item in chunk]
        if chunk:
            watermark = chunk[-1].id
        elif finished:
            break
    assert not errors
    assert len(seen) == len(set(seen)) == ingest.entry_count() == 400
    assert seen == sorted(seen)
    assert ingest.max_entry_id() == seen[-1]


def test_all_postings_by_feed(ingest):
    a, b = ingest.add_feeds(["http://a/1", "http://b/2"], now=0.0)
    ingest.apply([FeedUpdate(feed_id=a.id, state=a.state, seen_at=10.0, entries=(entry(1),)),
                  FeedUpdate(feed_id=b.id, state=b.state, seen_at=20.0, entries=(entry(2),))])
    postings = ingest.all_postings(since=15.0)
    assert list(postings) == [b.id] and postings[b.id][0].first_seen_at == 20.0
    assert ingest.prune_postings(before=15.0) == 1
    assert ingest.postings(a.id) == []


def test_postings_are_pruned_oldest_first_a_batch_at_a_time(ingest):
    (feed,) = ingest.add_feeds(["http://a/1"], now=0.0)
    ingest.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=float(t),
                             entries=(entry(t),)) for t in range(1, 8)])
    assert ingest.prune_postings(before=6.0, limit=2) == 2
    assert [p.first_seen_at for p in ingest.postings(feed.id)] == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert ingest.prune_postings(before=6.0, limit=2) == 2
    assert ingest.prune_postings(before=6.0, limit=2) == 1
    assert ingest.prune_postings(before=6.0, limit=2) == 0
    assert [p.first_seen_at for p in ingest.postings(feed.id)] == [6.0, 7.0]
