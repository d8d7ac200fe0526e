"""The SQLite store: atomic intents, dedup inside the transaction, restarts and crashes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime

import msgspec
import pytest

from feedmesh.fetch import FeedFetchState
from feedmesh.model import Entry, FeedInfo
from feedmesh.store import FeedUpdate, SQLiteStore, StoreError


def entry(n: int, content: str = "") -> Entry:
    return Entry(key=f"guid-{n}", content_hash=f"h{n}{content}", title=f"post {n}",
                 published=datetime(2026, 11, 1, tzinfo=UTC))


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(tmp_path / "feedmesh.db")
    yield s
    s.close()


def test_add_feeds_is_idempotent_and_ordered(store):
    rows = store.add_feeds(["http://a/1", "http://b/2", "http://a/1", " "], now=10.0)
    assert [r.source_url for r in rows] == ["http://a/1", "http://b/2"]
    again = store.add_feeds(["http://b/2"], now=20.0)
    assert again[0].id == rows[1].id and again[0].added_at == 10.0
    assert rows[0].state == FeedFetchState(url="http://a/1")


def test_apply_stores_new_then_only_changes(store):
    (feed,) = store.add_feeds(["http://a/1"], now=0.0)
    state = msgspec.structs.replace(feed.state, etag='"v1"', doc_hash=42)
    out = store.apply([FeedUpdate(feed_id=feed.id, state=state, seen_at=100.0,
                                  info=FeedInfo(title="A"), entries=(entry(1), entry(2)),
                                  backlog=True)])
    assert [(i.entry.key, i.updated, i.first_seen_at) for i in out] == [
        ("guid-1", False, 100.0), ("guid-2", False, 100.0)]
    out = store.apply([FeedUpdate(feed_id=feed.id, state=state, seen_at=200.0,
                                  entries=(entry(1), entry(2, "edited"), entry(3)))])
    assert [(i.entry.key, i.updated) for i in out] == [("guid-3", False), ("guid-2", True)]
    assert out[1].first_seen_at == 100.0  # an edit keeps the entry's first sighting
    assert store.entry_count() == 3
    row = store.feed(feed.id)
    assert row.state.etag == '"v1"' and row.title == "A" and row.info.title == "A"
    postings = store.postings(feed.id)
    assert [(p.first_seen_at, p.backlog) for p in postings] == [(100.0, True), (100.0, True),
                                                                 (200.0, False)]
    assert postings[0].published == datetime(2026, 11, 1, tzinfo=UTC).timestamp()


def test_entries_round_trip(store):
    (feed,) = store.add_feeds(["http://a/1"], now=0.0)
    store.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=1.0,
                            entries=(entry(1), entry(2)))])
    got = store.entries(feed.id)
    assert [g.entry for g in got] == [entry(2), entry(1)]
    assert store.recent_entries(1)[0].entry == entry(2)
    assert [g.entry.key for g in store.entries_by_id([got[1].id])] == ["guid-1"]


def test_pruning_keeps_what_the_document_still_holds(tmp_path):
    s = SQLiteStore(tmp_path / "x.db", max_entries_per_feed=5)
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


def test_removed_feed_update_is_ignored(store):
    (feed,) = store.add_feeds(["http://a/1"], now=0.0)
    store.remove_feed(feed.id)
    assert store.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=1.0,
                                   entries=(entry(1),))]) == []
    assert store.feeds() == []


def test_set_active(store):
    (feed,) = store.add_feeds(["http://a/1"], now=0.0)
    store.set_active(feed.id, False, "410 Gone")
    assert store.feeds(active_only=True) == []
    assert store.feed(feed.id).state.inactive_reason == "410 Gone"
    with pytest.raises(StoreError, match="no feed with id 999"):
        store.set_active(999, True)


def test_state_survives_restart(tmp_path):
    path = tmp_path / "s.db"
    s = SQLiteStore(path)
    (feed,) = s.add_feeds(["http://a/1"], now=0.0)
    s.apply([FeedUpdate(feed_id=feed.id, state=msgspec.structs.replace(feed.state, etag='"e"'),
                        seen_at=1.0, entries=(entry(1),))])
    s.close()
    s = SQLiteStore(path)
    assert s.feed(feed.id).state.etag == '"e"' and s.entry_count() == 1
    s.close()


def test_unreadable_file_gives_a_precise_error(tmp_path):
    bad = tmp_path / "not-a-db"
    bad.write_bytes(b"garbage" * 1000)
    with pytest.raises(StoreError, match="cannot open SQLite store .*not-a-db"):
        SQLiteStore(bad)


WRITER = textwrap.dedent("""
    import sys, msgspec
    from feedmesh.model import Entry
    from feedmesh.store import FeedUpdate, SQLiteStore
    s = SQLiteStore(sys.argv[1], max_entries_per_feed=10**6)
    (feed,) = s.add_feeds(["http://a/1"], now=0.0)
    n = 0
    while True:  # batches of 10 entries, each with the feed's etag naming the last entry
        batch = tuple(Entry(key=f"g{n + i}", content_hash=f"h{n + i}") for i in range(10))
        n += 10
        state = msgspec.structs.replace(feed.state, etag=f"upto-{n}")
        s.apply([FeedUpdate(feed_id=feed.id, state=state, seen_at=float(n), entries=batch)])
        print(n, flush=True)
""")


def test_kill_9_mid_stream_loses_and_duplicates_nothing(tmp_path):
    path = tmp_path / "crash.db"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE,
                            text=True)
    committed = 0
    deadline = time.monotonic() + 30
    while committed < 300 and time.monotonic() < deadline:
        committed = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    s = SQLiteStore(path, max_entries_per_feed=10**6)
    keys = [e.entry.key for e in s.entries(1, limit=10**6)]
    etag = s.feed(1).state.etag
    s.close()
    assert len(keys) == len(set(keys))  # no duplicates
    stored = len(keys)
    assert stored >= committed  # everything acknowledged survived
    assert etag == f"upto-{stored}"  # validators and entries were committed together
