"""Persistence: the storage ports (:mod:`.ports`: what each kind of state guarantees), Cobra's
dedup decisions (:mod:`.dedup`), and the embedded SQLite implementations of the ports
(:mod:`.sqlite`, :mod:`.sqlite_hub`, :mod:`.sqlite_reflector`, :mod:`.sqlite_owners`, sharing
:mod:`.sqlite_file`), the distributed deployment's PostgreSQL implementations of the same ports
(:mod:`.postgres`, :mod:`.postgres_hub`, :mod:`.postgres_reflector`, :mod:`.postgres_owners`,
sharing :mod:`.postgres_db`), and a PostgreSQL server of our own for tests and ``feedmesh up``
(:mod:`.pg_server`). Which implementation a program uses is chosen in its composition root
(:mod:`feedmesh.compose`), nowhere else.

Exceptions drawn from this package::

    Exception
     └── StoreError                a storage operation failed (the store, the operation, the cause)
          ├── StorageFullError     the disk or the database's size limit is full
          ├── StorageReadOnlyError the storage refuses writes
          └── StoreUnavailableError the store's server cannot be reached now
"""

from feedmesh.store.dedup import classify_entries, document_hash
from feedmesh.store.ports import (
    Account,
    FeedOwner,
    FeedOwnership,
    FeedRow,
    FeedUpdate,
    FollowedSource,
    HubState,
    IngestedEntry,
    IngestStore,
    Posting,
    PushAttempt,
    PushTarget,
    ReflectedItem,
    ReflectorLog,
    StorageFullError,
    StorageReadOnlyError,
    StoreError,
    StoreUnavailableError,
    Subscription,
    storage_error,
)
from feedmesh.store.runner import StoreThread

__all__ = [
    "Account",
    "FeedOwner",
    "FeedOwnership",
    "FeedRow",
    "FeedUpdate",
    "FollowedSource",
    "HubState",
    "IngestStore",
    "IngestedEntry",
    "Posting",
    "PushAttempt",
    "PushTarget",
    "ReflectedItem",
    "ReflectorLog",
    "StorageFullError",
    "StorageReadOnlyError",
    "StoreError",
    "StoreThread",
    "StoreUnavailableError",
    "Subscription",
    "classify_entries",
    "document_hash",
    "storage_error",
]
