"""The implementations every storage contract suite runs against, one fixture per port.

Each ``*_opener`` fixture returns a function that opens the same database again each time it is
called (restarts are part of the contracts); the plain fixture is one open store, closed after the
test. A new implementation (PostgreSQL) adds a parameter here, not tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from feedmesh.store import HubState, IngestStore, ReflectorLog
from feedmesh.store.sqlite import SQLiteStore
from feedmesh.store.sqlite_hub import SQLiteHubState
from feedmesh.store.sqlite_reflector import SQLiteReflectorLog

IMPLEMENTATIONS = ["sqlite"]


@pytest.fixture(params=IMPLEMENTATIONS)
def ingest_opener(request, tmp_path) -> Callable[..., IngestStore]:
    def open_store(**options: Any) -> IngestStore:
        return SQLiteStore(tmp_path / "feedmesh.db", **options)

    return open_store


@pytest.fixture
def ingest(ingest_opener) -> Iterator[IngestStore]:
    store = ingest_opener()
    yield store
    store.close()


@pytest.fixture(params=IMPLEMENTATIONS)
def hub_state_opener(request, tmp_path) -> Callable[[], HubState]:
    return lambda: SQLiteHubState(tmp_path / "hub.db")


@pytest.fixture
def hub_state(hub_state_opener) -> Iterator[HubState]:
    state = hub_state_opener()
    yield state
    state.close()


@pytest.fixture(params=IMPLEMENTATIONS)
def reflector_log_opener(request, tmp_path) -> Callable[[], ReflectorLog]:
    return lambda: SQLiteReflectorLog(tmp_path / "reflector-0.db")


@pytest.fixture
def reflector_log(reflector_log_opener) -> Iterator[ReflectorLog]:
    log = reflector_log_opener()
    yield log
    log.close()
