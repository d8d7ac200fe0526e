"""The composition root: the one module that chooses and constructs concrete stores and buses.

Everything below takes ports (:mod:`feedmesh.store.ports`, :mod:`feedmesh.bus.ports`) and
constructs no implementation of them; a test (tests/test_architecture.py) checks that no other
module of ``src/`` imports one. A new engine (NATS JetStream, PostgreSQL) is added here, chosen by
settings, and nowhere else.

* :func:`embedded_hub`: the hub on one machine, on SQLite files in ``settings.data_dir`` and the
  in-process bus (``feedmesh serve``, ``feedmesh demo``), or NATS JetStream (``serve --bus``);
* :func:`open_bus`: a bus from its URL (``memory``, ``nats://HOST:PORT``);
* :func:`open_hub_state`: the hub's accounts and subscriptions, for a role in its own process
  (``feedmesh filter``);
* :func:`open_ingest_store`: the crawler's store alone (``feedmesh crawl``).
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from pathlib import Path

from aiohttp.abc import AbstractResolver

from feedmesh.bus import Bus
from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.bus.memory import MemoryBus
from feedmesh.clock import Clock, SystemClock
from feedmesh.fetch import Fetcher
from feedmesh.hub.app import Hub, HubSettings
from feedmesh.store import HubState, IngestStore, StoreError, storage_error
from feedmesh.store.key_file import read_or_create_key
from feedmesh.store.sqlite import SQLiteStore
from feedmesh.store.sqlite_hub import SQLiteHubState
from feedmesh.store.sqlite_reflector import SQLiteReflectorLog

__all__ = ["FEED_SECRET_FILE", "embedded_hub", "open_bus", "open_hub_state", "open_ingest_store"]

FEED_SECRET_FILE = "feed-secret.key"
"""The key that signs private feed URLs, in the data folder, readable by its owner only."""


def open_ingest_store(path: str | Path) -> IngestStore:
    """The ingest store in the SQLite file at ``path`` (created when missing)."""
    return SQLiteStore(path)


def open_bus(url: str, *, buffer_bytes: int = 1024 * 1024, namespace: str = "feedmesh") -> Bus:
    """The bus named by ``url``: ``memory`` (in this process, ``buffer_bytes`` per group) or
    ``nats://HOST:PORT`` (JetStream; its streams named after ``namespace``, connected on first
    use). Anything else is a ValueError that says what is accepted."""
    if url in ("", "memory"):
        return MemoryBus(buffer_bytes)
    if url.startswith(("nats://", "tls://")):
        return JetStreamBus(url, namespace=namespace)
    raise ValueError(f"bus {url!r}: use 'memory' or a NATS URL such as nats://127.0.0.1:4222")


def open_hub_state(location: str | Path) -> tuple[HubState, Callable[[], HubState]]:
    """The hub's accounts and subscriptions at ``location`` (the SQLite file a hub made,
    ``DATA/hub.db``), and a function that opens it again (for a child process)."""
    path = Path(location)
    if not path.is_file():
        raise StoreError(f"no hub database at {path}: give the hub.db of a hub's data folder")
    return SQLiteHubState(path), functools.partial(SQLiteHubState, path)


def embedded_hub(settings: HubSettings | None = None, *, clock: Clock | None = None,
                 fetcher: Fetcher | None = None,
                 resolver: AbstractResolver | None = None, bus: str = "memory",
                 bus_namespace: str = "feedmesh") -> Hub:
    """Every tier in this process on SQLite and the in-process bus.

    Files in ``settings.data_dir`` (created 0700 when missing; the databases and the key are
    created 0600): ``feedmesh.db`` (the ingest store), ``hub.db`` (accounts, subscriptions),
    ``feed-secret.key`` (signs private feed URLs), ``reflector-<n>.db`` and their checkpoints,
    the filters' index snapshots and the scheduler's snapshot. ``fetcher`` replaces the polite fetcher built from
    ``settings.fetch`` (tests give one with a fixed resolver); ``resolver`` is the DNS resolver
    of the one built here. ``bus`` is :func:`open_bus`'s URL: every tier still runs here, but
    they meet on a NATS server's streams, which outlive this process.
    """
    settings = settings or HubSettings()
    if settings.external_filters and bus in ("", "memory"):
        raise ValueError("filters in processes of their own (--external-filters) need a NATS "
                         "bus to meet them on: --bus nats://HOST:PORT")
    clock = clock or SystemClock()
    data = Path(settings.data_dir)
    try:
        data.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_error(f"cannot create the data folder {data}: {exc.strerror or exc}",
                            exc) from exc
    state_path = data / "hub.db"
    opened: list = []
    try:
        ingest = SQLiteStore(data / "feedmesh.db")
        opened.append(ingest)
        state = SQLiteHubState(state_path)
        opened.append(state)
        feed_secret = read_or_create_key(
            data / FEED_SECRET_FILE, lambda: state.legacy_feed_secret() or secrets.token_bytes(32))
        state.forget_legacy_feed_secret()
        logs = []
        for n in range(settings.reflectors):
            logs.append(SQLiteReflectorLog(data / f"reflector-{n}.db"))
            opened.append(logs[-1])
    except BaseException:
        for store in opened:  # a later file failed to open: close the earlier ones
            store.close()
        raise
    return Hub(settings, ingest=ingest, state=state, reflector_logs=logs,
               bus=open_bus(bus, buffer_bytes=settings.bus_buffer_bytes,
                            namespace=bus_namespace),
               fetcher=fetcher or Fetcher(settings.fetch, clock=clock, resolver=resolver),
               clock=clock, open_state=functools.partial(SQLiteHubState, state_path),
               data_dir=data, feed_secret=feed_secret)
