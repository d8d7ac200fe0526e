"""A real PostgreSQL for the tests: the server given by ``FEEDMESH_TEST_POSTGRES`` (a
``postgresql://`` URL of a role that may create databases), else one started here with
:class:`feedmesh.store.pg_server.LocalPostgres` in a temporary folder (``initdb``, a free port on
127.0.0.1, fsync off), one per test session (per xdist worker), stopped at its end.

Fixtures (import them into a ``conftest.py`` that needs them):

* ``postgres_server``: the server's URL (its maintenance database), session-wide;
* ``postgres_url``: the URL of a fresh, empty database for one test, dropped after it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from feedmesh.store.pg_server import LocalPostgres, LocalPostgresError

__all__ = ["database_url", "postgres_server", "postgres_url"]

ENV = "FEEDMESH_TEST_POSTGRES"


def database_url(server_url: str, database: str) -> str:
    """``server_url`` pointing at ``database`` instead."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    given = os.environ.get(ENV)
    if given:
        yield given
        return
    folder = tempfile.mkdtemp(prefix="feedmesh-test-pg-")  # not under pytest's 0700 tmp: the
    server = LocalPostgres(folder, durable=False)          # server's own user must reach it
    try:
        server.start()
    except LocalPostgresError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"no PostgreSQL for the tests: {exc} (or set {ENV} to a server's URL)",
                    pytrace=False)
    try:
        yield server.url()
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server) -> Iterator[str]:
    name = f"feedmesh_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(postgres_server, name)
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
