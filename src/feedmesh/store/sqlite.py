"""The embedded default :class:`~.ports.IngestStore`: one SQLite file in WAL mode
(:class:`~.sqlite_file.SQLiteFile`: what survives a crash, how reads and writes share the file).
Async callers hop through :class:`feedmesh.store.runner.StoreThread` so the event loop never waits
on the disk. One writer: entry ids (AUTOINCREMENT) are in commit order, as the port requires."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from feedmesh.fetch.state import FeedFetchState
from feedmesh.model import Entry, FeedInfo
from feedmesh.store.dedup import classify_entries
from feedmesh.store.owner_tables import SQLITE_OWNERS
from feedmesh.store.ports import FeedRow, FeedUpdate, IngestedEntry, Posting, StoreError
from feedmesh.store.sqlite_file import SQLiteFile

__all__ = ["SQLiteStore"]

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS feeds (
    id INTEGER PRIMARY KEY,
    source_url TEXT NOT NULL UNIQUE,
    url TEXT NOT NULL,
    active INTEGER NOT NULL DEFAULT 1,
    title TEXT NOT NULL DEFAULT '',
    state BLOB NOT NULL,
    info BLOB,
    added_at REAL NOT NULL,
    changed_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: ids order entries by first sighting
    feed_id INTEGER NOT NULL REFERENCES feeds(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    first_seen_at REAL NOT NULL,
    changed_at REAL NOT NULL,
    published REAL,
    data BLOB NOT NULL,
    UNIQUE (feed_id, key)
);
CREATE INDEX IF NOT EXISTS entries_by_hash ON entries (feed_id, content_hash);
CREATE INDEX IF NOT EXISTS entries_by_seen ON entries (first_seen_at);
CREATE TABLE IF NOT EXISTS postings (
    feed_id INTEGER NOT NULL REFERENCES feeds(id) ON DELETE CASCADE,
    first_seen_at REAL NOT NULL,
    published REAL,
    backlog INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS postings_by_feed ON postings (feed_id, first_seen_at);
"""

_entry_encoder = msgspec.msgpack.Encoder()
_entry_decoder = msgspec.msgpack.Decoder(Entry)
_state_decoder = msgspec.msgpack.Decoder(FeedFetchState)
_info_decoder = msgspec.msgpack.Decoder(FeedInfo)


