"""The engines: the one module that chooses and constructs concrete stores and buses.

Everything outside :mod:`feedmesh.compose` takes ports (:mod:`feedmesh.store.ports`,
:mod:`feedmesh.bus.ports`) and constructs no implementation of them; an import contract
(``.importlinter``, checked by tests/test_architecture.py) keeps it so. A new engine (NATS
JetStream, PostgreSQL) is added here, chosen by settings, and nowhere else.

* :func:`open_bus`: a bus from its URL (``memory``, ``nats://HOST:PORT``);
* :func:`open_ingest_store`, :func:`open_hub_state`, :func:`open_reflector_log`: one store alone,
  at a *location*: a SQLite file's path, or a ``postgresql://`` URL (docs/distributed.md);
  :func:`existing_hub_state` for a role that reads a hub's state (``feedmesh filter``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
from collections.abc import Callable
from pathlib import Path

import msgspec

from feedmesh.bus import Bus
from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.bus.memory import MemoryBus
from feedmesh.hub.front.tokens import FeedTokens
from feedmesh.secret_file import new_token, read_token, write_secret
from feedmesh.store import (
    FeedOwnership,
    HubState,
    IngestStore,
    ReflectorLog,
    StoreError,
    storage_error,
)
from feedmesh.store.key_file import read_key, read_or_create_key, retire_key, rotate_key
from feedmesh.store.postgres import PostgresStore
from feedmesh.store.postgres_hub import PostgresHubState
from feedmesh.store.postgres_owners import PostgresFeedOwnership
from feedmesh.store.postgres_reflector import PostgresReflectorLog
from feedmesh.store.sqlite import SQLiteStore
from feedmesh.store.sqlite_hub import SQLiteHubState
from feedmesh.store.sqlite_owners import SQLiteFeedOwnership
from feedmesh.store.sqlite_reflector import SQLiteReflectorLog

__all__ = [
    "FEED_SECRET_FILE",
    "FEED_SECRET_PREVIOUS_FILE",
    "OPERATOR_TOKEN_FILE",
    "HubStores",
    "WebStores",
    "change_feed_url_keys",
    "existing_hub_state",
    "existing_operator_token",
    "feed_url_keys",
    "feed_url_tokens",
    "folder_keys",
    "is_database_url",
    "open_archive",
    "open_bus",
    "open_feed_ownership",
    "open_hub_state",
    "open_hub_stores",
    "open_ingest_store",
    "open_reflector_log",
    "open_web_stores",
    "operator_token",
    "private_feed_key",
]

FEED_SECRET_FILE = "feed-secret.key"
"""The key that signs private feed URLs, in the data folder, readable by its owner only."""
FEED_SECRET_PREVIOUS_FILE = "feed-secret.previous.key"
"""The feed-URL key rotated out (``feedmesh url-key rotate``), checking old URLs until retired."""
ARCHIVE_ENTRIES_PER_FEED = 1_000_000
"""A peer's archive keeps this many entries per feed (all of them, in practice)."""


def is_database_url(location: str | Path) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def open_ingest_store(location: str | Path) -> IngestStore:
    """The ingest store at ``location``: a ``postgresql://`` URL (its tables created or migrated
    when missing or older), else the SQLite file at that path (created when missing)."""
    return PostgresStore(location) if is_database_url(location) else SQLiteStore(location)


def open_feed_ownership(location: str | Path) -> FeedOwnership:
    """Which named crawler fetches which feed, beside the feeds: in the database of a
    ``postgresql://`` URL, else in the crawlers' SQLite file at that path."""
    if is_database_url(location):
        return PostgresFeedOwnership(location)
    return SQLiteFeedOwnership(location)


def open_archive(path: str | Path) -> IngestStore:
    """A peer's archive (``feedmesh peer``): the SQLite ingest store at ``path``, keeping every
    entry it sees rather than the crawler's latest few hundred per feed."""
    return SQLiteStore(path, max_entries_per_feed=ARCHIVE_ENTRIES_PER_FEED)


