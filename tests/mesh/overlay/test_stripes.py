"""SplitStream-style stripes (issue 14 section 5c, paper 4.4): a feed's records spread over 16
stripe trees whose group ids differ in the first digit, so each node forwards in about one stripe
and no node carries much more than its share; measured against one tree in the same overlay."""

from __future__ import annotations

import pytest
from nacl.signing import SigningKey

from feedmesh.mesh.overlay.scenario import build_overlay
from feedmesh.mesh.overlay.scribe import ScribeConfig
from feedmesh.mesh.overlay.stripes import first_digit, stripe_groups, stripe_of
from feedmesh.mesh.records import FeedWriter

URL = "https://news.example.org/striped.xml"
NODES, RECORDS = 300, 64
CHILDREN = 16


def test_stripe_groups_differ_in_the_first_digit_only():
    groups = stripe_groups(URL, 16)
    assert [first_digit(g) for g in groups] == list(range(16))
    assert len({g & ((1 << 124) - 1) for g in groups}) == 1
    assert [first_digit(g) for g in stripe_groups(URL, 4)] == [0, 4, 8, 12]
    assert [stripe_of(s, 4) for s in (1, 2, 3, 4, 5)] == [1, 2, 3, 0, 1]
    with pytest.raises(ValueError, match="stripes must be 1 to 16"):
        stripe_groups(URL, 17)


def run(stripes: int, feed_children: int = 20):
    overlay = build_overlay(NODES, seed=7, settle=3.0,
                            scribe=ScribeConfig(max_children=CHILDREN, feed_children=feed_children))
    sim, nodes = overlay.sim, overlay.nodes
    writer = FeedWriter(SigningKey(b"\x22" * 32), URL)
    got = {n.handle.addr: [] for n in nodes}
    sim.after_step = lambda node: got[node.handle.addr].extend(node.take_deliveries())
    for node in nodes[1:]:
        sim.act(node.handle.addr,
                lambda n, now: n.subscribe(now, URL, writer.feed, stripes=stripes))
    sim.run_until(sim.now + 4.0)
    before = {n.handle.addr: n.counters["forwarded"] for n in nodes}
    for _ in range(RECORDS):
        wire = writer.append({"id": str(writer.seq + 1)})
        sim.act(0, lambda n, now, w=wire, s=writer.seq: n.publish(now, URL, s, w, stripes=stripes))
        sim.run_until(sim.now + 0.05)
    sim.run_until(sim.now + 3.0)
    for node in nodes[1:]:   # every subscriber verified every record, in order, once
        assert [d.record.seq for d in got[node.handle.addr]] == list(range(1, RECORDS + 1))
    load = [n.counters["forwarded"] - before[n.handle.addr] for n in nodes]
    interior = [sum(1 for g in n.groups.values() if g.children) for n in nodes]
    run.pushed_down = sum(n.counters["pushed-down"] for n in nodes)
    return load, interior


def test_stripes_spread_the_forwarding_so_no_node_carries_more_than_its_share():
    one_load, _ = run(1)
    striped_load, striped_interior = run(16)
    pushed_down = run.pushed_down   # children handed down to a sibling, none lost (run checks)
    unbounded_load, _ = run(16, feed_children=0)
    assert pushed_down > 0 and run.pushed_down == 0
    mean = sum(striped_load) / NODES
    print(f"totals {sum(one_load)} {sum(striped_load)}; one tree: max {max(one_load)} mean "
          f"{sum(one_load) / NODES:.1f} forwarding nodes {sum(1 for x in one_load if x)}; "
          f"16 stripes: max {max(striped_load)} mean {mean:.1f} forwarding nodes "
          f"{sum(1 for x in striped_load if x)}; stripes forwarded in: "
          f"{sorted(striped_interior)[-10:]}; without the bound over stripes: max "
          f"{max(unbounded_load)}")
    # the same copies are sent either way (one per subscriber and record, within recoveries)
    assert sum(striped_load) == pytest.approx(sum(one_load), rel=0.05)
    assert sum(unbounded_load) == pytest.approx(sum(one_load), rel=0.05)
    # one tree: its ~50 interior nodes forward every record, up to 16 copies each (16 x mean);
    # stripes: every node forwards; with the bound over a feed's stripes (20 children, the mean
    # being 16: 20 x 4 records = 80 copies, 1.26x the mean), none more than 1.3x the mean; per
    # stripe alone (16 children in each), 2x+
    assert max(one_load) >= 12 * mean
    assert max(striped_load) <= 1.3 * mean
    assert max(unbounded_load) >= 2 * mean
    assert sum(1 for x in striped_load if x) >= 0.9 * NODES
    assert sum(1 for x in one_load if x) <= 0.25 * NODES
