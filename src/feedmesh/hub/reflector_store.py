"""What a reflector keeps on disk: one copy of each entry it holds, a log of matches, checkpoints.

* ``items``: one trimmed copy of every entry some subscription holds (shared, never per
  subscription), garbage-collected once no subscription holds it;
* ``matches``: one row per (article, filter shard): the ids of the subscriptions it matched,
  as varint gaps (:mod:`.idcodec`), unique per (entry, shard) so a replayed article is
  never logged twice;
* a checkpoint of the in-memory :class:`~feedmesh.hub.topk.TopK` (``<name>.topk.npz``, written to a
  temporary file and renamed), after which the log rows it covers are deleted.

Start-up loads the checkpoint and re-applies the log rows written after it. Top-k insertion is
idempotent and order-independent, so rows that the checkpoint already partly includes are harmless:
a crash at any point loses nothing that was committed and duplicates nothing.

Per filter shard, the last entry id stored (the *watermark*) is committed with the rows, telling the
hub where to resume replaying after a crash.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import msgspec
import numpy as np

from feedmesh.hub.idcodec import decode_ids, encode_ids
from feedmesh.hub.topk import WIDTH, TopK
from feedmesh.model import Entry

__all__ = ["DELETE_CHUNK", "ReflectedItem", "ReflectorStore"]

DELETE_CHUNK = 2000
"""Items deleted per transaction by garbage collection, so the stream's writes interleave."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    entry_id INTEGER PRIMARY KEY,
    data BLOB NOT NULL,
    stored_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS matches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id INTEGER NOT NULL,
    shard INTEGER NOT NULL,
    subs BLOB NOT NULL,
    UNIQUE (entry_id, shard)
);
"""


class ReflectedItem(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True):
    entry_id: int
    feed_id: int
    feed_url: str
    feed_title: str
    first_seen_at: float
    stored_at: float
    entry: Entry
    matched_at: float = 0.0
    """When the filter matched it: splits the intra-hub latency into its two legs."""
    degraded: bool = False
    """The body was dropped under memory pressure (title and link kept)."""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ReflectedItem)


class ReflectorStore:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.checkpoint_path = f"{self.path}.topk.npz"
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = self._connect()
        self._db.executescript(SCHEMA)
        # Reads come from the web handlers' thread while the writer commits: WAL lets a second
        # connection read the last committed state without waiting.
        self._reader = self._connect()
        self._read_lock = threading.Lock()

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

    # -- writing ------------------------------------------------------------------------------

    def store(self, batch: Sequence[tuple[ReflectedItem, np.ndarray | bytes, int]],
              watermarks: dict[int, int]) -> int:
        """Commit ``(item, matching sub ids, shard)`` triples and the shards' watermarks; the
        ids are an array, or already encoded by :func:`~feedmesh.hub.idcodec.encode_ids`.
        Returns the log sequence number of the last row written (0 if none)."""
        with self._write() as db:
            db.executemany("INSERT OR REPLACE INTO items VALUES (?, ?, ?)",
                           [(item.entry_id, _encoder.encode(item), item.stored_at)
                            for item, _, _ in batch])
            db.executemany("INSERT OR IGNORE INTO matches (entry_id, shard, subs) "
                           "VALUES (?, ?, ?)",
                           [(item.entry_id, shard,
                             ids if isinstance(ids, bytes) else encode_ids(ids))
                            for item, ids, shard in batch])
            for shard, mark in watermarks.items():
                db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                           "value = max(value, excluded.value)", (f"watermark.{shard}", mark))
            row = db.execute("SELECT max(seq) FROM matches").fetchone()
        return int(row[0] or 0)

    def checkpoint(self, topk: TopK, upto_seq: int) -> None:
        """Persist ``topk`` (which includes every log row up to ``upto_seq``), then drop those
        rows. ``topk`` may change while this runs: later rows stay in the log and re-applying
        them is harmless."""
        self.write_checkpoint(topk, upto_seq)
        while self.truncate_log(upto_seq):
            pass

    def write_checkpoint(self, topk: TopK, upto_seq: int) -> None:
        """Write ``topk`` and the log position it includes to the checkpoint file (temporary
        file, fsync, rename). Uses no database connection: any thread may run it."""
        temporary = f"{self.checkpoint_path}.tmp"
        extra_ids = np.fromiter(topk.extra, dtype=np.int64, count=len(topk.extra))
        extra_lengths = np.array([len(topk.extra[int(s)]) for s in extra_ids], dtype=np.int64)
        extra_values = (np.concatenate([topk.extra[int(s)] for s in extra_ids])
                        if len(extra_ids) else np.zeros(0, dtype=np.int64))
        with open(temporary, "wb") as f:
            np.savez(f, rows=topk.rows, extra_ids=extra_ids, extra_lengths=extra_lengths,
                     extra_values=extra_values, upto=np.array([upto_seq], dtype=np.int64))
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, self.checkpoint_path)

    def truncate_log(self, upto_seq: int, limit: int = 500) -> int:
        """Delete up to ``limit`` log rows the checkpoint includes; returns how many. In small
        transactions: a minute of log at 200 articles/s is 13,000 rows of ~16 KB, and deleting
        them at once holds the write lock (and so the reflector) for most of a second; the
        reflector also spaces them out."""
        with self._write() as db:
            return db.execute("DELETE FROM matches WHERE seq IN (SELECT seq FROM matches "
                              "WHERE seq <= ? ORDER BY seq LIMIT ?)", (upto_seq, limit)).rowcount

    def collect_garbage(self, live: np.ndarray) -> int:
        """Delete the items whose ids are not in ``live``; returns how many."""
        dead = self.unheld_items(live)
        return sum(self.delete_items(dead[i:i + DELETE_CHUNK])
                   for i in range(0, len(dead), DELETE_CHUNK))

    def unheld_items(self, live: np.ndarray) -> np.ndarray:
        """The ids of stored items that are not in ``live`` (sorted)."""
        with self._read_lock:
            stored = np.fromiter((row[0] for row in self._reader.execute(
                "SELECT entry_id FROM items")), dtype=np.int64)
        return np.setdiff1d(stored, live, assume_unique=True)

    def delete_items(self, entry_ids: np.ndarray) -> int:
        """Delete these items, except those the match log still refers to (it is applied again
        at the next start-up); returns how many were deleted."""
        with self._write() as db:
            cursor = db.executemany(
                "DELETE FROM items WHERE entry_id = ?1 AND NOT EXISTS "
                "(SELECT 1 FROM matches WHERE matches.entry_id = ?1)",
                ((int(e),) for e in entry_ids))
            return cursor.rowcount

    # -- reading ------------------------------------------------------------------------------

    def load(self, keep: np.ndarray | None = None) -> tuple[TopK, int]:
        """The held entries as of the last commit: checkpoint plus the log rows after it.
        ``keep[sub_id]`` is each subscription's keep (missing or 0: the row width).
        Returns the state and the last log sequence number applied."""
        topk = TopK()
        upto = 0
        if os.path.exists(self.checkpoint_path):
            with np.load(self.checkpoint_path) as saved:
                topk.load_rows(saved["rows"])
                offset = 0
                for sub_id, length in zip(saved["extra_ids"].tolist(),
                                          saved["extra_lengths"].tolist(), strict=True):
                    topk.extra[sub_id] = saved["extra_values"][offset:offset + length].copy()
                    offset += length
                upto = int(saved["upto"][0])
        last = upto
        for seq, entry_id, blob in self._db.execute(
                "SELECT seq, entry_id, subs FROM matches WHERE seq > ? ORDER BY seq", (upto,)):
            ids = decode_ids(blob)
            if len(ids):
                topk.ensure(int(ids.max()))
                topk.insert(entry_id, ids, _keeps(keep, ids))
            last = seq
        return topk, last

    def items(self, entry_ids: Sequence[int]) -> list[ReflectedItem]:
        """The stored items of ``entry_ids``, in that order (missing ones skipped)."""
        if not entry_ids:
            return []
        marks = ",".join("?" * len(entry_ids))
        with self._read_lock:
            rows = self._reader.execute(f"SELECT entry_id, data FROM items WHERE entry_id IN "
                                        f"({marks})", list(entry_ids)).fetchall()
        found = {entry_id: data for entry_id, data in rows}
        return [_decoder.decode(found[e]) for e in entry_ids if e in found]

    def watermarks(self) -> dict[int, int]:
        with self._lock:
            rows = self._db.execute("SELECT key, value FROM meta WHERE key LIKE 'watermark.%'")
            return {int(k.split(".", 1)[1]): v for k, v in rows}

    def set_watermarks(self, marks: dict[int, int]) -> None:
        self.store([], marks)

    def counts(self) -> tuple[int, int]:
        """(items stored, match log rows not yet checkpointed)."""
        with self._read_lock:
            items = self._reader.execute("SELECT count(*) FROM items").fetchone()[0]
            log = self._reader.execute("SELECT count(*) FROM matches").fetchone()[0]
        return int(items), int(log)

    def close(self) -> None:
        with self._lock:
            self._reader.close()
            self._db.close()


def _keeps(keep: np.ndarray | None, ids: np.ndarray) -> np.ndarray:
    if keep is None:
        return np.full(len(ids), WIDTH, dtype=np.int64)
    known = np.zeros(len(ids), dtype=np.int64)
    inside = ids < len(keep)
    known[inside] = keep[ids[inside]]
    known[known == 0] = WIDTH
    return known