class SQLiteStore:
    """:class:`feedmesh.store.ports.IngestStore` on SQLite. ``path=":memory:"`` for throw-away
    stores."""

    def __init__(self, path: str | Path, *, max_entries_per_feed: int = 200) -> None:
        self.max_entries_per_feed = max_entries_per_feed
        # the feed ownership table lives beside the feeds: fenced intents are checked against it
        self._file = SQLiteFile(path, SCHEMA + SQLITE_OWNERS, what="SQLite store",
                                foreign_keys=True)
        self.path = self._file.path
        self._check_version()

    def _check_version(self) -> None:
        rows = self._file.read("SELECT value FROM meta WHERE key='schema_version'")
        if not rows:
            with self._file.write("recording the schema version") as db:
                db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                           (SCHEMA_VERSION,))
        elif int(rows[0][0]) != SCHEMA_VERSION:
            self._file.close()
            raise StoreError(f"{self.path}: schema version {rows[0][0]}, this feedmesh reads "
                             f"{SCHEMA_VERSION}")

    # -- feeds ------------------------------------------------------------------------------

    def add_feeds(self, urls: Iterable[str], now: float) -> list[FeedRow]:
        urls = list(dict.fromkeys(u.strip() for u in urls if u.strip()))
        with self._file.write("adding feeds") as db:
            db.executemany(
                "INSERT OR IGNORE INTO feeds (source_url, url, state, added_at, changed_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [(u, u, msgspec.msgpack.encode(FeedFetchState(url=u)), now, now) for u in urls],
            )
        rows: list[FeedRow] = []
        for start in range(0, len(urls), 500):
            chunk = urls[start:start + 500]
            marks = ",".join("?" * len(chunk))
            rows += self._feed_rows(f"WHERE source_url IN ({marks})", chunk)
        order = {u: i for i, u in enumerate(urls)}
        rows.sort(key=lambda r: order[r.source_url])
        return rows

    def _feed_rows(self, where: str, params: Sequence[object] = ()) -> list[FeedRow]:
        rows = self._file.read("SELECT id, source_url, title, state, info, added_at FROM feeds "
                               f"{where} ORDER BY id", params)
        return [FeedRow(id=r[0], source_url=r[1], title=r[2], state=_state_decoder.decode(r[3]),
                        info=_info_decoder.decode(r[4]) if r[4] else None, added_at=r[5])
                for r in rows]

    def feeds(self, *, active_only: bool = False) -> list[FeedRow]:
        return self._feed_rows("WHERE active = 1" if active_only else "")

    def feed(self, feed_id: int) -> FeedRow | None:
        rows = self._feed_rows("WHERE id = ?", (feed_id,))
        return rows[0] if rows else None

    def remove_feed(self, feed_id: int) -> None:
        with self._file.write(f"removing feed {feed_id}") as db:
            db.execute("DELETE FROM feeds WHERE id = ?", (feed_id,))

    # -- ingest -----------------------------------------------------------------------------

    def apply(self, updates: Sequence[FeedUpdate],
              fenced: list[int] | None = None) -> list[IngestedEntry]:
        """Commit a batch of fetch intents atomically; return the entries that were new or
        updated (in the order met), with their ids; the feeds of intents fenced off go to
        ``fenced``."""
        ingested: list[IngestedEntry] = []
        dropped: list[int] = []
        with self._file.write(f"applying {len(updates)} feed updates") as db:
            for update in updates:
                self._apply_one(db, update, ingested, dropped)
        if fenced is not None:
            fenced.extend(dropped)
        return ingested

    def _apply_one(self, db: sqlite3.Connection, update: FeedUpdate,
                   ingested: list[IngestedEntry], fenced: list[int]) -> None:
        if update.owner and db.execute(
                "SELECT 1 FROM feed_owners WHERE feed_id = ? AND owner = ? AND epoch = ?",
                (update.feed_id, update.owner, update.epoch)).fetchone() is None:
            fenced.append(update.feed_id)  # the feed changed hands since this fetch began
            return
        state = update.state
        info = update.info
        params: list[object] = [state.url, int(state.active), msgspec.msgpack.encode(state),
                                update.seen_at]
        sql = "UPDATE feeds SET url = ?, active = ?, state = ?, changed_at = ?"
        if info is not None:
            sql += ", title = ?, info = ?"
            params += [info.title, msgspec.msgpack.encode(info)]
        cursor = db.execute(sql + " WHERE id = ?", (*params, update.feed_id))
        if cursor.rowcount == 0:
            return  # the feed was removed while it was being fetched
        if not update.entries:
            return
        known_keys: dict[str, str] = {}
        known_hashes: set[str] = set()
        for key, content_hash in db.execute(
                "SELECT key, content_hash FROM entries WHERE feed_id = ?", (update.feed_id,)):
            known_keys[key] = content_hash
            known_hashes.add(content_hash)
        new, updated = classify_entries(update.entries, known_keys, known_hashes)
        now = update.seen_at
        for entry in new:
            published = _epoch(entry)
            cursor = db.execute(
                "INSERT INTO entries (feed_id, key, content_hash, first_seen_at, changed_at, "
                "published, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (update.feed_id, entry.key, entry.content_hash, now, now, published,
                 _entry_encoder.encode(entry)))
            db.execute("INSERT INTO postings VALUES (?, ?, ?, ?)",
                       (update.feed_id, now, published, int(update.backlog)))
            ingested.append(IngestedEntry(id=cursor.lastrowid, feed_id=update.feed_id,
                                          entry=entry, first_seen_at=now,
                                          backlog=update.backlog))
        for entry in updated:
            row = db.execute(
                "UPDATE entries SET content_hash = ?, changed_at = ?, published = ?, data = ? "
                "WHERE feed_id = ? AND key = ? RETURNING id, first_seen_at",
                (entry.content_hash, now, _epoch(entry), _entry_encoder.encode(entry),
                 update.feed_id, entry.key)).fetchone()
            ingested.append(IngestedEntry(id=row[0], feed_id=update.feed_id, entry=entry,
                                          first_seen_at=row[1], updated=True))
        if new:
            self._prune_entries(db, update.feed_id, len(known_keys) + len(new),
                                keep=max(self.max_entries_per_feed, 2 * len(update.entries)))

    def _prune_entries(self, db: sqlite3.Connection, feed_id: int, count: int, keep: int) -> None:
        # Never prune below twice the document's size: an entry still in the document must stay
        # known, or the next fetch would see it as new again.
        if count <= keep:
            return
        db.execute("DELETE FROM entries WHERE feed_id = ? AND id NOT IN "
                   "(SELECT id FROM entries WHERE feed_id = ? ORDER BY id DESC LIMIT ?)",
                   (feed_id, feed_id, keep))

    # -- reads ------------------------------------------------------------------------------

    def _entries(self, where: str, params: Sequence[object]) -> list[IngestedEntry]:
        rows = self._file.read("SELECT id, feed_id, first_seen_at, data, "
                               f"changed_at > first_seen_at FROM entries {where}", params)
        return [IngestedEntry(id=r[0], feed_id=r[1], first_seen_at=r[2],
                              entry=_entry_decoder.decode(r[3]), updated=bool(r[4]))
                for r in rows]

    def entries(self, feed_id: int, limit: int = 50) -> list[IngestedEntry]:
        return self._entries("WHERE feed_id = ? ORDER BY id DESC LIMIT ?", (feed_id, limit))

    def recent_entries(self, limit: int = 100) -> list[IngestedEntry]:
        return self._entries("ORDER BY id DESC LIMIT ?", (limit,))

    def entries_after(self, after_id: int, limit: int = 500) -> list[IngestedEntry]:
        """Entries with ids above ``after_id``, oldest first (to replay what downstream missed)."""
        return self._entries("WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit))

    def max_entry_id(self) -> int:
        return int(self._file.read("SELECT coalesce(max(id), 0) FROM entries")[0][0])

    def entry_count(self) -> int:
        return int(self._file.read("SELECT count(*) FROM entries")[0][0])

    def postings(self, feed_id: int, since: float = 0.0) -> list[Posting]:
        rows = self._file.read("SELECT first_seen_at, published, backlog FROM postings "
                               "WHERE feed_id = ? AND first_seen_at >= ? ORDER BY first_seen_at",
                               (feed_id, since))
        return [Posting(r[0], r[1], bool(r[2])) for r in rows]

    def all_postings(self, since: float = 0.0) -> dict[int, list[Posting]]:
        out: dict[int, list[Posting]] = defaultdict(list)
        for feed_id, seen, published, backlog in self._file.read(
                "SELECT feed_id, first_seen_at, published, backlog FROM postings "
                "WHERE first_seen_at >= ? ORDER BY feed_id, first_seen_at", (since,)):
            out[feed_id].append(Posting(seen, published, bool(backlog)))
        return dict(out)

    def prune_postings(self, before: float, limit: int = 10_000) -> int:
        # Rows go in by time, so the oldest are first in rowid order: the scan stops at
        # ``limit`` without an index on first_seen_at.
        with self._file.write("pruning postings") as db:
            return db.execute("DELETE FROM postings WHERE rowid IN (SELECT rowid FROM postings "
                              "WHERE first_seen_at < ? ORDER BY rowid LIMIT ?)",
                              (before, limit)).rowcount

    def close(self) -> None:
        self._file.close()


def _epoch(entry: Entry) -> float | None:
    moment = entry.published or entry.updated
    return moment.timestamp() if moment is not None else None
