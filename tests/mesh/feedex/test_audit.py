"""Fake entries (bad peers): entries a neighbour sends are checked against our next fetch of the
source feed, on a manual clock (tests/mesh/feedex/net.py)."""

from __future__ import annotations

import random

import pytest

from feedmesh.mesh.feedex import FeedExSettings
from feedmesh.mesh.feedex.audit import EntryAudit
from feedmesh.mesh.feedex.messages import Connect, Disconnect, Entry, Error
from feedmesh.mesh.feedex.settings import FeedExSettingsError

from .net import Net, address, entry

F1, F2 = "http://pub.test/feed/1", "http://pub.test/feed/2"
CHECK_ALL = FeedExSettings(audit_sample=1.0, audit_grace_s=60.0, fake_entry_penalty=2.5,
                           drop_standing=-10.0)


def star(net: Net):
    """b follows F1 and hears it from an honest neighbour h and a liar."""
    b = net.add(1, [F1])
    honest = net.add(2, [F1])
    liar = net.add(3, [F1])
    net.connect(honest, b)
    net.connect(liar, b)
    return b, honest, liar


def test_entries_the_source_never_had_lower_the_senders_standing_until_it_is_dropped():
    net = Net(CHECK_ALL)
    b, honest, liar = star(net)
    net.run(100)
    real = [entry(f"real{i}", net.now - 50 + i) for i in range(3)]
    net.fetch(honest, F1, real[:2])
    net.fetch(liar, F1, [entry("invented1", net.now), entry("invented2", net.now)])
    net.run(5)
    assert net.keys(b) == ["real0", "real1", "invented1", "invented2"]  # not known yet
    net.run(120)
    # b's own fetch: the publisher lists the real entries (and a newer one), never the invented
    b.listed(net.now, F1, [*real, entry("older", net.now - 1000)])
    net.carry(b)
    net.run(1)
    assert b.stats["fake_entries"] == 2 and b.stats["confirmed_entries"] == 2
    assert b.standing.score(liar.address) == -5.0
    assert b.standing.score(honest.address) == 0.0
    told = [m for s, d, m in net.sent if s == b.address and d == liar.address
            and isinstance(m, Error)]
    assert told and told[0].code == "fake_entries" and "invented" in told[0].detail
    assert liar.address in b.neighbours  # -5: still above the drop line
    # two more: -10, dropped and banned; the honest neighbour stays
    net.fetch(liar, F1, [entry("invented3", net.now), entry("invented4", net.now)])
    net.run(120)
    b.listed(net.now, F1, real)
    net.carry(b)
    net.run(1)
    assert liar.address not in b.neighbours and honest.address in b.neighbours
    assert any(isinstance(m, Disconnect) and d == liar.address for s, d, m in net.sent
               if s == b.address)
    b.receive(net.now, liar.address, Connect({F1: 0}))
    assert b.take()[0].message.accepted is False


def test_only_entries_within_the_documents_window_and_older_than_the_grace_are_judged():
    net = Net(CHECK_ALL)
    b, honest, liar = star(net)
    net.run(1000)
    # scrolled out: published before the document's oldest entry, so it cannot be judged
    net.fetch(honest, F1, [entry("scrolled", 100.0), entry("undated", None)])
    net.run(120)
    net.fetch(liar, F1, [entry("just-now", net.now)])
    net.run(5)
    document = [entry("newest", net.now), entry("oldest-listed", 500.0)]
    b.listed(net.now, F1, document)
    net.carry(b)
    assert b.stats["fake_entries"] == 0 and b.standing.score(honest.address) == 0.0
    assert b._audit.pending(F1) == 1  # "just-now" came 5 s ago: the next fetch judges it
    net.run(120)
    b.listed(net.now, F1, document)
    net.carry(b)
    assert b.stats["fake_entries"] == 1 and b.standing.score(liar.address) == -2.5
    assert b._audit.pending(F1) == 0


def test_entries_of_feeds_we_do_not_fetch_are_not_sampled_and_a_sample_is_a_sample():
    net = Net(CHECK_ALL)
    b = net.add(1, [F1])
    relay = net.add(2, [F2])  # b is a relay for F2: it never fetches it, cannot judge it
    net.connect(relay, b)
    net.run(301)
    b.listed(net.now, F2, [])
    assert b.take() == [] and b._audit.pending(F2) == 0
    audit = EntryAudit(0.25, 10_000, 0.0, 1e9, random.Random(3))
    audit.note(0.0, F1, address(9), [Entry(f"k{i}", 1.0) for i in range(4000)])
    assert 900 < audit.pending(F1) < 1100
    capped = EntryAudit(1.0, 10, 0.0, 1e9, random.Random(3))
    capped.note(0.0, F1, address(9), [Entry(f"k{i}", 100.0 + i) for i in range(50)])
    assert capped.pending(F1) == 10
    listed = [Entry(f"k{i}", 100.0 + i) for i in range(45, 50)] + [Entry("old", 1.0)]
    verdicts = capped.judge(1.0, F1, listed)
    assert verdicts.confirmed == 5 and len(verdicts.fake) == 5  # k40..k44: never listed


def test_audit_settings_are_checked():
    with pytest.raises(FeedExSettingsError, match="audit_sample"):
        FeedExSettings(audit_sample=1.5)
    with pytest.raises(FeedExSettingsError, match="audit_per_feed"):
        FeedExSettings(audit_per_feed=0)


def test_an_entry_as_old_as_the_oldest_listed_is_not_judged():
    # two posts at the same second, the document's count cut between them (the simulator
    # once called such an honest entry fake)
    audit = EntryAudit(1.0, 16, 0.0, 1e9, random.Random(1))
    audit.note(0.0, F1, address(9), [Entry("cut", 500.0), Entry("newer-absent", 501.0)])
    verdicts = audit.judge(10.0, F1, [Entry("kept", 500.0), Entry("newest", 900.0)])
    assert verdicts.unverifiable == 1 and [key for _, key in verdicts.fake] == ["newer-absent"]
