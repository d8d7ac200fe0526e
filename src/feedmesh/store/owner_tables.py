"""The feed ownership table's definition on each engine: made by whichever store opens the
database first, the ownership table (:mod:`.sqlite_owners`, :mod:`.postgres_owners`) or the
ingest store (:mod:`.sqlite`, :mod:`.postgres`), which checks fenced intents against it in the
transaction that applies them."""

__all__ = ["POSTGRES_OWNERS", "SQLITE_OWNERS"]

SQLITE_OWNERS = """
CREATE TABLE IF NOT EXISTS feed_owners (
    feed_id INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    next_owner TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS feed_owners_by_owner ON feed_owners (owner);
"""

POSTGRES_OWNERS = """
    CREATE TABLE IF NOT EXISTS feed_owners (
        feed_id bigint PRIMARY KEY,
        owner text NOT NULL,
        epoch bigint NOT NULL,
        next_owner text NOT NULL DEFAULT ''
    );
    CREATE INDEX IF NOT EXISTS feed_owners_by_owner ON feed_owners (owner);
"""
