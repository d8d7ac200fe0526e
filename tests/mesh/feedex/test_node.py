"""The FeedEx node core, one operation at a time, on a manual clock (tests/mesh/feedex/net.py)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from feedmesh.mesh.feedex import FeedExSettings, bundle_did
from feedmesh.mesh.feedex.messages import (
    Bundle,
    CheckDid,
    Connect,
    ConnectReply,
    DidStatus,
    Disconnect,
    Error,
    GetNeighbors,
    PutEntries,
    QueryFeed,
    UpdateSubset,
)

from .net import TRACKER, Net, address, entry

F1, F2, F3, F4 = (f"http://pub.test/feed/{i}" for i in range(1, 5))


def chain(net: Net, *feeds: list[str]):
    """Nodes 1..n, each connected to the next."""
    nodes = [net.add(i + 1, f) for i, f in enumerate(feeds)]
    for a, b in itertools.pairwise(nodes):
        net.connect(a, b)
    return nodes


def test_connect_reply_is_computed_without_the_callers_advertisement():
    net = Net()
    a, b = chain(net, [F1], [F2])
    assert b.neighbours[a.address].subset == {F1: 0}
    assert a.neighbours[b.address].subset == {F2: 0, }
    c = net.add(3, [F3])
    net.connect(c, b)
    reply = net.calls(ConnectReply, to=c.address)[-1]
    assert reply.accepted
    # b's own feed at 0, a's at 1; c's own F3 is not echoed back to it
    assert reply.subset == {F2: 0, F1: 1}
    # c advertised F3: b now advertises it to a (hop 1) at the next round, never to c
    net.run(301)
    update = [m for m in net.calls(UpdateSubset, to=a.address) if m.added][-1]
    assert update.added == {F3: 1} and update.removed == []
    assert a.neighbours[b.address].subset == {F2: 0, F3: 1}
    assert F3 not in c.neighbours[b.address].subset


def test_updates_are_incremental_periodic_and_respect_max_hops():
    net = Net(FeedExSettings(max_subset_hops=2))
    a, b, c, d = chain(net, [F1], [], [], [])
    net.run(3 * 301)
    assert b.neighbours[c.address].subset.get(F1) is None  # c advertises nothing b gave it
    assert c.neighbours[b.address].subset == {F1: 1}
    assert d.neighbours[c.address].subset == {F1: 2}
    assert c.neighbours[d.address].subset == {}  # hop 3 > max_subset_hops 2: not advertised
    def changes():  # empty updates are keep-alives to silent neighbours
        return [m for m in net.calls(UpdateSubset) if m.added or m.removed]

    before = len(changes())
    net.run(301)
    assert len(changes()) == before  # nothing changed, nothing sent
    b.subscribe(net.now, F4)
    assert len(changes()) == before  # not immediately (3.1)
    net.run(301)
    updates = [m for m in net.calls(UpdateSubset, to=a.address) if m.added]
    assert updates[-1].added == {F4: 0}
    a.unsubscribe(net.now, F1)
    net.run(301)
    assert [m for m in net.calls(UpdateSubset, to=b.address) if m.removed][-1].removed == [F1]


def test_bundle_travels_with_check_did_before_put_and_path_added_by_receiver():
    net = Net()
    a, b, c = chain(net, [F1], [F1], [F1])
    net.fetch(a, F1, [entry("x1", 10.0), entry("x2", 20.0)])
    net.run(5)
    assert net.keys(b) == ["x1", "x2"] and net.keys(c) == ["x1", "x2"]
    assert net.delivered[c.address][0].source == b.address
    puts_to_c = net.calls(PutEntries, to=c.address)
    assert [bundle.path for bundle in puts_to_c[0].bundles] == [[a.address]]
    did = bundle_did(F1, ["x1", "x2"])
    assert c.seen_did(did)
    # every put was preceded by a check_did of the same did to the same node
    for _, dst, message in net.sent:
        if isinstance(message, PutEntries):
            assert any(isinstance(m, CheckDid) and did in m.dids and d == dst
                       for _, d, m in net.sent)
    # nobody got the bundle twice
    assert len(net.calls(PutEntries)) == 2


def test_entries_already_stored_are_stripped_and_known_bundles_not_sent_again():
    net = Net()
    a, b, c = chain(net, [F1], [F1], [F1])
    net.fetch(b, F1, [entry("old")])
    net.run(5)
    net.fetch(a, F1, [entry("old"), entry("new")])
    net.run(5)
    forwarded = net.calls(PutEntries, to=c.address)[-1].bundles[0]
    assert [e.key for e in forwarded.entries] == ["new"]
    assert net.keys(c) == ["old", "new"]
    # the same fetch again: a has nothing new, sends nothing
    sent = len(net.sent)
    net.fetch(a, F1, [entry("old"), entry("new")])
    net.run(5)
    assert len(net.sent) == sent


def test_seen_did_gets_no_put_and_uninterested_neighbours_get_nothing():
    net = Net(FeedExSettings(max_subset_hops=0))
    a = net.add(1, [F1])
    b = net.add(2, [F1])
    c = net.add(3, [F2])
    net.connect(a, b)
    net.connect(a, c)
    net.fetch(b, F1, [entry("e")])  # b has it first and tells a
    net.run(5)
    assert net.keys(a) == ["e"]
    assert not net.calls(CheckDid, to=c.address)  # c advertised no F1 (max hops 0)
    # a second offer of the same did is answered "seen"
    did = bundle_did(F1, ["e"])
    a.receive(net.now, b.address, CheckDid([did]))
    out = a.take()
    assert out[0].message == DidStatus([], [did])


def test_loops_are_dropped_and_forged_paths_lower_standing_until_dropped():
    net = Net(FeedExSettings(forged_path_penalty=4.0, drop_standing=-10.0))
    a, b = chain(net, [F1], [F1])
    net.fetch(a, F1, [entry("e")])
    net.run(5)
    did = bundle_did(F1, ["e"])
    # b sends the bundle back to a with a in the path: a loop, dropped quietly
    looped = Bundle(did, F1, [entry("e")], [a.address])
    a.receive(net.now, b.address, PutEntries([looped]))
    assert a.take() == []
    assert a.stats["loops"] == 1
    # a path naming a for a bundle a never saw: forged
    fake = Bundle(bundle_did(F1, ["f"]), F1, [entry("f")], [a.address])
    a.receive(net.now, b.address, PutEntries([fake]))
    out = a.take()
    assert isinstance(out[0].message, Error) and out[0].message.code == "forged_path"
    assert a.standing.score(b.address) == -4.0
    # a path that lists its own sender, and an origin bundle whose did is not its digest
    a.receive(net.now, b.address, PutEntries([Bundle(did, F1, [entry("g")], [b.address])]))
    a.take()
    assert b.address in a.neighbours
    a.receive(net.now, b.address, PutEntries([Bundle(did, F1, [entry("h")], [])]))
    out = a.take()
    assert b.address not in a.neighbours  # -12 <= -10: dropped and banned
    assert any(isinstance(o.message, Disconnect) for o in out)
    a.receive(net.now, b.address, Connect({F1: 0}))
    refused = a.take()
    assert refused[0].message.accepted is False
    assert net.keys(a) == ["e"]  # nothing of the forged bundles reached the reader


def test_malformed_calls_count_against_the_sender_and_floods_are_cut():
    net = Net(FeedExSettings(max_calls_per_minute=5))
    a, b = chain(net, [F1], [F1])
    a.malformed(net.now, b.address, "truncated msgpack")
    out = a.take()
    assert out[0].message.code == "malformed"
    assert a.standing.score(b.address) == -1.0
    net.run(60)
    answered = []
    for _ in range(8):
        a.receive(net.now, b.address, CheckDid([bytes(20)]))
        answered.append(a.take())
    assert all(answered[:5]) and not any(answered[5:])
    assert a.standing.score(b.address) < -1.0


def test_calls_from_strangers_are_refused():
    net = Net()
    a = net.add(1, [F1])
    stranger = address(99)
    for message in (CheckDid([bytes(20)]), UpdateSubset(),
                    QueryFeed(bytes(8), F1, hops_left=1)):
        a.receive(net.now, stranger, message)
        out = a.take()
        assert out[0].message.code == "not_neighbour"


def test_deficit_beyond_d_stops_serving_a_neighbour():
    net = Net(FeedExSettings(max_deficit=3.0))
    a, b = chain(net, [F1], [F1])
    for i in range(6):
        net.fetch(a, F1, [entry(f"e{i}")])
        net.run(2)
    # b never gives back: a served it while the deficit stayed within D = 3
    assert net.keys(b) == ["e0", "e1", "e2", "e3"]
    assert a.neighbours[b.address].deficit == 4.0
    assert a.stats["refused_deficit"] == 2
    net.fetch(b, F1, [entry("from-b-1"), entry("from-b-2")])  # b contributes: served again
    net.run(2)
    assert a.neighbours[b.address].received == 2.0
    net.fetch(a, F1, [entry("e9")])
    net.run(2)
    assert net.keys(b)[-1] == "e9"


def test_a_free_rider_that_reconnects_keeps_its_deficit_until_the_ledger_memory_ends():
    net = Net(FeedExSettings(max_deficit=3.0, ledger_memory_s=7200.0))
    a, b = chain(net, [F1], [F1])
    for i in range(5):
        net.fetch(a, F1, [entry(f"e{i}")])
        net.run(2)
    assert net.keys(b) == ["e0", "e1", "e2", "e3"] and a.stats["refused_deficit"] == 1
    # whitewashing: b leaves and comes back under the same identity (address, stated port)
    b.unreachable(net.now, a.address)  # b drops a (it tells a nothing)
    net.carry(b)
    a.receive(net.now, b.address, Disconnect("bye"))
    net.carry(a)
    assert b.address not in a.neighbours
    net.connect(b, a)
    assert b.address in a.neighbours and a.neighbours[b.address].deficit == 4.0
    net.fetch(a, F1, [entry("e5")])
    net.run(2)
    assert net.keys(b)[-1] == "e3" and a.stats["refused_deficit"] == 2  # still not served
    # a ledger is kept for ledger_memory_s only: after that a newcomer starts clean
    a.receive(net.now, b.address, Disconnect("bye"))
    net.carry(a)
    b.unreachable(net.now, a.address)
    net.carry(b)
    net.run(7300)
    net.connect(b, a)
    assert a.neighbours[b.address].deficit == 0.0
    net.fetch(a, F1, [entry("e6")])
    net.run(2)
    assert net.keys(b)[-1] == "e6"


def test_with_no_ledger_memory_a_reconnect_starts_clean_as_in_the_paper():
    net = Net(FeedExSettings(max_deficit=3.0, ledger_memory_s=0.0))
    a, b = chain(net, [F1], [F1])
    for i in range(5):
        net.fetch(a, F1, [entry(f"e{i}")])
        net.run(2)
    a.receive(net.now, b.address, Disconnect("bye"))
    net.carry(a)
    b.unreachable(net.now, a.address)
    net.carry(b)
    net.connect(b, a)
    assert a.neighbours[b.address].deficit == 0.0
    net.fetch(a, F1, [entry("e5")])
    net.run(2)
    assert net.keys(b)[-1] == "e5"  # the whitewasher is served again


def full_hub(net: Net, **settings):
    """hub (F1, F2) full with two honest neighbours: ``keen`` (F1, F2) and ``idle`` (F4)."""
    hub = net.add(1, [F1, F2], **settings)
    keen = net.add(2, [F1, F2])
    idle = net.add(3, [F4])
    net.connect(keen, hub)
    net.connect(idle, hub)
    assert set(hub.neighbours) == {keen.address, idle.address}
    return hub, keen, idle


def connect_as(net: Net, node, sender, **fields) -> ConnectReply:
    """A Connect from ``sender`` (any address: no node behind it), the reply to it."""
    node.receive(net.now, sender, Connect(**fields))
    replies = [m for to, m in node.take() if to == sender and isinstance(m, ConnectReply)]
    return replies[-1]


@pytest.mark.parametrize("prefix_v4", [32, 24])
def test_twelve_connects_from_one_address_stating_no_neighbours_evict_no_one(prefix_v4):
    """The attack of issue 32 item 5: 12 connects from one address (12 stated ports, or with
    /24 counting 12 addresses of one /24), each stating neighbours: 0 and every feed the peer
    follows at hop 0, used to replace all of its honest neighbours."""
    net = Net(FeedExSettings(min_neighbours=1, max_neighbours=2))
    hub, keen, idle = full_hub(net)
    hub = net.nodes[hub.address]
    if prefix_v4 == 24:  # the default: the hub counts /24s from here on (the limit applies to
        # whom it takes: keen and idle, both of 127.0.8.x, were taken under /32 and stay)
        object.__setattr__(hub, "settings", replace(hub.settings, neighbour_prefix_v4=24))
    attackers = [(f"127.0.66.{1 + k}", 8400) if prefix_v4 == 24 else ("127.0.66.1", 9000 + k)
                 for k in range(12)]
    replies = [connect_as(net, hub, a, subset={F1: 0, F2: 0, F3: 0}, neighbours=0)
               for a in attackers]
    net.run(1.0)
    assert keen.address in hub.neighbours and idle.address in hub.neighbours
    assert not net.calls(Disconnect, to=keen.address) and not net.calls(Disconnect, to=idle.address)
    assert hub.address in keen.neighbours and hub.address in idle.neighbours
    taken = [a for a in attackers if a in hub.neighbours]
    assert len(taken) == 1 and hub.neighbours[taken[0]].probation  # one network, one trial
    assert sum(r.accepted for r in replies) == 1
    assert {r.reason for r in replies if not r.accepted} == {
        "refused: a neighbour on the same network already"}
    # upkeep rounds later (maintain_interval_s 60), still nothing it stated moved anyone
    net.run(400)
    assert {keen.address, idle.address} <= set(hub.neighbours)


def test_one_neighbour_per_prefix_by_default():
    net = Net()
    hub = net.add(1, [F1], neighbour_prefix_v4=24)
    a, b, c = net.add(2, [F1]), net.add(3, [F1]), net.add(4, [F1])
    net.connect(a, hub)
    net.connect(b, hub)  # 127.0.8.3 is on a's /24: tried, not a second neighbour of it
    net.connect(c, hub)
    assert set(hub.neighbours) == {a.address, b.address} and hub.neighbours[b.address].probation
    assert net.calls(ConnectReply, to=c.address)[-1].accepted is False
    v6 = connect_as(net, hub, ("2001:db8:1:2::7", 8400), subset={F1: 0})
    other = connect_as(net, hub, ("2001:db8:1:3::7", 8400), subset={F1: 0})
    third = connect_as(net, hub, ("2001:db8:1:4::7", 8400), subset={F1: 0})
    assert v6.accepted and other.accepted and not third.accepted  # the same /48
    assert hub.neighbours[("2001:db8:1:3::7", 8400)].probation
    net.run(61)  # upkeep: neither trial becomes a neighbour while its network has one
    assert hub.neighbours[b.address].probation
    # our own connects keep to one per prefix too
    hub.publisher_listed(net.now, [("127.0.9.4", 8400), ("127.0.9.5", 8400), ("127.0.8.9", 8400),
                                   ("127.0.10.4", 8400)])
    asked = [to for to, m in hub.take() if isinstance(m, Connect)]
    assert asked == [("127.0.9.4", 8400), ("127.0.10.4", 8400)]


def test_a_newcomer_displaces_a_neighbour_only_once_our_fetches_confirmed_its_entries():
    net = Net(FeedExSettings(min_neighbours=1, max_neighbours=2, audit_sample=1.0,
                             audit_grace_s=60.0, probation_s=7200.0))
    hub, keen, idle = full_hub(net)
    newcomer = net.add(4, [F1])
    net.connect(newcomer, hub)  # a new prefix: taken on trial, beyond max_neighbours
    assert hub.neighbours[newcomer.address].probation
    assert {keen.address, idle.address} <= set(hub.neighbours)
    entries = [entry(f"n{i}", 100.0 + i) for i in range(4)]
    net.fetch(newcomer, F1, entries)
    net.run(61)
    assert net.keys(hub) == ["n0", "n1", "n2", "n3"]
    assert set(hub.neighbours) == {keen.address, idle.address, newcomer.address}  # entries alone
    # a document whose window starts after them cannot judge them: no proof either way
    hub.listed(net.now, F1, [entry("other", 500.0)])
    net.carry(hub)
    assert hub.neighbours[newcomer.address].probation
    more = [entry(f"m{i}", 200.0 + i) for i in range(2)]
    net.fetch(newcomer, F1, more)
    net.run(61)
    hub.listed(net.now, F1, more)  # our own fetch found them at the source
    net.carry(hub)
    net.run(1.0)
    assert not hub.neighbours[newcomer.address].probation
    assert set(hub.neighbours) == {keen.address, newcomer.address}  # idle: fewest confirmed
    assert net.calls(Disconnect, to=idle.address)
    assert not net.calls(Disconnect, to=keen.address)


def test_a_newcomer_that_proves_nothing_leaves_after_its_trial_and_is_not_retried():
    net = Net(FeedExSettings(min_neighbours=1, max_neighbours=2, probation_s=600.0,
                             probation_slots=1))
    hub, keen, idle = full_hub(net)
    first, second = net.add(4, [F1, F2]), net.add(5, [F1, F2])
    net.connect(first, hub)
    net.connect(second, hub)  # the one trial slot is taken
    assert net.calls(ConnectReply, to=second.address)[-1].reason == "full"
    net.run(700)
    assert first.address not in hub.neighbours
    assert set(hub.neighbours) == {keen.address, idle.address}
    assert net.calls(Disconnect, to=first.address)[-1].reason == "trial over: full"
    assert connect_as(net, hub, first.address, subset={F1: 0}).reason == "full"
    assert connect_as(net, hub, second.address, subset={F1: 0}).accepted


def test_a_peer_restarted_on_a_new_port_is_tried_and_takes_its_old_place_when_that_dies():
    net = Net(FeedExSettings(min_neighbours=1, max_neighbours=4))
    hub, old = net.add(1, [F1]), net.add(2, [F1])
    net.connect(old, hub)
    assert connect_as(net, hub, (old.address[0], 8401), subset={F1: 0}).accepted
    assert hub.neighbours[(old.address[0], 8401)].probation
    assert not connect_as(net, hub, (old.address[0], 8402), subset={F1: 0}).accepted
    hub.unreachable(net.now, old.address)
    net.carry(hub)
    net.run(61)
    assert not hub.neighbours[(old.address[0], 8401)].probation


def test_a_newcomer_on_trial_becomes_a_neighbour_when_one_leaves():
    net = Net(FeedExSettings(min_neighbours=1, max_neighbours=2))
    hub, keen, idle = full_hub(net)
    newcomer = net.add(4, [F1])
    net.connect(newcomer, hub)
    net.down.add(idle.address)
    hub.unreachable(net.now, idle.address)
    net.carry(hub)
    net.run(61)  # the next upkeep round: the newcomer takes its place
    assert idle.address not in hub.neighbours and keen.address in hub.neighbours
    assert not hub.neighbours[newcomer.address].probation


def test_a_full_node_takes_a_needy_newcomer_so_late_joiners_are_not_left_out():
    net = Net(FeedExSettings(min_neighbours=2, max_neighbours=3))
    early = [net.add(i, [F1]) for i in range(1, 5)]
    for a in early:
        for b in early:
            if a is not b:
                net.connect(a, b)
    assert all(len(n.neighbours) == 3 for n in early)
    late = net.add(5, [F1])
    net.connect(late, early[0])
    net.connect(late, early[1])
    assert len(late.neighbours) == 2
    assert all(len(n.neighbours) >= 2 for n in early)


def test_dead_neighbours_are_detected_and_the_set_replenished_from_the_tracker():
    net = Net(FeedExSettings(min_neighbours=2, max_neighbours=3))
    nodes = [net.add(i, [F1], tracker=True) for i in range(1, 6)]
    net.run(800)  # the first node asks the tracker again and retries refusals after 600 s
    assert all(len(n.neighbours) >= 2 for n in nodes)
    first = nodes[0]
    victims = list(first.neighbours)[:2]
    net.down.update(victims)
    for v in victims:
        net.tracker.forget(v)
    net.run(2 * 900 + 200)  # silent past dead_after_s (keep-alive probes go unanswered)
    assert not set(victims) & set(first.neighbours)
    assert len(first.neighbours) >= 2
    assert any(d == TRACKER and isinstance(m, GetNeighbors) for s, d, m in net.sent
               if s == first.address)


def test_unreachable_neighbour_is_dropped_at_once():
    net = Net(FeedExSettings(min_neighbours=1))
    a, b = chain(net, [F1], [F1])
    net.down.add(b.address)
    net.fetch(a, F1, [entry("e")])
    net.run(2)
    assert b.address not in a.neighbours


def test_query_is_recursive_aggregated_and_cached():
    net = Net()
    a, b, c, d = chain(net, [F1], [F2], [F1], [F2])
    net.fetch(c, F1, [entry("old1", 100.0), entry("old2", 200.0)])
    net.run(5)
    qid = a.query(net.now, F1, since=150.0, hops=3)
    net.carry(a)
    net.run(30)
    result = net.results[-1]
    assert result.qid == qid
    holders = {h.address: h for h in result.holders}
    assert holders[c.address].count == 1 and holders[c.address].newest == 200.0
    assert holders[b.address].count == 1  # b relays F1 (hop 1) between a and c: it keeps them
    assert d.address not in holders  # d neither follows nor relays F1
    # b answers a second query for the same feed and range from its cache, without relaying
    relayed = len(net.calls(QueryFeed, to=c.address))
    qid2 = a.query(net.now, F1, since=150.0, hops=3)
    net.carry(a)
    net.run(30)
    assert net.results[-1].qid == qid2 and net.results[-1].holders
    assert len(net.calls(QueryFeed, to=c.address)) == relayed


def test_entries_remembered_from_an_archive_are_answered_for_and_stripped_not_delivered():
    net = Net()
    a, b = chain(net, [F1], [F1])
    a.remember(F1, [entry("old1", 100.0), entry("old2", 200.0)])  # held before a restart
    assert net.delivered[a.address] == [] and not net.calls(CheckDid)
    b.query(net.now, F1, since=150.0)
    net.carry(b)
    net.run(30)
    holders = {h.address: h for h in net.results[-1].holders}
    assert holders[a.address].count == 1 and holders[a.address].newest == 200.0
    net.fetch(b, F1, [entry("old2", 200.0), entry("new", 300.0)])
    net.run(5)
    assert net.keys(a) == ["new"]  # old2 was stripped: a holds it already
    assert a.neighbours[b.address].entries_from == 1


def test_query_times_out_when_a_neighbour_is_silent():
    net = Net(FeedExSettings(query_timeout_s=2.0))
    a, b = chain(net, [F1], [F1])
    net.fetch(a, F1, [entry("mine", 5.0)])
    net.run(2)
    net.down.add(b.address)
    net.nodes.pop(b.address)
    qid = a.query(net.now, F1, hops=1)
    assert {to for to, _ in a.take()} == {b.address}  # b is down: its query never leaves
    net.carry(a)  # nothing left to send: a's wait for the answer goes on the loop
    net.run(10)
    assert [r.qid for r in net.results] == [qid]
    assert [h.address for h in net.results[0].holders] == [a.address]


@pytest.mark.parametrize("hops", [0, 1])
def test_query_without_hops_answers_locally(hops):
    net = Net()
    a = net.add(1, [F1])
    net.fetch(a, F1, [entry("e", 1.0)])
    qid = a.query(net.now, F1, hops=hops)
    out = a.take_deliveries()
    assert out[-1].qid == qid and out[-1].holders[0].count == 1


def test_batched_forwards_offer_several_dids_in_one_check_did():
    net = Net(FeedExSettings(forward_batch_s=5.0))
    a, b = chain(net, [F1, F2], [F1, F2])
    net.fetch(a, F1, [entry("one")])
    net.run(1)
    net.fetch(a, F2, [entry("two")])
    assert not net.calls(CheckDid)  # held for the batch window
    net.run(10)
    checks = net.calls(CheckDid, to=b.address)
    assert len(checks) == 1 and len(checks[0].dids) == 2
    puts = net.calls(PutEntries, to=b.address)
    assert len(puts) == 1 and len(puts[0].bundles) == 2
    assert sorted(net.keys(b)) == ["one", "two"]


def test_clients_a_publisher_listed_are_candidates_connected_below_the_minimum():
    net = Net(FeedExSettings(min_neighbours=1, max_neighbours=2))
    a = net.add(1, [F1])
    b = net.add(2, [F1])
    c = net.add(3, [F1])
    a.publisher_listed(net.now, [b.address, a.address])  # itself is skipped
    net.carry(a)
    net.run(1)
    assert set(a.neighbours) == {b.address}
    a.publisher_listed(net.now, [c.address])  # at the minimum: kept for later
    net.carry(a)
    net.run(1)
    assert set(a.neighbours) == {b.address}
    b.unreachable(net.now, a.address)
    net.carry(b)
    a.unreachable(net.now, b.address)  # b is gone: the listed c fills in
    net.carry(a)
    net.run(1)
    assert set(a.neighbours) == {c.address}


def test_a_node_answers_get_neighbors_with_its_neighbours():
    net = Net()
    a, b, c = chain(net, [F1], [F1], [F1])
    b.receive(net.now, address(7), GetNeighbors(5))
    out = b.take()
    assert sorted(out[0].message.peers) == sorted([a.address, c.address])


def _triangle(settings: FeedExSettings):
    net = Net(settings)
    a, b, c = chain(net, [F1], [F1], [F1])
    net.connect(a, c)
    net.fetch(a, F1, [entry("e0")])   # c gets it from a; b's offer of it comes a hop later
    net.run(2)
    return net, a, b, c


def test_a_prompt_offer_of_a_bundle_just_got_elsewhere_counts_for_its_sender():
    net, a, b, c = _triangle(FeedExSettings(offer_credit=0.5, offer_credit_s=60.0))
    assert net.keys(c) == ["e0"] and net.keys(b) == ["e0"]
    # b gave c nothing new (a was first) but offered at once what it got: half a put's credit
    assert c.neighbours[b.address].entries_from == 0
    assert c.neighbours[b.address].received == 0.5 and c.stats["offers_credited"] >= 1
    # what a gave b earns b nothing for offering it back to a (a knows b holds it)
    assert a.neighbours[b.address].received == 0.0
    # a late offer (of what we surely hold by then) earns nothing, nor does any in the
    # paper's ledger
    for late in (FeedExSettings(offer_credit=0.5, offer_credit_s=0.01),
                 FeedExSettings(offer_credit=0.0)):
        _, _, b2, c2 = _triangle(late)
        assert c2.neighbours[b2.address].received == 0.0


def test_a_neighbour_that_no_longer_holds_us_is_dropped_when_it_says_so():
    """b gave a up (a call to it timed out, say): a's offers now get not_neighbour. A link held
    on one side only carries nothing but refusals, so a drops b and looks for another."""
    net = Net(FeedExSettings(min_neighbours=1))
    a, b = chain(net, [F1], [F1])
    b.unreachable(net.now, a.address)  # b drops a without a word, as after a timeout
    assert a.address not in b.neighbours and b.address in a.neighbours
    net.fetch(a, F1, [entry("e")])
    net.run(2)
    assert [m.code for m in net.calls(Error, to=a.address)] == ["not_neighbour"]
    assert b.address not in a.neighbours
    assert a.stats["not_neighbour_errors"] == 1


def test_a_connect_accepted_after_we_gave_up_waiting_is_taken_and_a_stray_one_is_not():
    """Calls slower than connect_timeout_s (a busy loop): the callee took us, so its reply is
    taken late rather than leaving it holding a neighbour that refuses it. An accepting reply
    from a node we never asked still makes no neighbour."""
    net = Net(FeedExSettings(connect_timeout_s=30.0), latency=50.0)
    a, b = net.add(1, [F1]), net.add(2, [F1])
    a.connect(net.now, b.address)
    net.carry(a)
    net.run(150)  # a gave up at its 60 s upkeep; b's accepting reply came at 100 s
    assert a.address in b.neighbours
    assert b.address in a.neighbours
    assert a.stats["late_connect_replies"] == 1
    stranger = address(9)
    a.receive(net.now, stranger, ConnectReply(True, {F1: 0}))
    assert stranger not in a.neighbours
