"""A real PostgreSQL for the tests: the server given by ``FEEDMESH_TEST_POSTGRES`` (a
``postgresql://`` URL of a role that may create databases), else one started here with
:class:`feedmesh.store.pg_server.LocalPostgres` in a temporary folder (``initdb``, a free port on
127.0.0.1, fsync off), one per test session (per xdist worker), stopped at its end.

Fixtures (import them into a ``conftest.py`` that needs them):

* ``postgres_server``: the server's URL (its maintenance database), session-wide; for the
  server started here, the superuser's with ``?passfile=`` (0600), which holds no password and
  so may go on the command lines of the processes the tests start;
* ``postgres_url``: the URL of an empty database for one test (created, or one an earlier test
  used, emptied).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from feedmesh.store.pg_login import PgLogin
from feedmesh.store.pg_server import LocalPostgres, LocalPostgresError

__all__ = ["database_url", "postgres_server", "postgres_url", "with_password"]

ENV = "FEEDMESH_TEST_POSTGRES"


def with_password(url: str) -> str:
    """``url`` with the password its passfile holds written into it (for tests of what is done
    with such a URL, in this process only); a URL that holds its password is returned as it is."""
    parts = urlsplit(url)
    if parts.password:
        return url
    query = dict(parse_qsl(parts.query))
    line = Path(query.pop("passfile")).read_text().splitlines()[0]
    password = re.split(r"(?<!\\):", line)[-1].replace("\\:", ":").replace("\\\\", "\\")
    user = quote(parts.username or "")
    netloc = f"{user}:{quote(password, safe='')}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query)))


def database_url(server_url: str, database: str) -> str:
    """``server_url`` pointing at ``database`` instead."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{database}"))


_local: list[LocalPostgres] = []  # this session's server, once started
_logins: list[PgLogin] = []  # its superuser's login, through a passfile
_users = [0]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """Each conftest that imports this makes a session fixture of its own: they share one server
    (counted), stopped when the last of them ends."""
    given = os.environ.get(ENV)
    if given:
        yield given
        with psycopg.connect(given, autocommit=True) as admin:  # leave it as we found it
            for name in _pools.pop(given, _Databases(given)).free:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        return
    if not _local:
        folder = tempfile.mkdtemp(prefix="feedmesh-test-pg-")  # not in pytest's 0700 tmp: the
        server = LocalPostgres(folder, durable=False)          # server's user must reach it
        try:
            server.start()
        except LocalPostgresError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            pytest.fail(f"no PostgreSQL for the tests: {exc} (or set {ENV} to a server's URL)",
                        pytrace=False)
        _local.append(server)
        # the URL the tests hand their processes names a passfile: no password on a command line
        _logins.append(server.superuser_login(
            Path(tempfile.mkdtemp(prefix="feedmesh-test-")) / "superuser.pgpass"))
    server, login = _local[0], _logins[0]
    url = login.url
    _users[0] += 1
    try:
        yield url
    finally:
        _users[0] -= 1
        if not _users[0]:
            _pools.pop(url, None)
            _local.clear()
            _logins.clear()
            server.stop()
            shutil.rmtree(server.folder, ignore_errors=True)
            shutil.rmtree(login.passfile.parent, ignore_errors=True)


class _Databases:
    """Empty databases for tests. Creating one costs about 0.4 s (a copy of the template), so
    a database a test is done with is emptied (its sessions ended, its schema dropped and made
    again, its settings reset: about 30 ms) and handed to the next test."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.free: list[str] = []

    def take(self) -> str:
        if self.free:
            return self.free.pop()
        name = f"feedmesh_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.server_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return name

    def give_back(self, name: str) -> None:
        with psycopg.connect(self.server_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            admin.execute(f'ALTER DATABASE "{name}" RESET ALL')
        with psycopg.connect(database_url(self.server_url, name), autocommit=True) as db:
            db.execute("DROP SCHEMA public CASCADE")
            db.execute("CREATE SCHEMA public")
            left = db.execute("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON "
                              "n.oid = c.relnamespace WHERE n.nspname NOT IN "
                              "('pg_catalog', 'information_schema', 'pg_toast')").fetchone()[0]
        if left:  # something outside the public schema: do not hand it on
            with psycopg.connect(self.server_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        self.free.append(name)


_pools: dict[str, _Databases] = {}
"""The session's server URL -> its databases (one session, one server)."""


@pytest.fixture
def postgres_url(postgres_server) -> Iterator[str]:
    databases = _pools.setdefault(postgres_server, _Databases(postgres_server))
    name = databases.take()
    try:
        yield database_url(postgres_server, name)
    finally:
        databases.give_back(name)
