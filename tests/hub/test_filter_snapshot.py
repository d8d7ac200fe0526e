"""Filter shards restore their index from a snapshot plus the subscriptions changed since."""

from __future__ import annotations

import logging

from feedmesh.clock import ManualClock
from feedmesh.hub.bus import MemoryBus
from feedmesh.hub.db import HubDB
from feedmesh.hub.filter import FilterTier, match_article
from feedmesh.hub.messages import Article
from feedmesh.hub.metrics import HubMetrics
from feedmesh.model import Entry

ARTICLE = Article(entry_id=1, feed_id=1, feed_url="http://news.example/feed", feed_title="N",
                  entry=Entry(key="1", title="Privacy law and the internet"), first_seen_at=0.0)


def tier(shard: int = 0, shards: int = 1) -> FilterTier:
    return FilterTier(shard, shards, MemoryBus(), ManualClock(), HubMetrics())


def test_snapshot_then_changes_since(tmp_path, caplog):
    db = HubDB(tmp_path / "hub.db")
    account, _ = db.create_account("ann", 0.0)
    a = db.add_subscription(account.id, name="", query="privacy", keep=10, reflector=0, now=0.0)
    b = db.add_subscription(account.id, name="", query="law internet", keep=10, reflector=0,
                            now=0.0)
    first = tier()
    first.load(db, db.subscription_columns(), tmp_path)  # no snapshot yet: built, then saved
    assert (tmp_path / "filter-0-of-1.index").exists()
    assert match_article(first.index, ARTICLE).tolist() == [a.id, b.id]

    # While the hub is down: one removed, one changed, one added.
    db.delete_subscription(a.id)
    db.change_subscription(b.id, now=1.0, query="weather")
    c = db.add_subscription(account.id, name="", query="internet", keep=10, reflector=0, now=2.0)
    caplog.set_level(logging.INFO, logger="feedmesh.hub.filter")
    second = tier()
    second.load(db, db.subscription_columns(), tmp_path)
    assert "filter_restored" in caplog.text and "changed_since_snapshot=3" in caplog.text
    assert match_article(second.index, ARTICLE).tolist() == [c.id]
    db.close()


def test_a_damaged_snapshot_is_rebuilt(tmp_path, caplog):
    db = HubDB(tmp_path / "hub.db")
    account, _ = db.create_account("ann", 0.0)
    sub = db.add_subscription(account.id, name="", query="privacy", keep=10, reflector=0, now=0.0)
    tier().load(db, db.subscription_columns(), tmp_path)
    path = tmp_path / "filter-0-of-1.index"
    path.write_bytes(path.read_bytes()[:100])
    caplog.set_level(logging.WARNING, logger="feedmesh.hub.filter")
    again = tier()
    again.load(db, db.subscription_columns(), tmp_path)
    assert "filter_snapshot_unusable" in caplog.text
    assert match_article(again.index, ARTICLE).tolist() == [sub.id]
    db.close()


def test_shards_hold_disjoint_parts(tmp_path):
    db = HubDB(tmp_path / "hub.db")
    account, _ = db.create_account("ann", 0.0)
    ids = [db.add_subscription(account.id, name="", query="internet", keep=10, reflector=0,
                               now=0.0).id for _ in range(6)]
    shards = [tier(n, 3) for n in range(3)]
    for shard in shards:
        shard.load(db, db.subscription_columns(), tmp_path)
    parts = [match_article(s.index, ARTICLE).tolist() for s in shards]
    assert sorted(sum(parts, [])) == ids and all(len(p) == 2 for p in parts)
    db.close()
