"""The simulator on small networks: the exchange beats stand-alone, free riders lose what they
take without giving, and spreading fetch phases shortens the lag."""

from __future__ import annotations

from dataclasses import replace

import pytest

from feedmesh.mesh.feedex import FeedExSettings
from feedmesh.mesh.feedex.sim import SimConfig, _publishers, simulate

SMALL = SimConfig(nodes=40, hours=8.0, interval_s=6 * 3600.0, churn=0.15, seed=3)
# D is credit a free rider gets before it is cut: scaled down to an 8-hour run
CHECKED = FeedExSettings(max_deficit=3.0)


@pytest.fixture(scope="module")
def with_free_riders():
    return simulate(replace(SMALL, free_riders=0.15, settings=CHECKED))


def test_exchange_beats_stand_alone_on_the_same_nodes_and_fetches(with_free_riders):
    r = with_free_riders
    assert r.surviving_nodes == 40 - round(0.15 * 40)
    assert r.xch.coverage > r.sln.coverage + 0.3
    assert r.xch.lag_min < r.sln.lag_min / 3
    assert r.xch.lag_p95_min < r.sln.lag_p5_min
    # the same fetches serve both modes: 20 feeds per node, every 6 h, over 8 h
    per_node_day = r.publisher_requests_per_feed_day * SMALL.feeds / SMALL.nodes
    assert 20 * 24 / 6 * 0.8 < per_node_day < 20 * 24 / 6 * 1.3
    assert 0 < r.put_per_node_min < r.check_per_node_min
    assert r.bytes_per_node_min > 0
    # every node's fetches judge a sample of what its neighbours sent: all honest here, so
    # entries are confirmed and none is called fake
    assert r.entries_confirmed > 100 and r.entries_judged_fake == 0


def test_free_riders_fall_towards_stand_alone_while_cooperators_keep_theirs(with_free_riders):
    r = with_free_riders
    alone = simulate(replace(SMALL, free_riders=0.15,
                             settings=FeedExSettings(max_deficit=1e12)))
    assert alone.free_rider.coverage > alone.xch.coverage - 0.05  # unchecked, riding pays
    assert r.free_rider is not None
    assert r.xch.coverage > alone.xch.coverage - 0.03  # cooperators keep their coverage
    gap = r.xch.coverage - r.sln.coverage
    assert r.free_rider.coverage < r.sln.coverage + gap / 2  # riders lose most of the gain


def test_spreading_fetch_phases_shortens_the_lag():
    base = replace(SMALL, churn=0.0, nodes=64)  # 64: enough followers per feed to spread
    plain = simulate(base)
    spread = simulate(replace(base, spread_fetches=True,
                              settings=FeedExSettings(share_fetch_times=True)))
    # 0.9 and -0.01 when a full node swapped neighbours for newcomers stating more shared feeds
    # (the paper's 3.2): neighbourhoods clustered by interest, so more followers of a feed knew
    # each other's plans. Newcomers now displace only by confirmed entries (issue 32, item 5),
    # which take a fetch to come: lag ratio 0.944 and coverage -1.0 point here (seed 3; seed 2
    # gives 0.934 and +2.8 points; before the change 0.843 / +0.6 and 0.875 / +3.8). Plans
    # bounded to their window and moved with chance 0.2 when crowded (issue 32, last item):
    # 0.961 / -1.0 (seed 3) and 0.881 / +3.7 (seed 2), requests 0.998 and 0.999 of plain
    assert spread.xch.lag_min < 0.97 * plain.xch.lag_min
    assert spread.xch.coverage >= plain.xch.coverage - 0.02
    assert spread.publisher_requests_per_feed_day <= plain.publisher_requests_per_feed_day * 1.02


def test_an_oracle_that_spaces_first_fetches_evenly_bounds_what_spreading_can_do():
    base = replace(SMALL, churn=0.0)
    random_phases = simulate(base)
    even = simulate(replace(base, phase_oracle="even"))
    assert even.reachable_coverage > random_phases.reachable_coverage + 0.02
    assert even.xch.lag_min < random_phases.xch.lag_min * 0.8
    requests = even.publisher_requests_per_feed_day / random_phases.publisher_requests_per_feed_day
    assert 0.95 < requests < 1.05  # the same number of fetches, only placed differently
    with pytest.raises(ValueError, match="phase_oracle"):
        simulate(replace(base, nodes=4, phase_oracle="later"))


def test_the_departure_oracle_reaches_the_nodes_and_adds_no_fetch():
    """Every node forgets a departed node's plans at once: the not-yet-made plans re-plan
    without them, so the run differs, and no fetch is added (only the phases move)."""
    base = replace(SMALL, churn=0.3, nodes=48, spread_fetches=True,
                   settings=FeedExSettings(share_fetch_times=True))
    kept = simulate(base)
    forgot = simulate(replace(base, departure_oracle=True))
    # re-plans moved (and were advertised) differently: the oracle reached the nodes
    assert (forgot.xch.lag_min, forgot.bytes_per_node_min) != (kept.xch.lag_min,
                                                               kept.bytes_per_node_min)
    assert forgot.reachable_coverage > kept.reachable_coverage - 0.01
    requests = forgot.publisher_requests_per_feed_day / kept.publisher_requests_per_feed_day
    assert 0.97 < requests < 1.03


def test_the_farm_seed_holds_the_publishers_while_the_seed_draws_the_rest():
    """``farm_seed`` fixes which feeds and posts there are; ``seed`` alone draws the nodes."""
    base = SimConfig(feeds=8, nodes=4, hours=1.0, seed=1)
    same_feeds = [(f.url, f.times) for f in _publishers(replace(base, seed=2, farm_seed=1))]
    assert same_feeds == [(f.url, f.times) for f in _publishers(base)]
    other = [(f.url, f.times) for f in _publishers(replace(base, seed=2))]
    assert other != same_feeds
