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