def open_hub_state(location: str | Path) -> HubState:
    """Accounts and subscriptions at ``location`` (a ``postgresql://`` URL or a file path)."""
    return PostgresHubState(location) if is_database_url(location) else SQLiteHubState(location)


def open_reflector_log(location: str | Path, reflector: int) -> ReflectorLog:
    """Reflector ``reflector``'s durable state: in the database of a ``postgresql://`` URL
    (every reflector's in the same tables, by number, checkpoint included), else in the SQLite
    file at that path (its checkpoint beside it)."""
    if is_database_url(location):
        return PostgresReflectorLog(location, reflector)
    return SQLiteReflectorLog(location)


def open_bus(url: str, *, buffer_bytes: int = 1024 * 1024, namespace: str = "feedmesh",
             credentials: str = "") -> Bus:
    """The bus named by ``url``: ``memory`` (in this process, ``buffer_bytes`` per group) or
    ``nats://HOST:PORT`` (JetStream; its streams named after ``namespace``, connected on first
    use, as the role whose nkey seed file is ``credentials`` when given). Anything else is a
    ValueError that says what is accepted."""
    if url in ("", "memory"):
        return MemoryBus(buffer_bytes)
    if url.startswith(("nats://", "tls://")):
        return JetStreamBus(url, namespace=namespace, credentials=credentials or None)
    raise ValueError(f"bus {url!r}: use 'memory' or a NATS URL such as nats://127.0.0.1:4222")


def existing_hub_state(location: str | Path) -> tuple[HubState, Callable[[], HubState]]:
    """A hub's accounts and subscriptions for a role in a process of its own: at a
    ``postgresql://`` URL, or in the SQLite file a hub made (``DATA/hub.db``, which must exist:
    a role never creates an empty hub), and a function that opens them again (for a child
    process)."""
    if not is_database_url(location) and not Path(location).is_file():
        raise StoreError(f"no hub database at {location}: give the hub.db of a hub's data "
                         "folder, or its postgresql:// URL")
    return open_hub_state(location), functools.partial(open_hub_state, location)


class HubStores(msgspec.Struct, kw_only=True):
    """What a crawling hub opens (:func:`open_hub_stores`): its stores, the keys of private feed
    URLs, and where its state is (for a process that reopens it)."""

    ingest: IngestStore
    state: HubState
    tokens: FeedTokens
    reflector_logs: list[ReflectorLog]
    ownership: FeedOwnership | None
    state_location: str | Path

    def close(self) -> None:
        for store in (*self.reflector_logs, self.ingest, self.state,
                      *([self.ownership] if self.ownership is not None else [])):
            store.close()


