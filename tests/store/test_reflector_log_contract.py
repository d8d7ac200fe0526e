"""What every ReflectorLog must do (:mod:`feedmesh.store.ports`): rows, items and watermarks
committed together, idempotent per (entry, shard), a checkpoint replaced whole. Run against each
implementation (tests/store/conftest.py)."""

from __future__ import annotations

import numpy as np

from feedmesh.model import Entry
from feedmesh.store import ReflectedItem


def item(n: int, title: str = "") -> ReflectedItem:
    return ReflectedItem(entry_id=n, feed_id=1, feed_url="http://x/f", feed_title="X",
                         first_seen_at=1.0, stored_at=2.0,
                         entry=Entry(key=str(n), title=title or f"t{n}"))


def test_rows_are_logged_once_per_entry_and_shard(reflector_log):
    first = reflector_log.store([(item(1), b"\x01", 0), (item(2), b"\x02", 0)], {0: 2})
    again = reflector_log.store([(item(1), b"\x01", 0)], {0: 1})  # a replayed article
    other = reflector_log.store([(item(1), b"\x03", 1)], {1: 1})  # the same entry, another shard
    assert first > 0 and again == first and other > first
    assert list(reflector_log.log_after(0)) == [(first - 1, 1, b"\x01"), (first, 2, b"\x02"),
                                                (other, 1, b"\x03")]
    assert list(reflector_log.log_after(first)) == [(other, 1, b"\x03")]
    assert reflector_log.watermarks() == {0: 2, 1: 1}  # a lower mark never lowers one
    assert reflector_log.counts() == (2, 3)


def test_items_come_back_in_the_order_asked_and_the_newest_copy_wins(reflector_log):
    reflector_log.store([(item(1), b"\x01", 0), (item(2), b"\x01", 0)], {})
    reflector_log.store([(item(2, "edited"), b"\x01", 1)], {})
    assert [i.entry.title for i in reflector_log.items([2, 99, 1])] == ["edited", "t1"]
    assert reflector_log.items([]) == []


def test_items_the_log_still_needs_are_not_deleted(reflector_log):
    seq = reflector_log.store([(item(n), b"\x01", 0) for n in (1, 2, 3)], {0: 3})
    assert reflector_log.unheld_items(np.array([2])).tolist() == [1, 3]
    assert reflector_log.delete_items(np.array([1, 3])) == 0  # logged: still needed
    assert reflector_log.truncate_log(seq, limit=2) == 2
    assert reflector_log.truncate_log(seq, limit=2) == 1
    assert reflector_log.truncate_log(seq) == 0
    assert reflector_log.delete_items(np.array([1, 3])) == 2
    assert reflector_log.counts() == (1, 0)


def test_a_checkpoint_is_replaced_whole_and_survives_a_restart(reflector_log_opener):
    log = reflector_log_opener()
    assert log.read_checkpoint() is None
    rows = np.arange(20, dtype=np.int32).reshape(2, 10)
    log.write_checkpoint({"rows": rows, "extra_ids": np.zeros(0, np.int64)}, 5)
    log.write_checkpoint({"rows": rows + 1, "extra_ids": np.array([7])}, 9)
    log.set_watermarks({0: 4})
    log.close()
    log = reflector_log_opener()
    arrays, upto = log.read_checkpoint()
    assert upto == 9 and set(arrays) == {"rows", "extra_ids"}
    assert np.array_equal(arrays["rows"], rows + 1) and arrays["extra_ids"].tolist() == [7]
    assert log.watermarks() == {0: 4}
    log.close()


def test_each_reflector_keeps_its_own_state(reflector_log_opener):
    """Reflectors may share one database (PostgreSQL) or not (SQLite): either way one never
    sees another's items, log, watermarks or checkpoint."""
    zero, one = reflector_log_opener(0), reflector_log_opener(1)
    zero.store([(item(1), b"\x01", 0)], {0: 1})
    one.store([(item(2), b"\x02", 0), (item(3), b"\x02", 0)], {0: 5})
    one.write_checkpoint({"rows": np.ones(3)}, 7)
    assert [entry for _, entry, _ in zero.log_after(0)] == [1]
    assert [entry for _, entry, _ in one.log_after(0)] == [2, 3]
    assert zero.watermarks() == {0: 1} and one.watermarks() == {0: 5}
    assert zero.read_checkpoint() is None and one.read_checkpoint()[1] == 7
    assert [i.entry_id for i in zero.items([1, 2, 3])] == [1]
    assert zero.unheld_items(np.array([], dtype=np.int64)).tolist() == [1]
    assert zero.truncate_log(10**9) == 1 and zero.delete_items(np.array([1, 2, 3])) == 1
    assert zero.counts() == (0, 0) and one.counts() == (2, 2)
    zero.close()
    one.close()
