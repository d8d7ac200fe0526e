"""Held entries: top-k sets that are idempotent and order-independent, and the reflector's log +
checkpoint recovery."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import feedmesh.hub.tiers.topk as topk_module
from feedmesh.hub.idcodec import encode_ids
from feedmesh.hub.tiers.held import (
    VersionColumns,
    checkpoint,
    checkpoint_arrays,
    dense_arrays,
    restore_held,
)
from feedmesh.hub.tiers.topk import WIDTH, TopK
from feedmesh.model import Entry
from feedmesh.store import ReflectedItem, StoreError
from feedmesh.store.sqlite_reflector import SQLiteReflectorLog

KEEPS = {1: 3, 2: 10, 3: 25, 4: 1}
events = st.lists(st.tuples(st.integers(1, 400), st.sets(st.sampled_from(sorted(KEEPS)),
                                                          min_size=1)), max_size=200)


def apply(topk: TopK, sequence) -> None:
    for entry_id, subs in sequence:
        ids = np.array(sorted(subs), dtype=np.int64)
        topk.ensure(int(ids.max()))
        topk.insert(entry_id, ids, np.array([KEEPS[s] for s in ids.tolist()]))


def expected(sequence, sub: int) -> list[int]:
    return sorted({e for e, subs in sequence if sub in subs}, reverse=True)[: KEEPS[sub]]


@pytest.mark.parametrize("compiled", [True, False])
@settings(max_examples=150, deadline=None)
@given(sequence=events, rnd=st.randoms(), in_order=st.booleans())
def test_topk_is_the_newest_k_whatever_the_order_and_repeats(compiled, sequence, rnd, in_order):
    shuffled = list(sequence) + list(sequence[: len(sequence) // 2])  # replays
    if in_order:  # the common case (the fast path), then late replays
        shuffled.sort()
    else:
        rnd.shuffle(shuffled)
    kernel = topk_module._insert_rows
    topk_module._insert_rows = kernel if compiled else None
    try:
        topk = TopK(capacity=2)
        apply(topk, shuffled)
    finally:
        topk_module._insert_rows = kernel
    for sub in KEEPS:
        assert topk.newest_ids(sub, KEEPS[sub]) == expected(sequence, sub)
    # What the metric of held pairs reports: a row keeps up to WIDTH entries (a subscription
    # keeping fewer shows fewer), a wide subscription its own number.
    assert topk.pairs() == sum(
        min(len({e for e, subs in sequence if sub in subs}), max(WIDTH, keep))
        for sub, keep in KEEPS.items())


@settings(max_examples=150, deadline=None)
@given(sequence=events, split=st.integers(0, 200), slice_rows=st.integers(1, 3),
       between=st.integers(0, 4), grow_at=st.integers(0, 6))
def test_a_copy_taken_in_slices_while_inserting_recovers_exactly(sequence, split, slice_rows,
                                                                 between, grow_at):
    """The reflector copies its rows a slice at a time while the stream goes on inserting; the
    copy plus the log after where it began must give the live state (checkpoint recovery)."""
    split = min(split, len(sequence))
    before, after = sequence[:split], list(sequence[split:])
    live = TopK(capacity=2)
    apply(live, before)
    live.ensure(4)
    spare, start, slices = TopK(capacity=0), 0, 0
    while start < live.capacity:  # the copy begins after ``before``: the checkpoint's position
        start = live.copy_slice(spare, start, start + slice_rows)
        slices += 1
        if slices == grow_at:
            live.ensure(2 * live.capacity)  # a new subscription beyond the capacity meanwhile
        apply(live, after[:between])  # the stream's batches between two slices
        del after[:between]
    live.copy_extra(spare)
    apply(live, after)
    assert spare.capacity == live.capacity or grow_at > slices
    recovered = TopK(capacity=0)
    recovered.load_rows(spare.rows)
    recovered.extra = dict(spare.extra)
    apply(recovered, sequence[split:])  # the log after the checkpoint's position, replayed
    for sub in KEEPS:
        assert recovered.newest_ids(sub, KEEPS[sub]) == live.newest_ids(sub, KEEPS[sub])
        assert live.newest_ids(sub, KEEPS[sub]) == expected(sequence, sub)


def _item(entry_id: int) -> ReflectedItem:
    return ReflectedItem(entry_id=entry_id, feed_id=1, feed_url="http://x/f", feed_title="X",
                         first_seen_at=1.0, stored_at=2.0, entry=Entry(key=str(entry_id)))


def test_log_and_checkpoint_recover_the_same_state(tmp_path):
    rng = np.random.default_rng(3)
    keep = np.array([0, 3, 10, 25, 1], dtype=np.int16)
    store = SQLiteReflectorLog(tmp_path / "r.db")
    live = TopK()
    seq = 0
    for entry_id in range(1, 301):
        subs = np.unique(rng.integers(1, 5, 3)).astype(np.int64)
        seq = store.store([(_item(entry_id), encode_ids(subs), 0)], {0: entry_id})
        live.ensure(4)
        live.insert(entry_id, subs, keep[subs].astype(np.int64))
        if entry_id == 150:
            checkpoint(store, live, seq)  # halfway: later rows stay in the log
    # A replayed article changes nothing: top-k insertion is idempotent.
    # (Its original row was truncated by the checkpoint, so it is logged again, harmlessly.)
    seq = store.store([(_item(42), encode_ids(np.array([1, 2, 3])), 0)], {0: 42})
    live.insert(42, np.array([1, 2, 3]), keep[[1, 2, 3]].astype(np.int64))
    loaded, last, *_ = restore_held(store, keep)
    for sub in range(1, 5):
        assert loaded.newest_ids(sub, int(keep[sub])) == live.newest_ids(sub, int(keep[sub]))
    assert store.watermarks() == {0: 300}
    assert last == seq
    assert [i.entry_id for i in store.items([300, 299, 12345])] == [300, 299]
    checkpoint(store, loaded, last)
    assert store.counts()[1] == 0
    assert store.delete_items(store.unheld_items(loaded.live_entries())) > 0
    assert store.counts()[0] == len(loaded.live_entries())
    store.close()


def test_a_checkpoint_holds_the_rows_a_reflector_uses_and_gives_them_back_exactly(tmp_path):
    """A reflector holds every R-th subscription of the id space (here 1 in 5 of 40,000, with
    a side table and version columns): its checkpoint holds those rows, not the whole space,
    and restores them exactly."""
    live = TopK()
    rng = np.random.default_rng(7)
    mine = np.arange(3, 40_000, 5, dtype=np.int64)
    live.ensure(int(mine.max()))
    for entry_id in range(1, 200):
        ids = np.unique(rng.choice(mine, 400))
        keeps = np.where(ids % 7 == 0, 25, WIDTH).astype(np.int64)  # some wide ones
        live.insert(entry_id, ids, keeps)
    version = np.zeros(live.capacity, dtype=np.int64)
    version[mine[:100]] = np.arange(1, 101)
    modified = np.zeros(live.capacity, dtype=np.float64)
    modified[mine[:50]] = 1.5
    arrays = checkpoint_arrays(live, VersionColumns(version, modified, 9.0))
    assert "rows" not in arrays and "version" not in arrays
    packed = sum(a.nbytes for a in arrays.values())
    assert packed < 0.3 * (live.rows.nbytes + version.nbytes + modified.nbytes)
    whole = dense_arrays(arrays)
    assert np.array_equal(whole["rows"], live.rows)
    assert np.array_equal(whole["version"], version)
    assert np.array_equal(whole["modified"], modified)
    store = SQLiteReflectorLog(tmp_path / "r.db")
    store.write_checkpoint(arrays, 5)
    loaded, last, versions, checkpointed, _ = restore_held(store)
    assert (last, checkpointed) == (5, True) and versions.taken_at == 9.0
    assert np.array_equal(versions.version, version)
    for sub in mine[:300].tolist():
        keep = 25 if sub % 7 == 0 else WIDTH
        assert loaded.newest_ids(sub, keep) == live.newest_ids(sub, keep)
    store.close()


def test_a_whole_checkpoint_from_before_is_read_and_a_broken_one_is_refused(tmp_path):
    live = TopK()
    live.ensure(8)
    live.insert(3, np.array([2, 5]), None)
    store = SQLiteReflectorLog(tmp_path / "r.db")
    store.write_checkpoint({"rows": live.rows, "extra_ids": np.zeros(0, np.int64),
                            "extra_lengths": np.zeros(0, np.int64),
                            "extra_values": np.zeros(0, np.int64)}, 4)
    assert restore_held(store).topk.newest_ids(5, WIDTH) == [3]
    broken = checkpoint_arrays(live)
    broken["rows_ids"] = broken["rows_ids"] + 10**6  # beyond the shape it states
    store.write_checkpoint(broken, 6)
    with pytest.raises(StoreError, match="column 'rows' is inconsistent"):
        restore_held(store)
    store.close()


def test_width_is_what_most_subscriptions_keep():
    assert WIDTH == 10  # Cobra's k; wider subscriptions use the sorted side table
