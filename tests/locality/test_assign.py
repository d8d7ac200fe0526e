"""The three mappings and reassignment, on tables and on random instances."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedmesh.locality import (
    FeedLoad,
    LatencyMatrix,
    LocalityError,
    balanced,
    cost_matrix,
    first_fit,
    random_assignment,
    reassign,
    work,
)

from .helpers import geography, skewed_loads


def _makespan(assignment, loads, crawlers, latency) -> float:
    return max(work(assignment, loads, crawlers, latency).values())


def test_first_fit_gives_each_crawler_its_nearest_feeds_in_equal_numbers():
    # Two crawlers in na, one in eu; 6 na feeds and 3 eu feeds: each crawler stays home.
    crawlers, latency = geography([0, 0, 1], [0, 1, 0])
    loads = [FeedLoad(f"f{i}", f"g{i % 3}") for i in range(9)]
    mapping = first_fit(loads, crawlers, latency)
    assert Counter(mapping.values()) == {"c0": 3, "c1": 3, "c2": 3}
    assert {f for f, c in mapping.items() if c == "c2"} == {"f1", "f4", "f7"}  # the eu host


def test_first_fit_counts_ignore_cost_where_ours_weighs_it():
    # One region, two crawlers, feeds listed heavy (ten polls a cycle), light, heavy, light...
    crawlers, latency = geography([0, 0], [0])
    loads = [FeedLoad(f"heavy{i // 2}", "g0", 10.0) if i % 2 == 0 else
             FeedLoad(f"light{i // 2}", "g0", 1.0) for i in range(8)]
    cobra = first_fit(loads, crawlers, latency)
    ours = balanced(loads, crawlers, latency)
    # Crawlers take turns, so one gets every heavy feed: equal counts, unequal work.
    assert {f for f, c in cobra.items() if c == "c0"} == {f"heavy{i}" for i in range(4)}
    assert _makespan(cobra, loads, crawlers, latency) == pytest.approx(4 * 10 * 0.032)
    assert sorted(work(ours, loads, crawlers, latency).values()) == pytest.approx(
        [2 * 0.32 + 2 * 0.032] * 2)


def test_ours_keeps_every_feed_home_when_the_regions_are_alike():
    alike = [[30.0, 90.0, 160.0], [90.0, 30.0, 250.0], [160.0, 250.0, 30.0]]
    crawlers, latency = geography([0, 1, 2], [0, 1, 2, 0, 1, 2], rtt_ms=alike)
    loads = [FeedLoad(f"f{i}", f"g{i % 6}", 2.0, 5000) for i in range(60)]
    mapping = balanced(loads, crawlers, latency)
    assert all(mapping[load.feed] == f"c{int(load.group[1:]) % 3}" for load in loads)


def test_ours_cuts_the_makespan_of_cobras_mapping_when_posting_rates_are_skewed():
    rng = np.random.default_rng(3)
    group_regions = rng.choice(3, size=60, p=[0.5, 0.3, 0.2]).tolist()
    crawlers, latency = geography([0] * 4 + [1] * 4 + [2] * 3, group_regions,
                                  access_ms=rng.uniform(0, 10, 60).tolist())
    loads = skewed_loads(2000, 60, seed=3)
    cobra = _makespan(first_fit(loads, crawlers, latency), loads, crawlers, latency)
    ours = _makespan(balanced(loads, crawlers, latency), loads, crawlers, latency)
    at_random = _makespan(random_assignment([x.feed for x in loads], crawlers, 1), loads,
                          crawlers, latency)
    assert ours <= 0.85 * cobra < at_random


instances = st.builds(
    lambda crawler_regions, group_regions, fetches, sizes: (crawler_regions, group_regions,
                                                            fetches, sizes),
    st.lists(st.integers(0, 2), min_size=1, max_size=6),
    st.lists(st.integers(0, 2), min_size=1, max_size=8),
    st.lists(st.floats(1.0, 10.0), min_size=1, max_size=80),
    st.lists(st.integers(0, 200_000), min_size=80, max_size=80),
)


def _instance(drawn):
    crawler_regions, group_regions, fetches, sizes = drawn
    crawlers, latency = geography(crawler_regions, group_regions)
    loads = [FeedLoad(f"f{i}", f"g{i % len(group_regions)}", n, sizes[i])
             for i, n in enumerate(fetches)]
    return crawlers, latency, loads


@settings(max_examples=60, deadline=None)
@given(instances)
def test_first_fit_counts_differ_by_at_most_one(drawn):
    crawlers, latency, loads = _instance(drawn)
    mapping = first_fit(loads, crawlers, latency)
    assert set(mapping) == {load.feed for load in loads}
    counts = Counter(mapping.values())
    sizes = [counts.get(c, 0) for c in crawlers]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=60, deadline=None)
@given(instances)
def test_ours_leaves_no_single_move_that_would_shorten_the_cycle(drawn):
    crawlers, latency, loads = _instance(drawn)
    mapping = balanced(loads, crawlers, latency)
    assert set(mapping) == {load.feed for load in loads} and set(mapping.values()) <= set(crawlers)
    busy = work(mapping, loads, crawlers, latency)
    cost = cost_matrix(loads, crawlers, latency)
    busiest = max(busy, key=busy.get)
    for i, load in enumerate(loads):
        if mapping[load.feed] != busiest:
            continue
        for c, crawler in enumerate(crawlers):
            if crawler != busiest:
                # Moving it anywhere leaves one of the two at least as busy as the busiest now.
                assert busy[crawler] + cost[i, c] >= busy[busiest] * (1 - 1e-6)


def _regional(seed: int):
    rng = np.random.default_rng(seed)
    group_regions = rng.choice(3, size=40, p=[0.5, 0.3, 0.2]).tolist()
    crawlers, latency = geography([0, 0, 0, 1, 1, 1, 2, 2], group_regions,
                                  access_ms=rng.uniform(0, 10, 40).tolist())
    return crawlers, latency, skewed_loads(1500, 40, seed)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_removing_a_crawler_moves_little_more_than_its_own_feeds(seed):
    crawlers, latency, loads = _regional(seed)
    before = balanced(loads, crawlers, latency)
    gone = crawlers[4]
    remaining = [c for c in crawlers if c != gone]
    after = reassign(before, loads, remaining, latency)
    orphans = sum(1 for c in before.values() if c == gone)
    moved = sum(1 for f in before if before[f] != after[f])
    assert orphans <= moved <= 1.25 * orphans
    busy = work(after, loads, remaining, latency)
    mean = sum(busy.values()) / len(busy)
    assert max(busy.values()) <= 1.05 * mean
    # Kept feeds stay where they were (feeds spilled far before stay spilled), so some of the
    # best cycle is given up for few moves: 11% on these instances; a fresh mapping moves more.
    scratch = balanced(loads, remaining, latency)
    assert max(busy.values()) <= 1.15 * _makespan(scratch, loads, remaining, latency)
    assert moved < 0.5 * sum(1 for f in before if before[f] != scratch[f])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_adding_a_crawler_moves_about_the_fewest_near_feeds_that_fill_its_share(seed):
    crawlers, latency, loads = _regional(seed)
    before = balanced(loads, crawlers, latency)
    rows = {c: {g: latency.rtt_s(c, g) * 1000 for g in latency.groups} for c in crawlers}
    rows["new"] = dict(rows["c3"])  # a second... fourth crawler in eu
    grown = [*crawlers, "new"]
    latency = LatencyMatrix.from_mapping(rows)
    after = reassign(before, loads, grown, latency)
    moved = [f for f in before if before[f] != after[f]]
    assert all(after[f] == "new" for f in moved)  # feeds move only to the newcomer
    busy = work(after, loads, grown, latency)
    share = sum(busy.values()) / len(grown)
    assert busy["new"] >= 0.95 * share and max(busy.values()) <= 1.05 * share
    # The fewest feeds that could bring the newcomer its work: of any feeds (a lower bound), and
    # of feeds no farther from it than from their crawler now (a mapping that keeps locality and
    # each donor near its own share cannot always do with fewer, hence the factor).
    cost = cost_matrix(loads, grown, latency)
    column = {c: k for k, c in enumerate(grown)}
    now = np.array([cost[i, column[before[x.feed]]] for i, x in enumerate(loads)])

    def fewest(costs):
        return int(np.searchsorted(np.cumsum(np.sort(costs)[::-1]), busy["new"])) + 1

    assert fewest(cost[:, -1]) <= len(moved) <= 1.6 * fewest(cost[cost[:, -1] <= now, -1])
    scratch = balanced(loads, grown, latency)
    assert len(moved) < 0.25 * sum(1 for f in before if before[f] != scratch[f])


def test_bad_requests_say_what_is_wrong():
    crawlers, latency = geography([0], [0])
    with pytest.raises(LocalityError, match="no crawlers"):
        balanced([FeedLoad("f", "g0")], [], latency)
    with pytest.raises(LocalityError, match="no row for crawler"):
        first_fit([FeedLoad("f", "g0")], ["elsewhere"], latency)
    with pytest.raises(LocalityError, match="no column for host group"):
        balanced([FeedLoad("f", "nowhere")], crawlers, latency)
    with pytest.raises(LocalityError, match="listed twice"):
        balanced([FeedLoad("f", "g0"), FeedLoad("f", "g0")], crawlers, latency)
    with pytest.raises(LocalityError, match="fetches_per_cycle > 0"):
        balanced([FeedLoad("f", "g0", 0.0)], crawlers, latency)


def test_random_assignment_deals_equal_counts_reproducibly():
    feeds = [f"f{i}" for i in range(10)]
    first = random_assignment(feeds, ["a", "b", "c"], seed=5)
    assert first == random_assignment(list(reversed(feeds)), ["a", "b", "c"], seed=5)
    assert sorted(Counter(first.values()).values()) == [3, 3, 4]
