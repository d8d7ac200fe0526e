"""The distributed deployment's :class:`~.ports.FeedOwnership`: a ``feed_owners`` table in the
crawlers' PostgreSQL database (component ``ownership``, versioned migrations), beside the feeds.

Claims are ``INSERT ... ON CONFLICT DO NOTHING`` (the first claim of a feed wins; the loser's
read sees the winner's row, committed before its statement ran); moves are single ``UPDATE``s
whose row locks serialize them with a concurrent claim or release of the same feeds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from feedmesh.store.owner_tables import POSTGRES_OWNERS
from feedmesh.store.ports import FeedOwner
from feedmesh.store.postgres_db import PostgresDatabase

__all__ = ["PostgresFeedOwnership"]

COMPONENT = "ownership"
MIGRATIONS = (
    # 1: feed id -> crawler name, an epoch per feed, a staged move
    POSTGRES_OWNERS,
)
_COLUMNS = "feed_id, owner, epoch, next_owner"


def _rows(rows: list[tuple]) -> dict[int, FeedOwner]:
    return {r[0]: FeedOwner(feed_id=r[0], owner=r[1], epoch=r[2], next_owner=r[3])
            for r in rows}


class PostgresFeedOwnership:
    """:class:`feedmesh.store.ports.FeedOwnership` in the PostgreSQL database at ``url``."""

    def __init__(self, url: str) -> None:
        self._db = PostgresDatabase(url, what="PostgreSQL feed ownership", component=COMPONENT,
                                    migrations=MIGRATIONS)
        self.url = url

    def owners(self) -> dict[int, FeedOwner]:
        return _rows(self._db.read(f"SELECT {_COLUMNS} FROM feed_owners"))

    def owned_by(self, owner: str) -> dict[int, FeedOwner]:
        return _rows(self._db.read(f"SELECT {_COLUMNS} FROM feed_owners WHERE owner = %s",
                                   (owner,)))

    def staged(self) -> dict[int, FeedOwner]:
        return _rows(self._db.read(f"SELECT {_COLUMNS} FROM feed_owners "
                                   "WHERE next_owner != ''"))

    def _of(self, feed_ids: Iterable[int]) -> dict[int, FeedOwner]:
        return _rows(self._db.read(f"SELECT {_COLUMNS} FROM feed_owners "
                                   "WHERE feed_id = ANY(%s)", (list(feed_ids),)))

    def claim(self, choices: Mapping[int, str]) -> dict[int, FeedOwner]:
        if not choices:
            return {}
        with self._db.write(f"claiming {len(choices)} feeds") as cur:
            cur.execute("INSERT INTO feed_owners (feed_id, owner, epoch) "
                        "SELECT v.id, v.owner, 1 FROM unnest(%s::bigint[], %s::text[]) "
                        "AS v(id, owner) ORDER BY v.id ON CONFLICT (feed_id) DO NOTHING",
                        (list(choices), list(choices.values())))
        return self._of(choices)

    def _unnest(self, moves: Mapping[int, str]) -> tuple[list[int], list[str]]:
        ids = sorted(moves)  # rows locked in one order: two movers never deadlock
        return ids, [moves[i] for i in ids]

    def stage(self, moves: Mapping[int, str]) -> int:
        if not moves:
            return 0
        ids, targets = self._unnest(moves)
        with self._db.write(f"staging {len(moves)} feed moves") as cur:
            cur.execute("INSERT INTO feed_owners (feed_id, owner, epoch) "
                        "SELECT *, 1 FROM unnest(%s::bigint[], %s::text[]) "
                        "ON CONFLICT (feed_id) DO NOTHING", (ids, targets))
            cur.execute("UPDATE feed_owners o SET next_owner = CASE WHEN o.owner = v.target "
                        "THEN '' ELSE v.target END FROM unnest(%s::bigint[], %s::text[]) "
                        "AS v(id, target) WHERE o.feed_id = v.id RETURNING o.owner != v.target",
                        (ids, targets))
            return sum(1 for (moving,) in cur.fetchall() if moving)

    def transfer(self, moves: Mapping[int, str]) -> int:
        if not moves:
            return 0
        ids, targets = self._unnest(moves)
        with self._db.write(f"transferring {len(moves)} feeds") as cur:
            cur.execute("INSERT INTO feed_owners (feed_id, owner, epoch) "
                        "SELECT *, 1 FROM unnest(%s::bigint[], %s::text[]) "
                        "ON CONFLICT (feed_id) DO NOTHING", (ids, targets))
            inserted = cur.rowcount
            cur.execute("UPDATE feed_owners o SET owner = v.target, next_owner = '', "
                        "epoch = o.epoch + 1 FROM unnest(%s::bigint[], %s::text[]) "
                        "AS v(id, target) WHERE o.feed_id = v.id AND o.owner != v.target",
                        (ids, targets))
            moved = cur.rowcount
            cur.execute("UPDATE feed_owners SET next_owner = '' WHERE feed_id = ANY(%s) "
                        "AND next_owner != ''", (ids,))
            return inserted + moved

    def release(self, owner: str, feed_ids: Iterable[int]) -> dict[int, FeedOwner]:
        ids = sorted(set(feed_ids))
        if not ids:
            return {}
        with self._db.write(f"releasing {len(ids)} feeds of {owner}") as cur:
            cur.execute(f"UPDATE feed_owners SET owner = next_owner, epoch = epoch + 1, "
                        f"next_owner = '' WHERE feed_id = ANY(%s) AND owner = %s AND "
                        f"next_owner != '' RETURNING {_COLUMNS}", (ids, owner))
            return _rows(cur.fetchall())

    def close(self) -> None:
        self._db.close()
