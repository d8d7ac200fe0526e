"""The embedded :class:`~.ports.FeedOwnership`: a ``feed_owners`` table in the crawlers' SQLite
file (``feedmesh.db``, beside the feeds; on one machine several crawler processes share it).
Every change is one ``BEGIN IMMEDIATE`` transaction, so two crawlers claiming a feed at once
are serialized and the first claim wins."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from feedmesh.store.owner_tables import SQLITE_OWNERS
from feedmesh.store.ports import FeedOwner
from feedmesh.store.sqlite_file import SQLiteFile

__all__ = ["SQLiteFeedOwnership"]

_COLUMNS = "feed_id, owner, epoch, next_owner"


def _rows(rows: list[tuple]) -> dict[int, FeedOwner]:
    return {r[0]: FeedOwner(feed_id=r[0], owner=r[1], epoch=r[2], next_owner=r[3])
            for r in rows}


class SQLiteFeedOwnership:
    """:class:`feedmesh.store.ports.FeedOwnership` in the SQLite file at ``path``."""

    def __init__(self, path: str | Path) -> None:
        self._file = SQLiteFile(path, SQLITE_OWNERS, what="SQLite feed ownership")
        self.path = self._file.path

    def owners(self) -> dict[int, FeedOwner]:
        return _rows(self._file.read(f"SELECT {_COLUMNS} FROM feed_owners"))

    def owned_by(self, owner: str) -> dict[int, FeedOwner]:
        return _rows(self._file.read(f"SELECT {_COLUMNS} FROM feed_owners WHERE owner = ?",
                                     (owner,)))

    def staged(self) -> dict[int, FeedOwner]:
        return _rows(self._file.read(f"SELECT {_COLUMNS} FROM feed_owners "
                                     "WHERE next_owner != ''"))

    def _of(self, feed_ids: Iterable[int]) -> dict[int, FeedOwner]:
        ids = list(feed_ids)
        out: dict[int, FeedOwner] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            out.update(_rows(self._file.read(
                f"SELECT {_COLUMNS} FROM feed_owners WHERE feed_id IN "
                f"({','.join('?' * len(chunk))})", chunk)))
        return out

    def claim(self, choices: Mapping[int, str]) -> dict[int, FeedOwner]:
        with self._file.write(f"claiming {len(choices)} feeds") as db:
            db.executemany("INSERT OR IGNORE INTO feed_owners (feed_id, owner, epoch) "
                           "VALUES (?, ?, 1)", list(choices.items()))
        return self._of(choices)

    def stage(self, moves: Mapping[int, str]) -> int:
        staged = 0
        with self._file.write(f"staging {len(moves)} feed moves") as db:
            for feed_id, target in moves.items():
                db.execute("INSERT OR IGNORE INTO feed_owners (feed_id, owner, epoch) "
                           "VALUES (?, ?, 1)", (feed_id, target))
                staged += db.execute("UPDATE feed_owners SET next_owner = ? WHERE feed_id = ? "
                                     "AND owner != ?", (target, feed_id, target)).rowcount
                db.execute("UPDATE feed_owners SET next_owner = '' WHERE feed_id = ? "
                           "AND owner = ?", (feed_id, target))
        return staged

    def transfer(self, moves: Mapping[int, str]) -> int:
        moved = 0
        with self._file.write(f"transferring {len(moves)} feeds") as db:
            for feed_id, target in moves.items():
                moved += db.execute("INSERT OR IGNORE INTO feed_owners (feed_id, owner, epoch) "
                                    "VALUES (?, ?, 1)", (feed_id, target)).rowcount
                moved += db.execute(
                    "UPDATE feed_owners SET owner = ?, epoch = epoch + 1, next_owner = '' "
                    "WHERE feed_id = ? AND owner != ?", (target, feed_id, target)).rowcount
                db.execute("UPDATE feed_owners SET next_owner = '' WHERE feed_id = ?",
                           (feed_id,))
        return moved

    def release(self, owner: str, feed_ids: Iterable[int]) -> dict[int, FeedOwner]:
        ids = list(feed_ids)
        released: list[int] = []
        with self._file.write(f"releasing {len(ids)} feeds of {owner}") as db:
            for feed_id in ids:
                if db.execute("UPDATE feed_owners SET owner = next_owner, epoch = epoch + 1, "
                              "next_owner = '' WHERE feed_id = ? AND owner = ? AND "
                              "next_owner != ''", (feed_id, owner)).rowcount:
                    released.append(feed_id)
        return self._of(released)

    def close(self) -> None:
        self._file.close()
