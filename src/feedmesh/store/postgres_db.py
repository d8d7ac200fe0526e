"""One PostgreSQL database as every PostgreSQL store opens it: a writer connection and a reader
one (psycopg 3, synchronous), transactions that turn PostgreSQL's errors into
:class:`~.ports.StoreError` naming the server, what was being done and the SQLSTATE, and
versioned migrations.

**Errors.** ``disk_full`` (53100) is a :class:`~.ports.StorageFullError`;
``read_only_sql_transaction`` (25006: a hot standby, ``default_transaction_read_only``) and
``insufficient_privilege`` (42501) are a :class:`~.ports.StorageReadOnlyError`; a server that
cannot be reached, a connection that broke, a server shutting down or starting (SQLSTATE class
08, 57P01-57P03) or out of connections (53300) a :class:`~.ports.StoreUnavailableError`;
anything else a plain :class:`~.ports.StoreError`. A connection that
broke (the server restarted) is opened again by the next operation: the failed one is reported,
never retried behind the caller's back (the caller knows whether it is safe to repeat).

**Migrations.** Each store names a *component* and its ordered SQL steps; step ``n`` brings the
component to version ``n``. Opening a store applies the steps it lacks in one transaction under
an advisory lock, so two processes opening the same database at once never apply a step twice,
and records each in ``feedmesh_migrations (component, version, applied_at)``. A database newer
than this feedmesh (a version it does not know) is refused, not guessed at.

**Commit order.** Where a port needs ids in commit order (entry ids, the change log), the store
takes a transaction-scoped advisory lock (:data:`LOCKS`) before it draws ids from a sequence and
holds it to the commit: writers of that table commit one after another.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg
from psycopg.conninfo import conninfo_to_dict

from feedmesh.store.ports import StoreError, storage_error

__all__ = ["LOCKS", "LOCK_CLASS", "PostgresDatabase", "describe_url", "pg_error"]

_cursor_names = itertools.count(1)
_FULL = frozenset({"53100"})  # disk_full
_READ_ONLY = frozenset({"25006", "42501"})  # read_only_sql_transaction, insufficient_privilege
# admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections (and class 08)
_UNAVAILABLE = frozenset({"57P01", "57P02", "57P03", "53300"})

LOCK_CLASS = 0x66656564  # "feed": the first key of every advisory lock feedmesh takes
LOCKS = {"migrations": 1, "entries": 2, "subscription_log": 3, "reflector": 4}
"""The second key per purpose; a reflector's lock is ``(LOCK_CLASS + reflector, 4)``."""


