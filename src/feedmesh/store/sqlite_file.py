"""One SQLite file as every SQLite store opens it: WAL, a writer connection and a reader one,
transactions that turn SQLite's errors into :class:`~.ports.StoreError` naming the file and what
was being done.

WAL with ``synchronous=NORMAL`` keeps every committed transaction through a process crash
(``kill -9``); only a power cut can lose the last few, and none can corrupt the file. Writes take
``BEGIN IMMEDIATE`` (the write lock at once, so two writers never deadlock on an upgrade). Reads go
through a second connection, so a web handler reading in a worker thread never waits behind the
writer: WAL lets it see the last committed state meanwhile. Each connection is used by one thread
at a time (a lock guards it).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from feedmesh.store.ports import StoreError, storage_error

__all__ = ["SQLiteFile"]

_FULL = {sqlite3.SQLITE_FULL}
_READ_ONLY = {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_CANTOPEN}
_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}  # another writer held it past the timeout


def _sqlite_error(message: str, exc: sqlite3.Error) -> StoreError:
    """The StoreError for a SQLite failure: full (SQLITE_FULL: the disk, or the database's page
    limit), read-only, unavailable (busy: another process held the file past the timeout) or
    plain; extended result codes keep their primary code in the low byte."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    return storage_error(message, full=code in _FULL, read_only=code in _READ_ONLY,
                         unavailable=code in _BUSY)


class SQLiteFile:
    """``path=":memory:"`` for a throw-away database (one connection then: a second one would
    open a second, empty database)."""

    def __init__(self, path: str | Path, schema: str, *, what: str,
                 foreign_keys: bool = False) -> None:
        self.path = str(path)
        self.what = what
        self._write_lock = threading.RLock()
        self._read_lock = threading.RLock()
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                # Readable by its owner only (SQLite gives its -wal and -shm files the same).
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
            self._writer = self._connect(foreign_keys)
            self._writer.executescript(schema)
            self._reader = (self._connect(foreign_keys) if self.path != ":memory:"
                            else self._writer)
            if self._reader is self._writer:
                self._read_lock = self._write_lock
        except sqlite3.Error as exc:
            raise _sqlite_error(f"cannot open {what} {self.path}: {exc}", exc) from exc
        except OSError as exc:
            raise storage_error(f"cannot open {what} {self.path}: {exc.strerror or exc}",
                                exc) from exc

    def _connect(self, foreign_keys: bool) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=5000")
        if foreign_keys:
            db.execute("PRAGMA foreign_keys=ON")
        return db

    @contextmanager
    def write(self, doing: str) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed when the block ends, rolled back if it raises."""
        with self._write_lock:
            db = self._writer
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _sqlite_error(f"{doing} failed in {self.path}: {exc}", exc) from exc

    def read(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        """All rows of a query, from the last committed state."""
        with self._read_lock:
            try:
                return self._reader.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"reading {self.what} {self.path} failed: {exc}") from exc

    def stream(self, sql: str, params: Sequence[object] = (),
               chunk: int = 50_000) -> Iterator[tuple]:
        """The rows of a query, fetched ``chunk`` at a time (millions of rows, little memory).
        Holds the read connection until the iteration ends."""
        with self._read_lock:
            try:
                cursor = self._reader.execute(sql, params)
                while rows := cursor.fetchmany(chunk):
                    yield from rows
            except sqlite3.Error as exc:
                raise StoreError(f"reading {self.what} {self.path} failed: {exc}") from exc

    def close(self) -> None:
        with self._write_lock, self._read_lock:
            if self._reader is not self._writer:
                self._reader.close()
            self._writer.close()
