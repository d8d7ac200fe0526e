"""Persistence: the storage port (:mod:`.base`), Cobra's dedup decisions (:mod:`.dedup`), and the
embedded SQLite implementation (:mod:`.sqlite`). A PostgreSQL implementation of the same port is
the next step for the distributed deployment."""

from feedmesh.store.base import FeedRow, FeedUpdate, IngestedEntry, Posting, Store, StoreError
from feedmesh.store.dedup import classify_entries, document_hash
from feedmesh.store.runner import StoreThread
from feedmesh.store.sqlite import SQLiteStore

__all__ = [
    "FeedRow",
    "FeedUpdate",
    "IngestedEntry",
    "Posting",
    "SQLiteStore",
    "Store",
    "StoreError",
    "StoreThread",
    "classify_entries",
    "document_hash",
]