def open_hub_stores(data_dir: str | Path, store_url: str = "", *, reflectors: int,
                    named_crawler: bool, now: float) -> HubStores:
    """The crawling hub's stores on SQLite files in ``data_dir`` (or, given ``store_url``, on
    that PostgreSQL database), with the logs of the ``reflectors`` it runs itself.

    Files in ``data_dir`` (created 0700 when missing; the databases and the key are created
    0600): ``feedmesh.db`` (the ingest store), ``hub.db`` (accounts, subscriptions),
    ``feed-secret.key`` (signs private feed URLs), ``reflector-<n>.db`` and their checkpoints.
    With ``store_url`` the three stores (and the reflectors' checkpoints) are in PostgreSQL
    instead, and so is the key (a ``feed-secret.key`` already in the folder is brought over
    when the database has none); the filters' and the scheduler's snapshots stay in the
    folder. ``named_crawler``: the feed ownership table is opened too."""
    data = Path(data_dir)
    try:
        data.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_error(f"cannot create the data folder {data}: {exc.strerror or exc}",
                            exc) from exc
    opened: list = []
    try:
        ingest = open_ingest_store(store_url or data / "feedmesh.db")
        opened.append(ingest)
        state = (PostgresHubState(store_url) if store_url  # concrete: the legacy key below
                 else SQLiteHubState(data / "hub.db"))
        opened.append(state)
        if isinstance(state, PostgresHubState):
            # Kept in the database, where every process of the hub finds the same key; a hub
            # that kept it in its folder before brings it over (its URLs keep working).
            state.feed_secret(lambda: folder_key(data) or secrets.token_bytes(32), now=now)
            tokens = FeedTokens(*_split(state.feed_secrets()), load=state.feed_secrets)
        else:
            read_or_create_key(data / FEED_SECRET_FILE,
                               lambda: state.legacy_feed_secret() or secrets.token_bytes(32))
            state.forget_legacy_feed_secret()
            tokens = FeedTokens(*_split(folder_keys(data)),
                                load=functools.partial(folder_keys, data))
        ownership = (open_feed_ownership(store_url or data / "feedmesh.db")
                     if named_crawler else None)
        if ownership is not None:
            opened.append(ownership)
        logs = []
        for n in range(reflectors):
            logs.append(open_reflector_log(store_url or data / f"reflector-{n}.db", n))
            opened.append(logs[-1])
    except BaseException:
        for store in opened:  # a later file failed to open: close the earlier ones
            store.close()
        raise
    return HubStores(ingest=ingest, state=state, tokens=tokens, reflector_logs=logs,
                     ownership=ownership, state_location=store_url or data / "hub.db")


class WebStores(msgspec.Struct, kw_only=True):
    """What a web process of its own opens (:func:`open_web_stores`)."""

    state: HubState
    ingest: IngestStore
    tokens: FeedTokens

    def close(self) -> None:
        self.ingest.close()
        self.state.close()


def open_web_stores(data_dir: str | Path, store_url: str = "") -> WebStores:
    """A web process's view of the hub (``feedmesh web``): accounts and subscriptions in the
    hub's state, entries in its ingest store (both at ``store_url``, or the SQLite files of the
    hub's ``data_dir``), and the keys of private feed URLs: in the PostgreSQL database at
    ``store_url``, else in ``data_dir`` (copy it to every machine that runs a web process). The
    crawling hub made the key, and a web process never makes one, since a new key would break
    every reader's link."""
    data = Path(data_dir)
    key = data / FEED_SECRET_FILE
    if not store_url and not key.is_file():
        raise StoreError(f"no {FEED_SECRET_FILE} in {data}: give the crawling hub's data "
                         "folder (or a copy of its key), which signs every private feed URL")
    opened: list = []
    try:
        state = open_hub_state(store_url or existing_file(data / "hub.db"))
        opened.append(state)
        ingest = open_ingest_store(store_url or existing_file(data / "feedmesh.db"))
        opened.append(ingest)
        # With PostgreSQL the crawling hub keeps the keys in the database, for every machine.
        load = (state.feed_secrets if isinstance(state, PostgresHubState)
                else functools.partial(folder_keys, data))
        tokens = FeedTokens(*_split(load()), load=load)
    except BaseException:
        for store in opened:
            store.close()
        raise
    return WebStores(state=state, ingest=ingest, tokens=tokens)


def private_feed_key(data_dir: str | Path, store_url: str = "") -> bytes:
    """The key the crawling hub signs private feed URLs with: in its PostgreSQL database at
    ``store_url`` when given, else ``DATA/feed-secret.key``. Never made here (StoreError when
    the hub has not made it yet): for tools that build readers' URLs, like the benchmarks."""
    return feed_url_keys(data_dir, store_url)[0]


def folder_keys(data: Path) -> list[bytes]:
    """The keys for private feed URLs kept in a data folder: the one that makes them, then the
    one rotated out and not yet retired (``feedmesh url-key``), if any."""
    keys = [read_key(data / FEED_SECRET_FILE)]
    previous = data / FEED_SECRET_PREVIOUS_FILE
    if previous.is_file():
        keys.append(read_key(previous))
    return keys


