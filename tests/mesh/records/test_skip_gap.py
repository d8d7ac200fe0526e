"""FeedLog.skip_gap: past a gap nobody could fill, the chain resumes at the next signed record."""

from __future__ import annotations

from nacl.signing import SigningKey

from feedmesh.mesh.records import FeedLog, FeedWriter


def test_skip_gap_resumes_at_the_held_record_and_keeps_checking() -> None:
    writer = FeedWriter(SigningKey.generate(), "http://127.0.4.1/feed")
    wires = [writer.append({"id": str(n)}) for n in range(1, 6)]
    log = FeedLog(writer.feed, writer.url)
    assert log.receive(wires[0]).delivered
    assert log.receive(wires[3]).missing == (2, 3)       # 4 held
    assert [r.seq for r in log.skip_gap().delivered] == [4]
    assert log.seq == 4 and log.skipped == 2
    assert [r.seq for r in log.receive(wires[4]).delivered] == [5]
    assert log.receive(wires[1]).refused == "replayed"   # a late 2 is old now


def test_skip_gap_releases_the_held_run_and_nothing_without_a_gap() -> None:
    writer = FeedWriter(SigningKey.generate(), "http://127.0.4.1/feed")
    wires = [writer.append({"id": str(n)}) for n in range(1, 5)]
    log = FeedLog(writer.feed, writer.url)
    assert log.skip_gap().delivered == ()                 # nothing held: nothing to do
    log.receive(wires[2])
    log.receive(wires[3])
    assert [r.seq for r in log.skip_gap().delivered] == [3, 4]
    assert (log.seq, log.skipped, log.missing) == (4, 2, ())


def test_an_announced_gap_with_nothing_held_is_missing_and_skipping_it_resyncs() -> None:
    writer = FeedWriter(SigningKey.generate(), "http://127.0.4.1/feed")
    wires = [writer.append({"id": str(n)}) for n in range(1, 400)]
    log = FeedLog(writer.feed, writer.url)
    assert log.receive(wires[0]).delivered
    log.announce(3)                                        # a parent's heartbeat: seq 3 exists
    assert log.missing == (2, 3)
    log.announce(10_000)                                   # a liar's number is capped
    assert len(log.missing) == log.max_held
    assert log.skip_gap().delivered == ()                  # the HTTP fallback covered it
    assert log.missing == ()
    # the next signed record, however far ahead, restarts the chain; the next one must follow
    assert [r.seq for r in log.receive(wires[300]).delivered] == [301]
    assert log.skipped == 299
    assert log.receive(wires[302]).missing == (302,)       # an ordinary gap again: held
    assert log.receive(wires[250]).refused == "replayed"


def test_a_resync_is_forgotten_once_the_chain_goes_on_by_itself() -> None:
    writer = FeedWriter(SigningKey.generate(), "http://127.0.4.1/feed")
    wires = [writer.append({"id": str(n)}) for n in range(1, 6)]
    log = FeedLog(writer.feed, writer.url)
    log.receive(wires[0])
    log.announce(2)
    log.skip_gap()
    assert [r.seq for r in log.receive(wires[1]).delivered] == [2]   # 2 came after all
    assert log.receive(wires[4]).missing == (3, 4) and log.skipped == 0   # a real gap: held


def test_a_covered_gap_stays_covered_while_the_parent_repeats_its_newest_seq() -> None:
    # a parent announces its newest seq in every heartbeat; once the HTTP fallback covered the
    # gap, hearing the same seq again must not reopen it (a fetch of the feed every few seconds
    # until the next record), while a newer seq does
    writer = FeedWriter(SigningKey.generate(), "http://127.0.4.1/feed")
    wires = [writer.append({"id": str(n)}) for n in range(1, 6)]
    log = FeedLog(writer.feed, writer.url)
    log.receive(wires[0])
    log.announce(3)
    assert log.missing == (2, 3)
    log.skip_gap()
    log.announce(3)
    assert log.missing == ()
    log.announce(4)
    assert log.missing == (2, 3, 4)
    # the next record down the tree restarts the chain as before
    assert [r.seq for r in log.receive(wires[4]).delivered] == [5]
    assert log.missing == ()
