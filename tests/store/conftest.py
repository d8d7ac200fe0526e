"""The implementations every storage contract suite runs against, one fixture per port.

Each ``*_opener`` fixture returns a function that opens the same database again each time it is
called (restarts are part of the contracts); the plain fixture is one open store, closed after the
test. A new implementation adds a parameter here, not tests. PostgreSQL runs on a real server
(tests/postgres.py: ``FEEDMESH_TEST_POSTGRES``, else one started for the session), a fresh
database per test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from feedmesh.store import FeedOwnership, HubState, IngestStore, ReflectorLog
from feedmesh.store.postgres import PostgresStore
from feedmesh.store.postgres_hub import PostgresHubState
from feedmesh.store.postgres_owners import PostgresFeedOwnership
from feedmesh.store.postgres_reflector import PostgresReflectorLog
from feedmesh.store.sqlite import SQLiteStore
from feedmesh.store.sqlite_hub import SQLiteHubState
from feedmesh.store.sqlite_owners import SQLiteFeedOwnership
from feedmesh.store.sqlite_reflector import SQLiteReflectorLog
from tests.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures

IMPLEMENTATIONS = ["sqlite", "postgresql"]


def _url(request) -> str:
    return request.getfixturevalue("postgres_url")


@pytest.fixture(params=IMPLEMENTATIONS)
def ingest_opener(request, tmp_path) -> Callable[..., IngestStore]:
    if request.param == "postgresql":
        url = _url(request)
        return lambda **options: PostgresStore(url, **options)
    return lambda **options: SQLiteStore(tmp_path / "feedmesh.db", **options)


@pytest.fixture
def ingest(ingest_opener) -> Iterator[IngestStore]:
    store = ingest_opener()
    yield store
    store.close()


@pytest.fixture(params=IMPLEMENTATIONS)
def hub_state_opener(request, tmp_path) -> Callable[[], HubState]:
    if request.param == "postgresql":
        url = _url(request)
        return lambda: PostgresHubState(url)
    return lambda: SQLiteHubState(tmp_path / "hub.db")


@pytest.fixture
def hub_state(hub_state_opener) -> Iterator[HubState]:
    state = hub_state_opener()
    yield state
    state.close()


@pytest.fixture(params=IMPLEMENTATIONS)
def reflector_log_opener(request, tmp_path) -> Callable[..., ReflectorLog]:
    """``opener(n)``: reflector number ``n``'s log (0 by default)."""
    if request.param == "postgresql":
        url = _url(request)
        return lambda reflector=0: PostgresReflectorLog(url, reflector)
    return lambda reflector=0: SQLiteReflectorLog(tmp_path / f"reflector-{reflector}.db")


@pytest.fixture
def reflector_log(reflector_log_opener) -> Iterator[ReflectorLog]:
    log = reflector_log_opener()
    yield log
    log.close()


@pytest.fixture(params=IMPLEMENTATIONS)
def ownership_opener(request, tmp_path) -> Callable[[], FeedOwnership]:
    """Opens the same feed ownership table again each call (several crawlers share it)."""
    if request.param == "postgresql":
        url = _url(request)
        return lambda: PostgresFeedOwnership(url)
    return lambda: SQLiteFeedOwnership(tmp_path / "feedmesh.db")


@pytest.fixture
def ownership(ownership_opener) -> Iterator[FeedOwnership]:
    table = ownership_opener()
    yield table
    table.close()


@pytest.fixture(params=IMPLEMENTATIONS)
def ingest_and_ownership(request, tmp_path) -> Iterator[tuple[IngestStore, FeedOwnership]]:
    """An ingest store and the ownership table beside it, in one database."""
    if request.param == "postgresql":
        url = _url(request)
        pair = (PostgresStore(url), PostgresFeedOwnership(url))
    else:
        pair = (SQLiteStore(tmp_path / "feedmesh.db"),
                SQLiteFeedOwnership(tmp_path / "feedmesh.db"))
    yield pair
    for store in pair:
        store.close()
