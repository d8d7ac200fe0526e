"""The embedded :class:`~.ports.HubState`: accounts, subscriptions, follows and the
subscription change log in one SQLite file (``hub.db``), beside the ingest store: it changes when
people act, not when feeds post, so it never competes with the ingest path for the write lock.

Secrets: an account's API token is ``fm_<account id>_<secret>``; only ``sha256(secret)`` is stored
and it is compared with :func:`hmac.compare_digest` (constant time); rotating it revokes the old
one. The change log is filled by triggers, in the transaction of the change: nothing can forget.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from feedmesh.model import WebSubLease
from feedmesh.store.columns import (
    PUSH_ATTEMPT_COLUMNS,
    PUSH_TARGET_COLUMNS,
    SUBSCRIPTION_COLUMNS,
    push_attempt,
    push_target,
    subscription_columns,
)
from feedmesh.store.ports import Account, FollowedSource, PushAttempt, PushTarget, Subscription
from feedmesh.store.sqlite_file import SQLiteFile
from feedmesh.store.websub_rows import WEBSUB_LEASE_COLUMNS, websub_lease, websub_row

__all__ = ["SQLiteHubState"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS accounts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL DEFAULT '',
    token_hash BLOB NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS subscriptions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name TEXT NOT NULL DEFAULT '',
    query TEXT NOT NULL,
    keep INTEGER NOT NULL DEFAULT 10,
    reflector INTEGER NOT NULL DEFAULT 0,
    generation INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    changed_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS subscriptions_by_account ON subscriptions (account_id);
CREATE TABLE IF NOT EXISTS account_sources (
    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    feed_id INTEGER NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    added_at REAL NOT NULL,
    category TEXT NOT NULL DEFAULT '',
    html_url TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (account_id, feed_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS account_sources_by_feed ON account_sources (feed_id);
-- Every change to a subscription, in order: lets a filter shard restore its index from a
-- snapshot taken at some seq and apply only the changes since (triggers: nothing can forget).
CREATE TABLE IF NOT EXISTS subscription_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    sub_id INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS subscription_added AFTER INSERT ON subscriptions
    BEGIN INSERT INTO subscription_log (sub_id) VALUES (NEW.id); END;
CREATE TRIGGER IF NOT EXISTS subscription_changed AFTER UPDATE ON subscriptions
    BEGIN INSERT INTO subscription_log (sub_id) VALUES (NEW.id); END;
CREATE TRIGGER IF NOT EXISTS subscription_deleted AFTER DELETE ON subscriptions
    BEGIN INSERT INTO subscription_log (sub_id) VALUES (OLD.id); END;
-- Where subscriptions are pushed (WebSub callbacks, webhooks) and the last deliveries to each.
CREATE TABLE IF NOT EXISTS push_targets (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sub_id INTEGER NOT NULL REFERENCES subscriptions(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    url TEXT NOT NULL,
    topic TEXT NOT NULL DEFAULT '',
    format TEXT NOT NULL DEFAULT '',
    secret TEXT NOT NULL DEFAULT '',
    lease_seconds INTEGER NOT NULL DEFAULT 0,
    expires_at REAL,
    created_at REAL NOT NULL,
    delivered_before REAL NOT NULL DEFAULT 0,
    signature TEXT NOT NULL DEFAULT 'sha256',
    UNIQUE (sub_id, kind, topic, url)
);
CREATE TABLE IF NOT EXISTS push_attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    target_id INTEGER NOT NULL REFERENCES push_targets(id) ON DELETE CASCADE,
    at REAL NOT NULL,
    attempt INTEGER NOT NULL,
    status INTEGER NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    entries INTEGER NOT NULL DEFAULT 0,
    elapsed_ms REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS push_attempts_by_target ON push_attempts (target_id, id);

-- Our push subscriptions at publishers' WebSub hubs (feedmesh.websub.lease: their states).
CREATE TABLE IF NOT EXISTS websub_leases (
    callback_id TEXT PRIMARY KEY,
    feed_id INTEGER NOT NULL,
    topic TEXT NOT NULL,
    hub TEXT NOT NULL,
    secret TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,
    awaiting INTEGER NOT NULL DEFAULT 0,
    lease_s REAL NOT NULL DEFAULT 0,
    expires_at REAL NOT NULL DEFAULT 0,
    next_at REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    updated_at REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS websub_leases_by_feed ON websub_leases (feed_id);
"""



_SUB_COLUMNS = "id, account_id, name, query, keep, reflector, generation, created_at, changed_at"


def _sub(row: Sequence) -> Subscription:
    return Subscription(id=row[0], account_id=row[1], name=row[2], query=row[3], keep=row[4],
                        reflector=row[5], generation=row[6], created_at=row[7], changed_at=row[8])


