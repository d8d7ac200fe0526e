"""The embedded :class:`~.ports.ReflectorLog`: one SQLite file per reflector
(``reflector-<n>.db``) and its checkpoint beside it.

* ``items``: one trimmed copy of every entry some subscription holds (shared, never per
  subscription), deleted once no subscription holds it;
* ``matches``: one row per (article, filter shard): the ids of the subscriptions it matched,
  encoded by the reflector (varint gaps, about a byte per id), unique per (entry, shard) so a
  replayed article is never logged twice;
* ``meta``: per filter shard, the last entry id stored (the *watermark*), committed with the rows;
* the checkpoint (``<name>.topk.npz``): arrays written to a temporary file, fsynced and renamed
  over the old one, so a crash leaves the old checkpoint or the new one, never half of one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import msgspec
import numpy as np

from feedmesh.store.ports import ReflectedItem, StoreError, storage_error
from feedmesh.store.sqlite_file import SQLiteFile

__all__ = ["SQLiteReflectorLog"]

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

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ReflectedItem)


class SQLiteReflectorLog:
    """:class:`feedmesh.store.ports.ReflectorLog` on SQLite."""

    def __init__(self, path: str | Path) -> None:
        self._file = SQLiteFile(path, SCHEMA, what="reflector store")
        self.path = self._file.path
        self.checkpoint_path = f"{self.path}.topk.npz"

    # -- writing ------------------------------------------------------------------------------

    def store(self, rows: Sequence[tuple[ReflectedItem, bytes, int]],
              watermarks: Mapping[int, int]) -> int:
        with self._file.write(f"storing {len(rows)} matches") as db:
            db.executemany("INSERT OR REPLACE INTO items VALUES (?, ?, ?)",
                           [(item.entry_id, _encoder.encode(item), item.stored_at)
                            for item, _, _ in rows])
            db.executemany("INSERT OR IGNORE INTO matches (entry_id, shard, subs) "
                           "VALUES (?, ?, ?)",
                           [(item.entry_id, shard, ids) for item, ids, shard in rows])
            for shard, mark in watermarks.items():
                db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                           "value = max(value, excluded.value)", (f"watermark.{shard}", mark))
            row = db.execute("SELECT max(seq) FROM matches").fetchone()
        return int(row[0] or 0)

    def write_checkpoint(self, arrays: Mapping[str, np.ndarray], upto_seq: int) -> None:
        temporary = f"{self.checkpoint_path}.tmp"
        try:
            with open(temporary, "wb") as f:
                np.savez(f, **arrays, upto=np.array([upto_seq], dtype=np.int64))
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, self.checkpoint_path)
        except OSError as exc:
            raise storage_error(f"writing the checkpoint {self.checkpoint_path} failed: "
                                f"{exc}", exc) from exc

    def truncate_log(self, upto_seq: int, limit: int = 500) -> int:
        with self._file.write("truncating the match log") as db:
            return db.execute("DELETE FROM matches WHERE seq IN (SELECT seq FROM matches "
                              "WHERE seq <= ? ORDER BY seq LIMIT ?)", (upto_seq, limit)).rowcount

    def delete_items(self, entry_ids: np.ndarray) -> int:
        with self._file.write(f"deleting {len(entry_ids)} items") as db:
            cursor = db.executemany(
                "DELETE FROM items WHERE entry_id = ?1 AND NOT EXISTS "
                "(SELECT 1 FROM matches WHERE matches.entry_id = ?1)",
                ((int(e),) for e in entry_ids))
            return cursor.rowcount

    def set_watermarks(self, marks: Mapping[int, int]) -> None:
        self.store([], marks)

    # -- reading ------------------------------------------------------------------------------

    def log_after(self, seq: int) -> Iterator[tuple[int, int, bytes]]:
        yield from self._file.stream(
            "SELECT seq, entry_id, subs FROM matches WHERE seq > ? ORDER BY seq", (seq,))

    def read_checkpoint(self) -> tuple[dict[str, np.ndarray], int] | None:
        if not os.path.exists(self.checkpoint_path):
            return None
        try:
            with np.load(self.checkpoint_path) as saved:
                arrays = {name: saved[name] for name in saved.files if name != "upto"}
                return arrays, int(saved["upto"][0])
        except (OSError, ValueError, KeyError) as exc:
            raise StoreError(f"reading the checkpoint {self.checkpoint_path} failed: "
                             f"{exc}") from exc

    def unheld_items(self, live: np.ndarray) -> np.ndarray:
        stored = np.fromiter((row[0] for row in self._file.stream("SELECT entry_id FROM items")),
                             dtype=np.int64)
        return np.setdiff1d(stored, live, assume_unique=True)

    def items(self, entry_ids: Sequence[int]) -> list[ReflectedItem]:
        if not entry_ids:
            return []
        marks = ",".join("?" * len(entry_ids))
        rows = self._file.read(f"SELECT entry_id, data FROM items WHERE entry_id IN ({marks})",
                               list(entry_ids))
        found = dict(rows)
        return [_decoder.decode(found[e]) for e in entry_ids if e in found]

    def watermarks(self) -> dict[int, int]:
        rows = self._file.read("SELECT key, value FROM meta WHERE key LIKE 'watermark.%'")
        return {int(k.split(".", 1)[1]): v for k, v in rows}

    def counts(self) -> tuple[int, int]:
        items = self._file.read("SELECT count(*) FROM items")[0][0]
        log = self._file.read("SELECT count(*) FROM matches")[0][0]
        return int(items), int(log)

    def close(self) -> None:
        self._file.close()
