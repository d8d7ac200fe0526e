"""Filter shards restore their index from a snapshot plus the subscriptions changed since."""

from __future__ import annotations

import functools
import logging

from feedmesh.bus.memory import MemoryBus
from feedmesh.clock import ManualClock
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.tiers.filter import FilterTier
from feedmesh.model import Entry
from feedmesh.store.sqlite_hub import SQLiteHubState

ENTRY = Entry(key="1", title="Privacy law and the internet")
FEED_URL = "http://news.example/feed"


def opener(tmp_path):
    """How the shard's build process opens the state (as the composition root makes it)."""
    return functools.partial(SQLiteHubState, tmp_path / "hub.db")


def tier(shard: int = 0, shards: int = 1) -> FilterTier:
    return FilterTier(shard, shards, MemoryBus(), ManualClock(), HubMetrics())


def test_snapshot_then_changes_since(tmp_path, caplog):
    db = SQLiteHubState(tmp_path / "hub.db")
    account, _ = db.create_account("ann", 0.0)
    a = db.add_subscription(account.id, name="", query="privacy", keep=10, reflector=0, now=0.0)
    b = db.add_subscription(account.id, name="", query="law internet", keep=10, reflector=0,
                            now=0.0)
    first = tier()
    # no snapshot yet: built (in a child process that opens the state itself), then saved
    first.load(db, db.subscription_columns(), tmp_path, opener(tmp_path))
    assert (tmp_path / "filter-0-of-1.index").exists()
    assert first.index.match_entry(ENTRY, FEED_URL).tolist() == [a.id, b.id]

    # While the hub is down: one removed, one changed, one added.
    db.delete_subscription(a.id)
    db.change_subscription(b.id, now=1.0, query="weather")
    c = db.add_subscription(account.id, name="", query="internet", keep=10, reflector=0, now=2.0)
    caplog.set_level(logging.INFO, logger="feedmesh.hub.filter")
    second = tier()
    second.load(db, db.subscription_columns(), tmp_path, opener(tmp_path))
    assert "filter_restored" in caplog.text and "changed_since_snapshot=3" in caplog.text
    assert second.index.match_entry(ENTRY, FEED_URL).tolist() == [c.id]
    db.close()


def test_a_damaged_snapshot_is_rebuilt(tmp_path, caplog):
    db = SQLiteHubState(tmp_path / "hub.db")
    account, _ = db.create_account("ann", 0.0)
    sub = db.add_subscription(account.id, name="", query="privacy", keep=10, reflector=0, now=0.0)
    tier().load(db, db.subscription_columns(), tmp_path, opener(tmp_path))
    path = tmp_path / "filter-0-of-1.index"
    path.write_bytes(path.read_bytes()[:100])
    caplog.set_level(logging.WARNING, logger="feedmesh.hub.filter")
    again = tier()
    again.load(db, db.subscription_columns(), tmp_path, opener(tmp_path))
    assert "filter_snapshot_unusable" in caplog.text
    assert again.index.match_entry(ENTRY, FEED_URL).tolist() == [sub.id]
    db.close()


def test_shards_hold_disjoint_parts(tmp_path):
    db = SQLiteHubState(tmp_path / "hub.db")
    account, _ = db.create_account("ann", 0.0)
    ids = [db.add_subscription(account.id, name="", query="internet", keep=10, reflector=0,
                               now=0.0).id for _ in range(6)]
    shards = [tier(n, 3) for n in range(3)]
    for shard in shards:
        shard.load(db, db.subscription_columns(), tmp_path, opener(tmp_path))
    parts = [s.index.match_entry(ENTRY, FEED_URL).tolist() for s in shards]
    assert sorted(i for part in parts for i in part) == ids and all(len(p) == 2 for p in parts)
    db.close()


def test_a_shard_routes_without_lookups_only_when_its_index_is_all_routed(tmp_path):
    """After loading, a shard of one reflector knows whether every subscription of its index
    goes to that reflector (then its matches are not looked up); a subscription the index holds
    that has no route (here: left out of the columns) turns that off, and its matches are
    dropped as before."""
    import numpy as np

    from feedmesh.hub.idcodec import decode_ids
    from feedmesh.hub.messages import Article, as_matched, decode

    db = SQLiteHubState(tmp_path / "hub.db")
    account, _ = db.create_account("ann", 0.0)
    ids = [db.add_subscription(account.id, name="", query="internet", keep=10, reflector=0,
                               now=0.0).id for _ in range(4)]
    article = Article(entry_id=1, feed_id=1, feed_url=FEED_URL, feed_title="", entry=ENTRY,
                      first_seen_at=0.0)

    def routed(shard: FilterTier) -> list[int]:
        [message] = shard.route(article, 1)
        return [i for m in as_matched(decode(message.data)) for i in decode_ids(m.sub_ids)]

    whole = tier()
    whole.load(db, db.subscription_columns(), tmp_path, opener(tmp_path))
    assert whole.every_first and routed(whole) == ids
    columns = db.subscription_columns()
    kept = columns["id"] != ids[1]
    part = tier()
    part.load(db, {name: np.asarray(column)[kept] for name, column in columns.items()},
              tmp_path, opener(tmp_path))
    assert not part.every_first and routed(part) == [ids[0], *ids[2:]]
    db.close()