class SQLiteHubState:
    """:class:`feedmesh.store.ports.HubState` on SQLite."""

    def __init__(self, path: str | Path) -> None:
        self._file = SQLiteFile(path, SCHEMA, what="hub database", foreign_keys=True)
        self.path = self._file.path
        self._upgrade()

    def _upgrade(self) -> None:
        """Columns later versions added, to a database an earlier one made."""
        have = {row[1] for row in self._file.read("PRAGMA table_info(account_sources)")}
        for column in ("category", "html_url"):
            if column not in have:
                with self._file.write(f"adding account_sources.{column}") as db:
                    db.execute(f"ALTER TABLE account_sources ADD COLUMN {column} TEXT NOT NULL "
                               "DEFAULT ''")
        if "delivered_before" not in {row[1] for row in self._file.read(
                "PRAGMA table_info(push_targets)")}:
            with self._file.write("adding push_targets.delivered_before") as db:
                db.execute("ALTER TABLE push_targets ADD COLUMN delivered_before REAL NOT NULL "
                           "DEFAULT 0")
                # Targets of before count as delivered up to now (their feeds are not sent
                # again after the upgrade).
                db.execute("UPDATE push_targets SET delivered_before = "
                           "(julianday('now') - 2440587.5) * 86400.0")
        if "signature" not in {row[1] for row in self._file.read(
                "PRAGMA table_info(push_targets)")}:
            # Targets of before signed sha256, as every delivery did: the default keeps them so.
            with self._file.write("adding push_targets.signature") as db:
                db.execute("ALTER TABLE push_targets ADD COLUMN signature TEXT NOT NULL "
                           "DEFAULT 'sha256'")

    def legacy_feed_secret(self) -> bytes | None:
        """The feed-URL key as hubs before the key file kept it in this database (None: none),
        so that moving it keeps every issued URL working."""
        rows = self._file.read("SELECT value FROM meta WHERE key = 'feed_secret'")
        return bytes(rows[0][0]) if rows else None

    def forget_legacy_feed_secret(self) -> None:
        """Delete the key from this database once it is kept in its own file."""
        with self._file.write("moving the feed secret out of the hub database") as db:
            db.execute("DELETE FROM meta WHERE key = 'feed_secret'")

    # -- accounts ---------------------------------------------------------------------------

    def create_account(self, name: str, now: float) -> tuple[Account, str]:
        secret = secrets.token_urlsafe(32)
        with self._file.write("creating an account") as db:
            cursor = db.execute("INSERT INTO accounts (name, token_hash, created_at) "
                                "VALUES (?, ?, ?)", (name, _digest(secret), now))
            account_id = cursor.lastrowid
        return Account(account_id, name, now), f"fm_{account_id}_{secret}"

    def rotate_token(self, account_id: int) -> str:
        secret = secrets.token_urlsafe(32)
        with self._file.write(f"rotating the token of account {account_id}") as db:
            db.execute("UPDATE accounts SET token_hash = ? WHERE id = ?",
                       (_digest(secret), account_id))
        return f"fm_{account_id}_{secret}"

    def authenticate(self, token: str) -> Account | None:
        prefix, _, rest = token.partition("_")
        account_part, _, secret = rest.partition("_")
        if (prefix != "fm" or not secret or len(token) > 200 or not account_part.isascii()
                or not account_part.isdigit() or len(account_part) > 18):
            return None
        rows = self._file.read("SELECT id, name, created_at, token_hash FROM accounts WHERE id = ?",
                               (int(account_part),))
        if not rows:
            hmac.compare_digest(_digest(secret), bytes(32))  # same work either way
            return None
        row = rows[0]
        if not hmac.compare_digest(_digest(secret), bytes(row[3])):
            return None
        return Account(row[0], row[1], row[2])

    # -- subscriptions ----------------------------------------------------------------------

    def add_subscription(self, account_id: int, *, name: str, query: str, keep: int,
                         reflector: int, now: float) -> Subscription:
        with self._file.write("adding a subscription") as db:
            cursor = db.execute(
                "INSERT INTO subscriptions (account_id, name, query, keep, reflector, created_at, "
                "changed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (account_id, name, query, keep, reflector, now, now))
            sub_id = cursor.lastrowid
        return Subscription(id=sub_id, account_id=account_id, name=name, query=query, keep=keep,
                            reflector=reflector, generation=0, created_at=now, changed_at=now)

    def subscription(self, sub_id: int) -> Subscription | None:
        rows = self._file.read(f"SELECT {_SUB_COLUMNS} FROM subscriptions WHERE id = ?",
                               (sub_id,))
        return _sub(rows[0]) if rows else None

    def subscriptions(self, account_id: int | None = None) -> list[Subscription]:
        if account_id is None:
            rows = self._file.read(f"SELECT {_SUB_COLUMNS} FROM subscriptions ORDER BY id")
        else:
            rows = self._file.read(f"SELECT {_SUB_COLUMNS} FROM subscriptions WHERE account_id = ? "
                                   "ORDER BY id", (account_id,))
        return [_sub(r) for r in rows]

    def subscription_columns(self) -> dict[str, np.ndarray]:
        """Every subscription's ``id, keep, reflector, generation, created_at`` as numpy columns:
        what start-up needs, without a Python object per subscription (there may be millions)."""
        return subscription_columns(self._file.stream(
            f"SELECT {', '.join(SUBSCRIPTION_COLUMNS)} FROM subscriptions ORDER BY id"))

    def queries(self, ids: Iterable[int] | None = None) -> Iterator[tuple[int, str]]:
        """``(id, query)`` of the given subscriptions (all when None), streamed by id."""
        if ids is None:
            yield from self._file.stream("SELECT id, query FROM subscriptions ORDER BY id")
            return
        wanted = sorted(set(ids))
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            yield from self._file.read(f"SELECT id, query FROM subscriptions WHERE id IN "
                                       f"({','.join('?' * len(part))}) ORDER BY id", part)

    def change_seq(self) -> int:
        """The sequence number of the last change to any subscription (0: none yet)."""
        return int(self._file.read("SELECT coalesce(max(seq), 0) FROM subscription_log")[0][0])

    def changed_since(self, seq: int) -> list[int]:
        """Ids of the subscriptions added, changed or deleted after change ``seq``."""
        return [r[0] for r in self._file.read("SELECT DISTINCT sub_id FROM subscription_log "
                                              "WHERE seq > ?", (seq,))]

    def add_subscriptions(self, rows: Iterable[tuple[int, str, str, int, int]],
                          now: float) -> None:
        """Bulk insert ``(account_id, name, query, keep, reflector)`` rows (provisioning and
        benchmarks); queries must already be valid."""
        with self._file.write("adding subscriptions") as db:
            db.executemany(
                "INSERT INTO subscriptions (account_id, name, query, keep, reflector, created_at, "
                "changed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                ((a, n, q, k, r, now, now) for a, n, q, k, r in rows))

    def count_subscriptions(self, account_id: int) -> int:
        return int(self._file.read("SELECT count(*) FROM subscriptions WHERE account_id = ?",
                                   (account_id,))[0][0])

    def change_subscription(self, sub_id: int, *, now: float, name: str | None = None,
                            query: str | None = None, keep: int | None = None,
                            new_url: bool = False) -> Subscription | None:
        sets, params = ["changed_at = ?"], [now]
        for column, value in (("name", name), ("query", query), ("keep", keep)):
            if value is not None:
                sets.append(f"{column} = ?")
                params.append(value)
        if new_url:
            sets.append("generation = generation + 1")
        with self._file.write(f"changing subscription {sub_id}") as db:
            db.execute(f"UPDATE subscriptions SET {', '.join(sets)} WHERE id = ?",
                       (*params, sub_id))
        return self.subscription(sub_id)

    def delete_subscription(self, sub_id: int) -> bool:
        with self._file.write(f"deleting subscription {sub_id}") as db:
            return db.execute("DELETE FROM subscriptions WHERE id = ?", (sub_id,)).rowcount > 0

    # -- sources ----------------------------------------------------------------------------

    def follow_source(self, account_id: int, feed_id: int, title: str, now: float, *,
                      category: str = "", html_url: str = "") -> bool:
        with self._file.write(f"following feed {feed_id}") as db:
            return db.execute("INSERT OR IGNORE INTO account_sources (account_id, feed_id, "
                              "title, added_at, category, html_url) VALUES (?, ?, ?, ?, ?, ?)",
                              (account_id, feed_id, title, now, category,
                               html_url)).rowcount > 0

    def unfollow_source(self, account_id: int, feed_id: int) -> bool:
        with self._file.write(f"unfollowing feed {feed_id}") as db:
            return db.execute("DELETE FROM account_sources WHERE account_id = ? AND feed_id = ?",
                              (account_id, feed_id)).rowcount > 0

    def sources(self, account_id: int) -> list[FollowedSource]:
        return [FollowedSource(feed_id=r[0], title=r[1], added_at=r[2], category=r[3],
                               html_url=r[4]) for r in self._file.read(
            "SELECT feed_id, title, added_at, category, html_url FROM account_sources "
            "WHERE account_id = ? ORDER BY added_at, feed_id", (account_id,))]

    def followers(self) -> dict[int, int]:
        """Feed id -> number of accounts following it (the User-Agent's subscriber count)."""
        return {r[0]: r[1] for r in self._file.read(
            "SELECT feed_id, count(*) FROM account_sources GROUP BY feed_id")}

    # -- push targets -----------------------------------------------------------------------

    def save_push_target(self, target: PushTarget) -> PushTarget:
        with self._file.write(f"saving a {target.kind} push target") as db:
            db.execute(
                "INSERT INTO push_targets (sub_id, kind, url, topic, format, secret, "
                "lease_seconds, expires_at, created_at, delivered_before, signature) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (sub_id, kind, topic, url) DO UPDATE SET format = excluded.format, "
                "secret = excluded.secret, lease_seconds = excluded.lease_seconds, "
                "expires_at = excluded.expires_at",
                (target.sub_id, target.kind, target.url, target.topic, target.format,
                 target.secret, target.lease_seconds, target.expires_at, target.created_at,
                 target.delivered_before, target.signature))
            row = db.execute(f"SELECT {PUSH_TARGET_COLUMNS} FROM push_targets "
                             "WHERE sub_id = ? AND kind = ? AND topic = ? AND url = ?",
                             (target.sub_id, target.kind, target.topic, target.url)).fetchone()
        return push_target(row)

    def push_targets(self, sub_id: int | None = None) -> list[PushTarget]:
        if sub_id is None:
            rows = self._file.read(f"SELECT {PUSH_TARGET_COLUMNS} FROM push_targets ORDER BY id")
        else:
            rows = self._file.read(f"SELECT {PUSH_TARGET_COLUMNS} FROM push_targets "
                                   "WHERE sub_id = ? ORDER BY id", (sub_id,))
        return [push_target(r) for r in rows]

    def mark_push_targets(self, marks: Mapping[int, float]) -> None:
        if not marks:
            return
        with self._file.write("marking push deliveries") as db:
            db.executemany("UPDATE push_targets SET delivered_before = max(delivered_before, ?) "
                           "WHERE id = ?", [(mark, target_id)
                                            for target_id, mark in sorted(marks.items())])

    def set_push_signature(self, target_id: int, signature: str) -> PushTarget | None:
        with self._file.write(f"setting push target {target_id}'s signature") as db:
            db.execute("UPDATE push_targets SET signature = ? WHERE id = ?",
                       (signature, target_id))
            row = db.execute(f"SELECT {PUSH_TARGET_COLUMNS} FROM push_targets WHERE id = ?",
                             (target_id,)).fetchone()
        return push_target(row) if row is not None else None

    def delete_push_target(self, target_id: int) -> bool:
        with self._file.write(f"deleting push target {target_id}") as db:
            return db.execute("DELETE FROM push_targets WHERE id = ?",
                              (target_id,)).rowcount > 0

    def record_push_attempts(self, attempts: Sequence[PushAttempt], keep: int = 20) -> None:
        if not attempts:
            return
        with self._file.write("recording deliveries") as db:
            # A target deleted meanwhile has no log to keep: its attempts are skipped.
            db.executemany(
                "INSERT INTO push_attempts (target_id, at, attempt, status, error, entries, "
                "elapsed_ms) SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS "
                "(SELECT 1 FROM push_targets WHERE id = ?)",
                ((a.target_id, a.at, a.attempt, a.status, a.error, a.entries, a.elapsed_ms,
                  a.target_id) for a in attempts))
            for target_id in {a.target_id for a in attempts}:
                db.execute("DELETE FROM push_attempts WHERE target_id = ? AND id <= coalesce(("
                           "SELECT id FROM push_attempts WHERE target_id = ? ORDER BY id DESC "
                           "LIMIT 1 OFFSET ?), 0)", (target_id, target_id, keep))

    def push_attempts(self, target_id: int, limit: int = 20) -> list[PushAttempt]:
        return [push_attempt(r) for r in self._file.read(
            f"SELECT {PUSH_ATTEMPT_COLUMNS} FROM push_attempts WHERE target_id = ? "
            "ORDER BY id DESC LIMIT ?", (target_id, limit))]

    # -- push subscriptions -------------------------------------------------------------------

    def websub_leases(self) -> list[WebSubLease]:
        return [websub_lease(row) for row in self._file.read(
            f"SELECT {', '.join(WEBSUB_LEASE_COLUMNS)} FROM websub_leases ORDER BY callback_id")]

    def save_websub_leases(self, changed: Sequence[WebSubLease], deleted: Sequence[str]) -> None:
        if not changed and not deleted:
            return
        columns = ", ".join(WEBSUB_LEASE_COLUMNS)
        marks = ", ".join("?" * len(WEBSUB_LEASE_COLUMNS))
        with self._file.write(f"saving {len(changed) + len(deleted)} WebSub leases") as db:
            db.executemany("DELETE FROM websub_leases WHERE callback_id = ?",
                           [(c,) for c in deleted])
            db.executemany(f"INSERT OR REPLACE INTO websub_leases ({columns}) VALUES ({marks})",
                           [websub_row(lease) for lease in changed])

    def close(self) -> None:
        self._file.close()


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()
