"""What a reflector keeps on disk: each subscription's last k matching entries, each entry once.

``items`` holds one trimmed copy of every entry some subscription still holds; ``held`` says which
subscription holds which entry (``(sub_id, entry_id)``, so storing the same match twice is a
no-op: replays after a crash never duplicate). Entry ids grow with the time the crawler first saw
the entry, so "the newest k" is "the k largest ids". A subscription's rows are pruned back to k
only once they reach 2k (one DELETE per k inserts instead of one per insert); reads take the newest
k anyway. A per-shard watermark (the last entry id stored from each filter shard) is committed in
the same transaction as the rows, so the hub knows where to resume after a crash.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import msgspec
import numpy as np

from feedmesh.model import Entry

__all__ = ["ReflectedItem", "ReflectorStore"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    entry_id INTEGER PRIMARY KEY,
    data BLOB NOT NULL,
    stored_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS held (
    sub_id INTEGER NOT NULL,
    entry_id INTEGER NOT NULL,
    PRIMARY KEY (sub_id, entry_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS held_by_entry ON held (entry_id);
"""


class ReflectedItem(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True):
    entry_id: int
    feed_id: int
    feed_url: str
    feed_title: str
    first_seen_at: float
    stored_at: float
    entry: Entry
    degraded: bool = False
    """The body was dropped under memory pressure (title and link kept)."""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ReflectedItem)


class ReflectorStore:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = self._connect()
        self._db.executescript(SCHEMA)
        # Reads come from the web handlers' thread while the writer commits: WAL lets a second
        # connection read the last committed state without waiting.
        self._reader = self._connect() if self.path != ":memory:" else self._db
        self._read_lock = threading.Lock() if self._reader is not self._db else self._lock

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=5000")
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def store(self, batch: Sequence[tuple[ReflectedItem, np.ndarray]],
              watermarks: dict[int, int]) -> int:
        """Store items and who holds them; returns the number of (sub, entry) rows offered."""
        rows = 0
        with self._write() as db:
            db.executemany("INSERT OR REPLACE INTO items VALUES (?, ?, ?)",
                           [(item.entry_id, _encoder.encode(item), item.stored_at)
                            for item, _ in batch])
            for item, subs in batch:
                db.executemany("INSERT OR IGNORE INTO held VALUES (?, ?)",
                               ((int(s), item.entry_id) for s in subs))
                rows += len(subs)
            for shard, mark in watermarks.items():
                db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                           "value = max(value, excluded.value)", (f"watermark.{shard}", mark))
        return rows

    def prune(self, subs: Iterable[tuple[int, int]]) -> None:
        """Keep only the newest ``keep`` rows of each ``(sub_id, keep)``."""
        with self._write() as db:
            db.executemany(
                "DELETE FROM held WHERE sub_id = ?1 AND entry_id < (SELECT entry_id FROM held "
                "WHERE sub_id = ?1 ORDER BY entry_id DESC LIMIT 1 OFFSET ?2 - 1)",
                ((int(s), int(k)) for s, k in subs))

    def drop_subscription(self, sub_id: int) -> None:
        with self._write() as db:
            db.execute("DELETE FROM held WHERE sub_id = ?", (sub_id,))

    def collect_garbage(self) -> int:
        """Delete items no subscription holds any more; returns how many."""
        with self._write() as db:
            return db.execute("DELETE FROM items WHERE NOT EXISTS "
                              "(SELECT 1 FROM held WHERE held.entry_id = items.entry_id)").rowcount

    def items(self, sub_id: int, keep: int) -> list[ReflectedItem]:
        with self._read_lock:
            rows = self._reader.execute(
                "SELECT i.data FROM held h JOIN items i ON i.entry_id = h.entry_id "
                "WHERE h.sub_id = ? ORDER BY h.entry_id DESC LIMIT ?", (sub_id, keep)).fetchall()
        return [_decoder.decode(r[0]) for r in rows]

    def watermarks(self) -> dict[int, int]:
        rows = self._db.execute("SELECT key, value FROM meta WHERE key LIKE 'watermark.%'")
        return {int(k.split(".", 1)[1]): v for k, v in rows}

    def held_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per subscription: (sub ids, rows held, newest entry id) - to rebuild memory state."""
        rows = self._db.execute("SELECT sub_id, count(*), max(entry_id) FROM held "
                                "GROUP BY sub_id").fetchall()
        if not rows:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        array = np.array(rows, dtype=np.int64)
        return array[:, 0], array[:, 1], array[:, 2]

    def counts(self) -> tuple[int, int]:
        """(items stored, held rows)."""
        with self._read_lock:
            items = self._reader.execute("SELECT count(*) FROM items").fetchone()[0]
            held = self._reader.execute("SELECT count(*) FROM held").fetchone()[0]
        return int(items), int(held)

    def close(self) -> None:
        with self._lock:
            if self._reader is not self._db:
                self._reader.close()
            self._db.close()
