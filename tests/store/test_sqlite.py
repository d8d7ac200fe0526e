"""What only the SQLite ingest store does: its file, and a kill -9 in the middle of a stream."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from feedmesh.store import StoreError
from feedmesh.store.sqlite import SQLiteStore


def test_unreadable_file_gives_a_precise_error(tmp_path):
    bad = tmp_path / "not-a-db"
    bad.write_bytes(b"garbage" * 1000)
    with pytest.raises(StoreError, match=r"cannot open SQLite store .*not-a-db"):
        SQLiteStore(bad)


WRITER = textwrap.dedent("""
    import sys, msgspec
    from feedmesh.model import Entry
    from feedmesh.store import FeedUpdate
    from feedmesh.store.sqlite import SQLiteStore
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
    while committed < 300:  # the writer's own lines: it has committed this many
        line = proc.stdout.readline()
        assert line, "the writer stopped before committing 300 entries"
        committed = int(line)
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


@pytest.mark.parametrize("opener, what", [
    ("feedmesh.store.sqlite_hub:SQLiteHubState", "hub database"),
    ("feedmesh.store.sqlite_reflector:SQLiteReflectorLog", "reflector store"),
])
def test_every_sqlite_store_names_its_file_when_it_cannot_open_it(tmp_path, opener, what):
    import importlib

    module, name = opener.split(":")
    bad = tmp_path / "not-a-db"
    bad.write_bytes(b"garbage" * 1000)
    with pytest.raises(StoreError, match=f"cannot open {what} .*not-a-db"):
        getattr(importlib.import_module(module), name)(bad)


def test_a_failed_write_is_a_store_error_naming_what_was_done(tmp_path):
    from feedmesh.store.sqlite_hub import SQLiteHubState

    state = SQLiteHubState(tmp_path / "hub.db")
    account, _ = state.create_account("ann", 1.0)
    state.close()
    with pytest.raises(StoreError, match=r"rotating the token of account 1 failed in .*hub\.db"):
        state.rotate_token(account.id)


def test_an_older_hub_db_gains_the_columns_it_lacks(tmp_path):
    import sqlite3

    from feedmesh.store.sqlite_hub import SQLiteHubState

    old = sqlite3.connect(tmp_path / "hub.db")
    old.executescript("""
        CREATE TABLE accounts (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL DEFAULT '',
            token_hash BLOB NOT NULL, created_at REAL NOT NULL);
        CREATE TABLE account_sources (account_id INTEGER NOT NULL, feed_id INTEGER NOT NULL,
            title TEXT NOT NULL DEFAULT '', added_at REAL NOT NULL,
            PRIMARY KEY (account_id, feed_id)) WITHOUT ROWID;
        INSERT INTO accounts VALUES (1, 'ann', x'00', 1.0);
        INSERT INTO account_sources VALUES (1, 5, 'Five', 2.0);
    """)
    old.close()
    state = SQLiteHubState(tmp_path / "hub.db")
    (kept,) = state.sources(1)
    assert (kept.feed_id, kept.title, kept.category, kept.html_url) == (5, "Five", "", "")
    # and the tables it lacks: push targets and their delivery log (issue 12)
    sub = state.add_subscription(1, name="", query="a", keep=5, reflector=0, now=3.0)
    from feedmesh.store import PushAttempt, PushTarget
    saved = state.save_push_target(PushTarget(sub_id=sub.id, kind="webhook",
                                              url="http://a.test/", created_at=3.0))
    state.record_push_attempts([PushAttempt(target_id=saved.id, at=4.0, attempt=1, status=200)])
    assert state.push_attempts(saved.id)[0].status == 200
    state.close()


def test_push_targets_of_before_the_marks_count_as_delivered_up_to_the_upgrade(tmp_path):
    import sqlite3
    import time

    from feedmesh.store.sqlite_hub import SQLiteHubState

    SQLiteHubState(tmp_path / "hub.db").close()
    old = sqlite3.connect(tmp_path / "hub.db")  # as a hub before the durable marks left it
    old.executescript("""
        PRAGMA foreign_keys = OFF;
        CREATE TABLE old_targets AS SELECT id, sub_id, kind, url, topic, format, secret,
            lease_seconds, expires_at, created_at FROM push_targets;
        DROP TABLE push_targets;
        ALTER TABLE old_targets RENAME TO push_targets;
        INSERT INTO push_targets VALUES (7, 1, 'webhook', 'http://a.test/', '', '', 's', 0,
            NULL, 1.0);
    """)
    old.close()
    before = time.time()
    state = SQLiteHubState(tmp_path / "hub.db")
    (target,) = state.push_targets()
    assert target.id == 7 and before - 5 <= target.delivered_before <= time.time()
    state.mark_push_targets({7: time.time() + 100})
    assert state.push_targets()[0].delivered_before > time.time() + 50
    state.close()


def test_push_targets_of_before_the_signature_method_sign_sha256_as_they_did(tmp_path):
    import sqlite3

    from feedmesh.store.sqlite_hub import SQLiteHubState

    SQLiteHubState(tmp_path / "hub.db").close()
    old = sqlite3.connect(tmp_path / "hub.db")  # as a hub before the signature method left it
    old.executescript("""
        PRAGMA foreign_keys = OFF;
        CREATE TABLE old_targets AS SELECT id, sub_id, kind, url, topic, format, secret,
            lease_seconds, expires_at, created_at, delivered_before FROM push_targets;
        DROP TABLE push_targets;
        ALTER TABLE old_targets RENAME TO push_targets;
        INSERT INTO push_targets VALUES (7, 1, 'websub', 'http://cb.test/', 'http://h/f/t.atom',
            'atom1.0', 's', 60, 100.0, 1.0, 5.0);
    """)
    old.close()
    state = SQLiteHubState(tmp_path / "hub.db")
    (target,) = state.push_targets()
    assert (target.id, target.signature, target.delivered_before) == (7, "sha256", 5.0)
    assert state.set_push_signature(7, "sha1").signature == "sha1"
    state.close()
    state = SQLiteHubState(tmp_path / "hub.db")  # upgraded once: the choice stays
    assert state.push_targets()[0].signature == "sha1"
    state.close()
