"""The distributed deployment's :class:`~.ports.ReflectorLog`: every reflector's durable state in
PostgreSQL, rows keyed by the reflector's number, so that a replacement reflector on another
machine, with an empty data folder, finds its items, its match log, its watermarks **and its
checkpoint** where the dead one left them (nothing of it lives on a local disk).

* ``reflector_items``: one copy of each entry a reflector holds, per (reflector, entry);
* ``reflector_matches``: the match log, unique per (reflector, entry, filter shard), so a
  redelivered article is never logged twice (``ON CONFLICT DO NOTHING``);
* ``reflector_watermarks``: per (reflector, shard) the last entry stored, only ever raised
  (``greatest``), committed with the rows;
* ``reflector_checkpoints``: the checkpoint's arrays (``.npz`` bytes) and the log position they
  include, replaced by one upsert: a crash leaves the old one or the new one.

Log sequence numbers come from one identity column shared by all reflectors; a reflector's
writes take its own advisory lock held to the commit, so its rows commit in ``seq`` order (what
:meth:`PostgresReflectorLog.log_after` replays relies on). The checkpoint goes through its own
connection, so a worker thread may write it while the reflector stores matches.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator, Mapping, Sequence

import msgspec
import numpy as np
import psycopg

from feedmesh.store.ports import ReflectedItem, StoreError
from feedmesh.store.postgres_db import LOCK_CLASS, LOCKS, PostgresDatabase, pg_error

__all__ = ["PostgresReflectorLog"]

COMPONENT = "reflector"
MIGRATIONS = (
    """
    CREATE TABLE reflector_items (
        reflector integer NOT NULL,
        entry_id bigint NOT NULL,
        data bytea NOT NULL,
        stored_at double precision NOT NULL,
        PRIMARY KEY (reflector, entry_id)
    );
    CREATE TABLE reflector_matches (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        reflector integer NOT NULL,
        entry_id bigint NOT NULL,
        shard integer NOT NULL,
        subs bytea NOT NULL,
        UNIQUE (reflector, entry_id, shard)
    );
    CREATE INDEX reflector_matches_by_seq ON reflector_matches (reflector, seq);
    CREATE TABLE reflector_watermarks (
        reflector integer NOT NULL,
        shard integer NOT NULL,
        mark bigint NOT NULL,
        PRIMARY KEY (reflector, shard)
    );
    CREATE TABLE reflector_checkpoints (
        reflector integer PRIMARY KEY,
        upto_seq bigint NOT NULL,
        arrays bytea NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now()
    );
    """,
)

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ReflectedItem)


class PostgresReflectorLog:
    """:class:`feedmesh.store.ports.ReflectorLog` of reflector number ``reflector`` on
    PostgreSQL, at ``url``."""

    def __init__(self, url: str, reflector: int = 0) -> None:
        self.reflector = reflector
        self._db = PostgresDatabase(url, what=f"reflector store {reflector}",
                                    component=COMPONENT, migrations=MIGRATIONS)
        self.url = url
        self._lock = (LOCK_CLASS + reflector, LOCKS["reflector"])
        self._checkpoint_lock = threading.Lock()

    # -- writing ------------------------------------------------------------------------------

    def store(self, rows: Sequence[tuple[ReflectedItem, bytes, int]],
              watermarks: Mapping[int, int]) -> int:
        me = self.reflector
        newest = {item.entry_id: item for item, _, _ in rows}  # a later copy wins, as in SQLite
        # One statement per table, whatever the batch's size (a round trip each).
        with self._db.write(f"storing {len(rows)} matches", lock=self._lock) as cur:
            if newest:
                items = list(newest.values())
                cur.execute(
                    "INSERT INTO reflector_items SELECT %s, * FROM unnest(%s::bigint[], "
                    "%b::bytea[], %s::float8[]) ON CONFLICT (reflector, entry_id) DO UPDATE SET "
                    "data = excluded.data, stored_at = excluded.stored_at",
                    (me, [i.entry_id for i in items], [_encoder.encode(i) for i in items],
                     [i.stored_at for i in items]))
            if rows:
                cur.execute(
                    "INSERT INTO reflector_matches (reflector, entry_id, shard, subs) "
                    "SELECT %s, v.entry_id, v.shard, v.subs FROM unnest(%s::bigint[], "
                    "%s::integer[], %b::bytea[]) WITH ORDINALITY AS v(entry_id, shard, subs, n) "
                    "ORDER BY v.n ON CONFLICT (reflector, entry_id, shard) DO NOTHING",
                    (me, [item.entry_id for item, _, _ in rows], [shard for _, _, shard in rows],
                     [ids for _, ids, _ in rows]))
            if watermarks:
                cur.execute(
                    "INSERT INTO reflector_watermarks SELECT %s, * FROM unnest(%s::integer[], "
                    "%s::bigint[]) ON CONFLICT (reflector, shard) DO UPDATE SET "
                    "mark = greatest(reflector_watermarks.mark, excluded.mark)",
                    (me, list(watermarks), list(watermarks.values())))
            cur.execute("SELECT max(seq) FROM reflector_matches WHERE reflector = %s", (me,))
            row = cur.fetchone()
        return int(row[0] or 0)

    def write_checkpoint(self, arrays: Mapping[str, np.ndarray], upto_seq: int) -> None:
        """Replace the checkpoint in one upsert, through a connection of its own (any thread may
        call this while another stores matches)."""
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        where = self._db.where
        with self._checkpoint_lock:
            try:
                with self._db.open_connection() as conn:
                    conn.execute(
                        "INSERT INTO reflector_checkpoints (reflector, upto_seq, arrays) "
                        "VALUES (%s, %s, %s) ON CONFLICT (reflector) DO UPDATE SET "
                        "upto_seq = excluded.upto_seq, arrays = excluded.arrays, "
                        "written_at = now()", (self.reflector, upto_seq, buffer.getbuffer()))
            except psycopg.Error as exc:
                raise pg_error(f"writing the checkpoint of reflector {self.reflector} failed "
                               f"in {where}", exc) from exc

    def truncate_log(self, upto_seq: int, limit: int = 500) -> int:
        with self._db.write("truncating the match log", lock=self._lock) as cur:
            cur.execute("DELETE FROM reflector_matches WHERE seq IN (SELECT seq FROM "
                        "reflector_matches WHERE reflector = %s AND seq <= %s ORDER BY seq "
                        "LIMIT %s)", (self.reflector, upto_seq, limit))
            return cur.rowcount

    def delete_items(self, entry_ids: np.ndarray) -> int:
        ids = [int(e) for e in entry_ids]
        if not ids:
            return 0
        with self._db.write(f"deleting {len(ids)} items", lock=self._lock) as cur:
            cur.execute("DELETE FROM reflector_items i WHERE i.reflector = %s AND "
                        "i.entry_id = ANY(%s) AND NOT EXISTS (SELECT 1 FROM reflector_matches m "
                        "WHERE m.reflector = i.reflector AND m.entry_id = i.entry_id)",
                        (self.reflector, ids))
            return cur.rowcount

    def set_watermarks(self, marks: Mapping[int, int]) -> None:
        self.store([], marks)

    # -- reading ------------------------------------------------------------------------------

    def log_after(self, seq: int) -> Iterator[tuple[int, int, bytes]]:
        yield from self._db.stream(
            "SELECT seq, entry_id, subs FROM reflector_matches WHERE reflector = %s AND seq > %s "
            "ORDER BY seq", (self.reflector, seq))

    def read_checkpoint(self) -> tuple[dict[str, np.ndarray], int] | None:
        rows = self._db.read("SELECT arrays, upto_seq FROM reflector_checkpoints "
                             "WHERE reflector = %s", (self.reflector,))
        if not rows:
            return None
        try:
            with np.load(io.BytesIO(rows[0][0])) as saved:
                return {name: saved[name] for name in saved.files}, int(rows[0][1])
        except (OSError, ValueError, KeyError) as exc:
            raise StoreError(f"reading the checkpoint of reflector {self.reflector} in "
                             f"{self._db.where} failed: {exc}") from exc

    def unheld_items(self, live: np.ndarray) -> np.ndarray:
        stored = np.fromiter((row[0] for row in self._db.stream(
            "SELECT entry_id FROM reflector_items WHERE reflector = %s", (self.reflector,))),
            dtype=np.int64)
        return np.setdiff1d(stored, live, assume_unique=True)

    def items(self, entry_ids: Sequence[int]) -> list[ReflectedItem]:
        if not entry_ids:
            return []
        rows = self._db.read("SELECT entry_id, data FROM reflector_items WHERE reflector = %s "
                             "AND entry_id = ANY(%s)",
                             (self.reflector, [int(e) for e in entry_ids]))
        found = dict(rows)
        return [_decoder.decode(found[e]) for e in entry_ids if e in found]

    def watermarks(self) -> dict[int, int]:
        rows = self._db.read("SELECT shard, mark FROM reflector_watermarks WHERE reflector = %s",
                             (self.reflector,))
        return {int(shard): int(mark) for shard, mark in rows}

    def counts(self) -> tuple[int, int]:
        rows = self._db.read(
            "SELECT (SELECT count(*) FROM reflector_items WHERE reflector = %s), "
            "(SELECT count(*) FROM reflector_matches WHERE reflector = %s)",
            (self.reflector, self.reflector))
        return int(rows[0][0]), int(rows[0][1])

    def close(self) -> None:
        self._db.close()
