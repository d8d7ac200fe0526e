"""What every FeedOwnership must do (:mod:`feedmesh.store.ports`): one owner per feed, claimed
once, staged moves handed over by their owner, transfers at once, epochs that only grow. Run
against each implementation (tests/store/conftest.py)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import msgspec

from feedmesh.model import Entry
from feedmesh.store import FeedUpdate


def owners(table) -> dict[int, tuple[str, int, str]]:
    return {f: (r.owner, r.epoch, r.next_owner) for f, r in table.owners().items()}


def test_a_feed_is_claimed_once_and_keeps_its_first_owner(ownership):
    rows = ownership.claim({1: "eu-1", 2: "na-1"})
    assert {f: (r.owner, r.epoch) for f, r in rows.items()} == {1: ("eu-1", 1), 2: ("na-1", 1)}
    again = ownership.claim({2: "eu-1", 3: "eu-1"})  # 2 is taken: its owner stays
    assert {f: r.owner for f, r in again.items()} == {2: "na-1", 3: "eu-1"}
    assert set(ownership.owned_by("eu-1")) == {1, 3}
    assert ownership.claim({}) == {}


def test_two_crawlers_claiming_at_once_read_back_the_same_owner(ownership_opener):
    tables = [ownership_opener(), ownership_opener()]
    results: list[dict] = [{}, {}]
    start = threading.Barrier(2)

    def claim(n: int) -> None:
        start.wait()
        results[n] = {f: r.owner for f, r in
                      tables[n].claim(dict.fromkeys(range(1, 201), f"c{n}")).items()}

    threads = [threading.Thread(target=claim, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert results[0] == results[1] and len(results[0]) == 200
        assert set(results[0].values()) <= {"c0", "c1"}
    finally:
        for table in tables:
            table.close()


def test_a_staged_move_waits_for_its_owner_to_release_it(ownership):
    ownership.claim({1: "a", 2: "a", 3: "b"})
    assert ownership.stage({1: "b", 2: "a", 3: "b", 4: "c"}) == 1  # 2, 3 stay; 4 was unowned
    assert owners(ownership) == {1: ("a", 1, "b"), 2: ("a", 1, ""), 3: ("b", 1, ""),
                                 4: ("c", 1, "")}
    assert set(ownership.staged()) == {1}
    assert set(ownership.owned_by("a")) == {1, 2}  # still a's until it lets go
    assert ownership.release("b", [1]) == {}  # only the owner can hand it over
    released = ownership.release("a", [1, 2])  # 2 has no move staged: a keeps it
    assert {f: (r.owner, r.epoch) for f, r in released.items()} == {1: ("b", 2)}
    assert owners(ownership)[1] == ("b", 2, "")
    assert ownership.staged() == {}
    assert ownership.release("a", [1]) == {}  # released once


def test_staging_the_owner_again_cancels_a_move(ownership):
    ownership.claim({1: "a"})
    assert ownership.stage({1: "b"}) == 1
    assert ownership.stage({1: "c"}) == 1  # a newer plan replaces the staged move
    assert owners(ownership)[1] == ("a", 1, "c")
    assert ownership.stage({1: "a"}) == 0
    assert owners(ownership)[1] == ("a", 1, "")


def test_a_transfer_moves_at_once_and_bumps_the_epoch(ownership):
    ownership.claim({1: "gone", 2: "gone", 3: "b"})
    ownership.stage({2: "c"})
    assert ownership.transfer({1: "b", 2: "b", 3: "b", 4: "b"}) == 3  # 3 is b's already
    assert owners(ownership) == {1: ("b", 2, ""), 2: ("b", 2, ""), 3: ("b", 1, ""),
                                 4: ("b", 1, "")}
    assert ownership.owned_by("gone") == {}
    assert ownership.transfer({}) == 0


def test_ownership_survives_a_restart(ownership_opener):
    table = ownership_opener()
    table.claim({7: "eu-1"})
    table.stage({7: "na-1"})
    table.close()
    table = ownership_opener()
    try:
        assert owners(table) == {7: ("eu-1", 1, "na-1")}
    finally:
        table.close()


def test_an_intent_fenced_off_by_a_move_is_dropped_whole(ingest_and_ownership):
    ingest, ownership = ingest_and_ownership
    feed, other = ingest.add_feeds(["http://a/1", "http://a/2"], now=0.0)
    ownership.claim({feed.id: "eu-1"})

    def update(n: int, **fence) -> FeedUpdate:
        entry = Entry(key=f"k{n}", content_hash=f"h{n}", title=f"post {n}",
                      published=datetime(2026, 11, 1, tzinfo=UTC))
        return FeedUpdate(feed_id=feed.id, seen_at=float(n), entries=(entry,),
                          state=msgspec.structs.replace(feed.state, etag=f'"{n}"'), **fence)

    assert len(ingest.apply([update(1, owner="eu-1", epoch=1)])) == 1  # the owner's
    ownership.stage({feed.id: "na-1"})
    assert len(ingest.apply([update(2, owner="eu-1", epoch=1)])) == 1  # staged: still its
    ownership.release("eu-1", [feed.id])
    # A fetch eu-1 began before it let go, committed after: dropped, state and entries.
    late = update(3, owner="eu-1", epoch=1)
    other_update = FeedUpdate(feed_id=other.id, seen_at=3.0,
                              state=msgspec.structs.replace(other.state, etag='"x"'))
    fenced: list[int] = []
    assert ingest.apply([late, other_update], fenced) == []
    assert fenced == [feed.id]  # said, not dropped unseen
    assert ingest.feed(feed.id).state.etag == '"2"' and ingest.entry_count() == 2
    assert ingest.feed(other.id).state.etag == '"x"'  # not fenced: applied
    fenced.clear()
    assert len(ingest.apply([update(4, owner="na-1", epoch=2)], fenced)) == 1  # the new owner's
    assert fenced == []
    assert ingest.apply([update(5, owner="na-1", epoch=1)]) == []  # an older epoch of it
    assert ingest.apply([update(6, owner="eu-1", epoch=2)]) == []
    assert len(ingest.apply([update(7)])) == 1  # no fence: always applied
