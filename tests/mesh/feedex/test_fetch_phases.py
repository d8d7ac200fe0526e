"""The network as one monitor on a manual clock: followers of a feed spread their fetches through
the fetch times they exchange, a lying neighbour cannot make a node fetch sooner or later than
its window allows, and idle neighbours keep each other (keep-alives are answered)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from feedmesh.mesh.feedex import FeedExSettings
from feedmesh.mesh.feedex.messages import UpdateSubset
from feedmesh.mesh.feedex.phases import (
    best_in_window,
    better_in_window,
    future_slots,
    rank_slots,
    slot_in_window,
    toward_middle,
)

from .net import Net

FEED = "http://pub.test/feed/shared"
OTHER = "http://pub.test/feed/other"
T = 16 * 3600.0
ROUND = 300.0
N = 8
SEED = 1


def _gaps(times: list[float]) -> list[float]:
    phases = sorted(t % T for t in times)
    return [(phases[(i + 1) % len(phases)] - p) % T or T for i, p in enumerate(phases)]


def _wait(gaps: list[float]) -> float:
    return sum(g * g for g in gaps) / (2 * T)


def _spread(net: Net, nodes, rounds: int) -> None:
    """Each node plans at once (all from nothing: random phases), then re-plans every round."""
    for node in nodes:
        node.plan_fetch(net.now, FEED, T)
        net.carry(node)
    for _ in range(rounds):
        net.run(ROUND)
        for node in nodes:
            node.replan_fetch(net.now, FEED)
            net.carry(node)


def test_followers_of_one_feed_spread_their_fetches_through_exchanged_times():
    net = Net(FeedExSettings(share_fetch_times=True, min_neighbours=2, max_neighbours=4))
    nodes = [net.add(i, [FEED], rng=random.Random(SEED + i)) for i in range(1, N + 1)]
    for i in range(N):   # a ring with chords: every follower within two hops, few direct
        net.connect(nodes[i], nodes[(i + 1) % N])
        if i < N // 2:
            net.connect(nodes[i], nodes[i + N // 2])
    start = net.now
    _spread(net, nodes, 0)
    _spread(net, nodes, 60)  # 5 hours of rounds, well before the first fetches
    plans = [n.fetch_plans[FEED] for n in nodes]
    after = _gaps(plans)
    # the mean wait for the next fetch, sum(gap^2) / 2T: T / 2N evenly spaced, T / (N + 1) on
    # average for random phases (1.78x as long at N = 8); spread, within 1.3x of even
    assert _wait(after) < 1.3 * T / (2 * N)
    # every plan stayed within its window: not before now, not later than an interval after
    # the node planned
    assert all(start <= p <= start + T + 1 for p in plans)
    # the times travelled in the exchange's own messages
    assert any(m.fetch_times for m in net.calls(UpdateSubset))


def _ring(net: Net, n: int, seed: int):
    nodes = [net.add(i, [FEED], rng=random.Random(seed + i)) for i in range(1, n + 1)]
    for i in range(n):   # a ring with chords: every follower within a few hops, few direct
        net.connect(nodes[i], nodes[(i + 1) % n])
        if i < n // 2:
            net.connect(nodes[i], nodes[i + n // 2])
    return nodes


def _evenness(placement: str, n: int, seed: int) -> tuple[list[float], list[float], float]:
    net = Net(FeedExSettings(share_fetch_times=True, min_neighbours=2, max_neighbours=4,
                             fetch_placement=placement))
    nodes = _ring(net, n, seed)
    start = net.now
    _spread(net, nodes, 40)  # 3.3 hours of rounds: every node knows every follower
    plans = [nd.fetch_plans[FEED] for nd in nodes]
    return plans, _gaps(plans), start


def test_followers_that_know_each_other_take_evenly_spaced_slots_by_rank():
    # ranked, every gap is within a tenth of the even spacing T/n (the largest-gap placement,
    # fetch_placement="gap", leaves gaps from 0.46 to 1.8 of it on these); the schedule is
    # one every follower computes alike, so it stays put once learned
    for n, seed in ((8, 1), (13, 2), (21, 3)):
        plans, gaps, start = _evenness("rank", n, seed)
        assert max(gaps) < 1.1 * T / n and min(gaps) > 0.9 * T / n, (n, sorted(gaps))
        assert all(start <= p <= start + T + 1 for p in plans)


def test_plans_that_are_uneven_but_not_crowded_step_towards_even_spacing():
    # gaps alternating 0.6 and 1.4 of the even spacing: no plan is crowded (closer than half
    # the spacing to another), so the jumps alone never move one (chance 0 here: no jumps at
    # all); each stepping towards the middle of its two nearest known fetches evens them out
    n, now = 8, 10 * T
    spacing = T / n
    offsets = [0.3 * spacing + sum((0.6, 1.4)[k % 2] for k in range(i)) * spacing
               for i in range(n)]
    rng = random.Random(SEED)
    for _ in range(10):   # every follower from the others' plans of the round before
        plans = [now + o for o in offsets]
        moved = [better_in_window(p, now, now + T, T, plans[:i] + plans[i + 1:], rng, chance=0.0)
                 for i, p in enumerate(plans)]
        offsets = [o if m is None else m - now for o, m in zip(offsets, moved, strict=True)]
    gaps = _gaps([now + o for o in offsets])
    assert max(gaps) < 1.2 * spacing and min(gaps) > 0.8 * spacing, [g / spacing for g in gaps]
    assert all(0 <= o <= T for o in offsets)


def test_a_step_goes_half_way_to_the_middle_of_the_nearest_fetches_and_stays_in_the_window():
    now, hour = 10 * T, 3600.0
    known = [now + 1 * hour, now + 5 * hour, now + 13 * hour]
    # between the fetches at 1 h and 5 h, at 1.5 h: half way to the middle, 3 h
    assert toward_middle(now + 1.5 * hour, now, now + T, T, known) == now + 2.25 * hour
    # at the middle already, or a step under 15% of the spacing (T/4 here: 36 min): it stays
    assert toward_middle(now + 3 * hour, now, now + T, T, known) is None
    assert toward_middle(now + 2 * hour, now, now + T, T, known) is None
    # the last gap runs from 13 h to 1 h + T (17 h), its middle at 15 h
    assert toward_middle(now + 13.5 * hour, now, now + T, T, known) == now + 14.25 * hour
    # a step past the window's end goes half way to it: followers stepping past an end
    # together do not meet there
    assert toward_middle(now + 13.5 * hour, now, now + 14 * hour, T, known) == now + 13.75 * hour
    # before the first known fetch the gap wraps around: its middle (-1 h) is before now
    assert toward_middle(now + 0.5 * hour, now, now + T, T, known) == now + 0.25 * hour
    assert toward_middle(now + 0.5 * hour, now + 0.4 * hour, now + T, T,
                         [now - 7 * hour, now + 1 * hour]) == now + 0.45 * hour
    # nothing known, or a plan already due: no move
    assert toward_middle(now + hour, now, now + T, T, []) is None
    assert toward_middle(now - 1.0, now, now + T, T, known) is None


def test_a_lying_neighbour_cannot_make_a_node_fetch_sooner_or_later_than_its_window():
    net = Net(FeedExSettings(share_fetch_times=True))
    node = net.add(1, [FEED, OTHER], rng=random.Random(SEED))
    liar = net.add(2, [FEED])
    net.connect(node, liar)
    start = net.now
    latest = start + T
    planned = node.plan_fetch(start, FEED, T, latest=latest)
    rng = random.Random(5)
    plans = [planned]
    for _ in range(200):   # every round it states fetch times crowding ours, and junk
        mine = node.fetch_plans[FEED]
        lies = UpdateSubset(
            fetch_times={FEED: mine + 1.0, OTHER: net.now, "http://pub.test/never": net.now},
            relayed_times={FEED: [mine + rng.uniform(-60, 60) for _ in range(64)]
                           + [net.now + 10 * 86400.0, float("inf"), -1e300],
                           OTHER: [net.now] * 64})
        node.receive(net.now, liar.address, lies)
        node.take()
        moved = node.replan_fetch(net.now, FEED)
        if moved is not None:
            plans.append(moved)
        net.run(ROUND)
    kept = node.neighbours[liar.address]
    # bounded state: one time of its own per feed it follows itself, relayed ones only for
    # feeds we follow, at most 64 each, none far from now
    assert set(kept.fetch_times) == {FEED}
    assert len(kept.relayed_times[FEED]) <= 64 and OTHER in kept.relayed_times
    assert all(abs(t - net.now) <= node.settings.fetch_time_horizon_s
               for ts in kept.relayed_times.values() for t in ts)
    # the liar did move our fetch around (unless it fell due at once)...
    assert len(plans) >= 2 or plans[0] < start + 3 * ROUND
    # ...but only within the window: never before the moment it was planned at, never later
    # than the interval the caller allowed, whatever was claimed
    assert all(start <= p <= latest for p in plans)
    # once made, the fetch is our phase: the plan no longer moves
    node.fetch_made(net.now, FEED)
    node.receive(net.now, liar.address, UpdateSubset(fetch_times={FEED: net.now + 5.0}))
    assert node.replan_fetch(net.now, FEED) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-3 * T, 3 * T), max_size=40), st.floats(0, 10 * T),
       st.floats(0, 2 * T), st.floats(-T, 2 * T), st.integers(0, 10**6))
def test_chosen_and_moved_times_stay_in_the_window(known, now, width, planned, seed):
    rng = random.Random(seed)
    latest = now + width
    at, _ = best_in_window(now, latest, T, known, rng)
    assert now <= at <= now + min(width, T) + 1e-6
    moved = better_in_window(now + planned, now, latest, T, known, rng, chance=rng.random())
    assert moved is None or now <= moved <= now + min(width, T) + 1e-6


def test_idle_neighbours_keep_each_other_past_dead_after():
    net = Net(FeedExSettings(dead_after_s=900.0))
    a = net.add(1, ["http://pub.test/a"])
    b = net.add(2, ["http://pub.test/b"])
    net.connect(a, b)
    net.run(5 * 900.0)  # nothing to say: only keep-alives, and their answers
    assert b.address in a.neighbours and a.address in b.neighbours
    probes = [m for m in net.calls(UpdateSubset) if m.probe]
    answers = [m for m in net.calls(UpdateSubset) if not (m.probe or m.added or m.removed)]
    assert probes and len(answers) >= len(probes) - 1  # each probe answered, never a probe back


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.floats(-2 * T, 2 * T)), max_size=40),
       st.floats(0, 10 * T), st.floats(0, 2 * T), st.floats(0, T))
def test_the_ranked_slot_stays_in_the_window(plans, now, width, late):
    start = now + min(late, width)
    latest = now + min(width, T)
    start = min(start, latest)
    known = [((f"127.0.0.{i}", 9000), now + at) for i, at in plans]
    at = slot_in_window(now, start, latest, T, FEED, ("127.0.0.99", 9000), known)
    assert start - 1e-6 <= at <= latest + 1e-6


def test_waiting_fetches_fill_the_gap_after_the_made_ones_evenly():
    assert rank_slots(T, 4) == [T / 8, 3 * T / 8, 5 * T / 8, 7 * T / 8]
    # two made a quarter interval apart, the last at 0: five waiting go where eight would be
    # evenly spaced, in the gap ahead
    slots = future_slots([-T / 4, 0.0], 5, T, T / 2)
    assert [round(s / (T / 8), 6) for s in sorted(slots)] == [1, 2, 3, 4, 5]
    # a sixth: the gap between the made fetches' next occurrences begins after the latest time
    # it may have (T / 2), so the gap ahead takes it too, evenly...
    slots = future_slots([-T / 4, 0.0], 6, T, T / 2)
    assert [round(s / (3 * T / 28), 6) for s in sorted(slots)] == [1, 2, 3, 4, 5, 6]
    # ...unless its window reaches that gap
    slots = future_slots([-T / 4, 0.0], 6, T, T)
    assert [round(s / (T / 8), 6) for s in sorted(slots)] == [1, 2, 3, 4, 5, 7]