def describe_url(url: str) -> str:
    """The URL without its password: what error messages and logs name."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(unparseable URL)"
    user = f"{params['user']}@" if params.get("user") else ""
    host = params.get("host") or "localhost"
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{host}{port}/{params.get('dbname', '')}"


def pg_error(message: str, exc: psycopg.Error) -> StoreError:
    """The StoreError for a PostgreSQL failure, ``message`` followed by the server's reason and
    the SQLSTATE: full, read-only, unavailable (see the module docstring) or plain."""
    sqlstate = exc.sqlstate or ""
    # No SQLSTATE on an OperationalError: the client's own failure to connect or to talk.
    unavailable = isinstance(exc, psycopg.OperationalError) and (
        not sqlstate or sqlstate.startswith("08") or sqlstate in _UNAVAILABLE)
    return storage_error(f"{message}: {_reason(exc)}", full=sqlstate in _FULL,
                         read_only=sqlstate in _READ_ONLY, unavailable=unavailable)


def _reason(exc: psycopg.Error) -> str:
    text = (exc.diag.message_primary if exc.sqlstate else None) or str(exc).strip()
    text = text.splitlines()[0] if text else type(exc).__name__
    return f"{text} [SQLSTATE {exc.sqlstate}]" if exc.sqlstate else text


class PostgresDatabase:
    """The connections of one store to one database. Each connection is used by one thread at
    a time (a lock guards it); reads see the last committed state (READ COMMITTED)."""

    def __init__(self, url: str, *, what: str, component: str,
                 migrations: Sequence[str]) -> None:
        self.url = url
        self.where = describe_url(url)
        self.what = what
        self._write_lock = threading.RLock()
        self._read_lock = threading.RLock()
        self._writer: psycopg.Connection | None = None
        self._reader: psycopg.Connection | None = None
        self._closed = False
        try:
            self._migrate(component, migrations)
        except psycopg.Error as exc:
            self.close()
            raise pg_error(f"cannot open {what} {self.where}", exc) from exc
        except StoreError:
            self.close()
            raise

    def open_connection(self) -> psycopg.Connection:
        """A new autocommit connection to the database (the caller closes it)."""
        params = conninfo_to_dict(self.url)
        params.setdefault("connect_timeout", "10")
        params.setdefault("application_name", "feedmesh")
        return psycopg.connect(**params, autocommit=True)

    def connection(self, which: str) -> psycopg.Connection:
        """The writer or reader connection, opened again when it broke."""
        if self._closed:
            raise psycopg.InterfaceError(f"the {self.what} was closed")
        conn = self._writer if which == "writer" else self._reader
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            conn = self.open_connection()
            if which == "writer":
                self._writer = conn
            else:
                self._reader = conn
        return conn

    def _migrate(self, component: str, steps: Sequence[str]) -> None:
        """Apply the steps the database lacks. An up-to-date database is only read, so a store
        opens on a read-only database (a standby) and fails at its first write, not here."""
        with self._read_lock, self.connection("reader").cursor() as cur:
            cur.execute("SELECT to_regclass('feedmesh_migrations') IS NOT NULL")
            if cur.fetchone()[0]:
                cur.execute("SELECT coalesce(max(version), 0) FROM feedmesh_migrations "
                            "WHERE component = %s", (component,))
                if int(cur.fetchone()[0]) == len(steps):
                    return
        with self._write_lock:
            conn = self.connection("writer")
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s, %s)",
                            (LOCK_CLASS, LOCKS["migrations"]))
                cur.execute("CREATE TABLE IF NOT EXISTS feedmesh_migrations ("
                            "component text NOT NULL, version integer NOT NULL, "
                            "applied_at timestamptz NOT NULL DEFAULT now(), "
                            "PRIMARY KEY (component, version))")
                cur.execute("SELECT coalesce(max(version), 0) FROM feedmesh_migrations "
                            "WHERE component = %s", (component,))
                have = int(cur.fetchone()[0])
                if have > len(steps):
                    raise StoreError(f"cannot open {self.what} {self.where}: its {component} "
                                     f"schema is at version {have}, this feedmesh knows "
                                     f"{len(steps)} (a newer feedmesh made it)")
                for version in range(have + 1, len(steps) + 1):
                    cur.execute(steps[version - 1])
                    cur.execute("INSERT INTO feedmesh_migrations (component, version) "
                                "VALUES (%s, %s)", (component, version))

    def schema_version(self, component: str) -> int:
        rows = self.read("SELECT coalesce(max(version), 0) FROM feedmesh_migrations "
                         "WHERE component = %s", (component,))
        return int(rows[0][0])

    def _begin(self, which: str) -> psycopg.Connection:
        """``BEGIN`` on the writer or reader connection. A connection that died while idle (the
        server restarted since its last use) is found dead here, before anything was done, so
        it is opened again and ``BEGIN`` tried once more: safe, and the first operation after a
        server's restart does not fail for nothing."""
        conn = self.connection(which)
        try:
            conn.execute("BEGIN")
        except psycopg.OperationalError:
            if not conn.broken:
                raise
            conn = self.connection(which)
            conn.execute("BEGIN")
        return conn

    @staticmethod
    def _end(conn: psycopg.Connection, commit: bool) -> None:
        if commit:
            conn.execute("COMMIT")
            return
        if not conn.broken:
            # The connection may break meanwhile: then the server rolled back for us.
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")

    @contextmanager
    def write(self, doing: str, lock: tuple[int, int] | None = None) -> Iterator[psycopg.Cursor]:
        """A write transaction: committed when the block ends, rolled back if it raises.
        ``lock``: an advisory lock taken first and held to the commit. When the connection
        breaks during ``COMMIT`` the outcome is unknown: the store's writes are idempotent so
        that the caller may repeat them."""
        with self._write_lock:
            try:
                conn = self._begin("writer")
                try:
                    with conn.cursor() as cur:
                        if lock is not None:
                            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", lock)
                        yield cur
                except BaseException:
                    self._end(conn, commit=False)
                    raise
                self._end(conn, commit=True)
            except psycopg.Error as exc:
                raise pg_error(f"{doing} failed in {self.where}", exc) from exc

    def read(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        """All rows of a query, from the last committed state."""
        with self._read_lock:
            try:
                conn = self.connection("reader")
                try:
                    return self._fetch_all(conn, sql, params)
                except psycopg.OperationalError:
                    if not conn.broken:
                        raise
                    # the connection died while idle: a read is safe to repeat on a new one
                    return self._fetch_all(self.connection("reader"), sql, params)
            except psycopg.Error as exc:
                raise pg_error(f"reading {self.what} {self.where} failed", exc) from exc

    @staticmethod
    def _fetch_all(conn: psycopg.Connection, sql: str, params: Sequence[object]) -> list[tuple]:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def stream(self, sql: str, params: Sequence[object] = (),
               chunk: int = 50_000) -> Iterator[tuple]:
        """The rows of a query, fetched ``chunk`` at a time through a server-side cursor
        (millions of rows, little memory). Holds the read connection until the iteration
        ends."""
        with self._read_lock:
            try:
                conn = self._begin("reader")
                try:
                    name = f"feedmesh_stream_{next(_cursor_names)}"
                    with conn.cursor(name=name) as cur:
                        cur.itersize = chunk
                        cur.execute(sql, params)
                        while rows := cur.fetchmany(chunk):
                            yield from rows
                finally:
                    self._end(conn, commit=False)
            except psycopg.Error as exc:
                raise pg_error(f"reading {self.what} {self.where} failed", exc) from exc

    def close(self) -> None:
        with self._write_lock, self._read_lock:
            self._closed = True
            for conn in (self._writer, self._reader):
                if conn is not None:
                    conn.close()
            self._writer = self._reader = None
