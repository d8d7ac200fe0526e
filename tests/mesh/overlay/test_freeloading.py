"""Freeloading (issue 14 section 5, paper 4.4) in the simulator: a forwarder that takes records
but never forwards them (nor answers recoveries) is found out by its children, which compare what
it announces with what it sends; they shun it, join elsewhere, recover what they missed, and get
later records down the tree again. Honest parents are never suspected."""

from __future__ import annotations

from dataclasses import replace

from feedmesh.mesh.overlay.ids import group_id
from feedmesh.mesh.overlay.scenario import build_overlay, run_experiment
from feedmesh.mesh.overlay.scribe import ScribeConfig
from tests.mesh.overlay.test_scribe import URL, Feed


def test_a_freeloading_forwarder_is_detected_and_its_children_join_elsewhere():
    feed = Feed(60, seed=4)
    gid = group_id(URL)
    rider = max((n for n in feed.nodes[1:] if not n.groups[gid].root),
                key=lambda n: len(n.groups[gid].children))
    children = [feed.nodes[c.addr] for c in rider.groups[gid].children.values()]
    assert len(children) >= 2
    rider.config = replace(rider.config, forward=False)   # takes, never forwards

    feed.publish(12)
    feed.sim.run_until(feed.sim.now + 4.0)
    for child in children:
        assert child.counters["freeloader-detected"] == 1, child.counters
        parent = child.groups[gid].parent
        assert child.groups[gid].root or (parent is not None and parent.id != rider.handle.id)
    assert not rider.groups[gid].children
    for node in feed.live_subscribers():     # what the rider withheld was recovered elsewhere
        assert feed.seqs(node) == list(range(1, 13)), node.handle.addr
    honest = [n for n in feed.nodes if n not in children]
    assert all(n.counters["freeloader-detected"] == 0 for n in honest)

    # later records reach every subscriber down the tree, none through the rider
    received = {n.handle.addr: len(feed.got[n.handle.addr]) for n in feed.nodes}
    feed.publish(3)
    feed.sim.run_until(feed.sim.now + 1.0)
    for node in feed.live_subscribers():
        fresh = feed.got[node.handle.addr][received[node.handle.addr]:]
        assert [d.record.seq for d in fresh] == [13, 14, 15]
        assert not any(d.recovered for d in fresh), node.handle.addr
    assert rider.counters["forwarded"] == 0


def test_detection_can_be_switched_off():
    feed = Feed(40, seed=4, scribe=ScribeConfig(freeload_streak=0))
    gid = group_id(URL)
    rider = max((n for n in feed.nodes[1:] if not n.groups[gid].root),
                key=lambda n: len(n.groups[gid].children))
    children = [feed.nodes[c.addr] for c in rider.groups[gid].children.values()]
    rider.config = replace(rider.config, forward=False)
    feed.publish(12)
    feed.sim.run_until(feed.sim.now + 4.0)
    assert children and all(c.groups[gid].parent.id == rider.handle.id for c in children)
    assert all(n.counters["freeloader-detected"] == 0 for n in feed.nodes)


def test_churn_does_not_make_honest_parents_look_like_freeloaders():
    # the whole experiment: 20% of the nodes (the root among them) die while records go out,
    # so many parents hold records only by recovery for a while; none may be suspected
    overlay = build_overlay(80, seed=2, join_gap=0.02)
    outcome = run_experiment(80, seed=2, items=5, churn_items=24, drain=10.0, overlay=overlay)
    assert outcome.missed_after_churn == 0 and outcome.root_killed
    assert sum(n.counters["freeloader-detected"] for n in overlay.nodes) == 0


def test_a_freeloader_that_hides_newer_records_in_its_heartbeats_is_found_by_rumours():
    # the rider announces nothing new and forwards nothing, so its children see no gap from it;
    # their leaf-set neighbours' rumours (newest seq held) and the records fetched from those
    # neighbours are the evidence against it
    feed = Feed(60, seed=4)
    gid = group_id(URL)
    rider = max((n for n in feed.nodes[1:] if not n.groups[gid].root),
                key=lambda n: len(n.groups[gid].children))
    children = [feed.nodes[c.addr] for c in rider.groups[gid].children.values()]
    assert len(children) >= 2
    rider.config = replace(rider.config, forward=False, hide_newest=True)

    feed.publish(12)
    feed.sim.run_until(feed.sim.now + 12.0)
    for child in children:
        assert child.counters["freeloader-detected"] == 1, child.counters
        parent = child.groups[gid].parent
        assert child.groups[gid].root or (parent is not None and parent.id != rider.handle.id)
    assert not rider.groups[gid].children
    assert sum(c.counters["rumour-asked"] for c in children) > 0
    for node in feed.live_subscribers():
        assert feed.seqs(node) == list(range(1, 13)), node.handle.addr
    # nobody suspected an honest parent
    assert all(set(n.shunned) <= {rider.handle.id} for n in feed.nodes)

    feed.publish(10)
    feed.sim.run_until(feed.sim.now + 8.0)
    for node in feed.live_subscribers():
        assert feed.seqs(node) == list(range(1, 23)), node.handle.addr
    assert all(set(n.shunned) <= {rider.handle.id} for n in feed.nodes)


def test_without_rumours_a_hiding_freeloader_goes_unnoticed():
    feed = Feed(60, seed=4, scribe=ScribeConfig(rumour_every=0))
    gid = group_id(URL)
    rider = max((n for n in feed.nodes[1:] if not n.groups[gid].root),
                key=lambda n: len(n.groups[gid].children))
    children = [feed.nodes[c.addr] for c in rider.groups[gid].children.values()]
    rider.config = replace(rider.config, forward=False, hide_newest=True)
    feed.publish(12)
    feed.sim.run_until(feed.sim.now + 8.0)
    assert children and all(c.groups[gid].parent.id == rider.handle.id for c in children)
    assert all(c.counters["freeloader-detected"] == 0 for c in children)