def feed_url_tokens(state: HubState, location: str | Path) -> FeedTokens:
    """The keys of private feed URLs for a process that only checks them (a reflector's
    WebSub delivery workers): in the PostgreSQL database of ``state``, else beside the
    ``hub.db`` at ``location``."""
    # Read at first use, and again until found: a reflector starts before the crawling hub
    # that makes the key.
    if isinstance(state, PostgresHubState):
        return FeedTokens.loaded_later(state.feed_secrets)
    return FeedTokens.loaded_later(functools.partial(folder_keys, Path(location).parent))


def feed_url_keys(data_dir: str | Path, store_url: str = "") -> list[bytes]:
    """The keys of private feed URLs where the hub keeps them (its PostgreSQL database at
    ``store_url``, else ``data_dir``), the one that makes URLs first; StoreError when the hub
    has made none (never made here: ``feedmesh url-key``)."""
    if store_url:
        state = PostgresHubState(store_url)
        try:
            return state.feed_secrets()
        finally:
            state.close()
    data = Path(data_dir)
    if not (data / FEED_SECRET_FILE).is_file():
        raise StoreError(f"no {FEED_SECRET_FILE} in {data}: give the data folder of a hub that "
                         "has run (--data), or its database (--store postgresql://...)")
    return folder_keys(data)


def change_feed_url_keys(data_dir: str | Path, store_url: str, *, rotate: bool,
                         now: float) -> None:
    """``rotate``: a new key makes private feed URLs, the one it replaces still checks them
    (one rotated out before is dropped); else retire the key rotated out."""
    if store_url:
        state = PostgresHubState(store_url)
        try:
            if rotate:
                state.rotate_feed_secret(secrets.token_bytes(32), now)
            else:
                state.retire_feed_secret()
        finally:
            state.close()
        return
    data = Path(data_dir)
    if rotate:
        feed_url_keys(data)  # there is one to rotate
        rotate_key(data / FEED_SECRET_FILE, data / FEED_SECRET_PREVIOUS_FILE,
                   secrets.token_bytes(32))
    else:
        retire_key(data / FEED_SECRET_PREVIOUS_FILE)


def _split(keys: list[bytes]) -> tuple[bytes, list[bytes]]:
    return keys[0], keys[1:]


OPERATOR_TOKEN_FILE = "operator-token"


def operator_token(data_dir: str | Path) -> bytes:
    """The operator's bearer token (``DATA/operator-token``, 0600): made by the first process
    that needs it, all at once and only if no other process made it first (a link, which fails
    when the name exists), so every process of a hub holds the same one."""
    path = Path(data_dir) / OPERATOR_TOKEN_FILE
    if not path.exists():
        temporary = write_secret(path.with_name(f".{path.name}.{os.getpid()}.tmp"), new_token())
        try:
            with contextlib.suppress(FileExistsError):  # another process made it: that one
                os.link(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
    return read_token(path, "the operator token")


def existing_operator_token(data_dir: str | Path) -> bytes | None:
    """The operator's token if the hub made one in ``data_dir``, else None: for a process that
    keeps no files of its own (a web process: ``/api/stats`` then counts paused hosts for
    everyone)."""
    path = Path(data_dir) / OPERATOR_TOKEN_FILE
    return read_token(path, "the operator token") if path.exists() else None


def folder_key(data: Path) -> bytes | None:
    """The key a hub kept in its data folder (before PostgreSQL kept it), or None."""
    path = data / FEED_SECRET_FILE
    return read_key(path) if path.is_file() else None


def existing_file(path: Path) -> Path:
    """``path``, which a role that reads a hub's files must find made by the hub."""
    if not path.is_file():
        raise StoreError(f"no {path.name} in {path.parent}: give the crawling hub's data folder "
                         "(or a postgresql:// URL with --store)")
    return path
