"""Allocation, placement and the oracle bound against brute force and closed forms."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from feedmesh.schedule.allocation import (
    cgm_age_allocation,
    cgm_freshness_allocation,
    round_to_total,
    sqrt_allocation,
)
from feedmesh.schedule.oracle import oracle_mean_delay
from feedmesh.schedule.placement import RateGrid, expected_delay, place_batch


def test_sqrt_allocation_is_proportional_to_sqrt_and_spends_the_budget():
    demand = np.array([1.0, 4.0, 16.0, 0.0])
    m = sqrt_allocation(demand, 7.0)
    assert m.sum() == pytest.approx(7.0)
    assert m[:3] / m[0] == pytest.approx([1.0, 2.0, 4.0], rel=1e-6)
    assert m[3] == 0.0


def test_sqrt_allocation_honours_floors_and_scales_them_when_the_budget_is_short():
    m = sqrt_allocation(np.array([0.0, 0.0, 100.0]), 3.0, floors=0.5)
    assert m.sum() == pytest.approx(3.0) and m.min() == pytest.approx(0.5)
    short = sqrt_allocation(np.array([1.0, 9.0]), 0.5, floors=0.5)
    assert short == pytest.approx([0.25, 0.25])


def test_cgm_freshness_starves_the_fastest_feed_and_age_does_not():
    rates = np.array([0.1, 1.0, 50.0])
    fresh = cgm_freshness_allocation(rates, np.ones(3), 3.0)
    age = cgm_age_allocation(rates, np.ones(3), 3.0)
    assert fresh.sum() == pytest.approx(3.0, rel=1e-3) and age.sum() == pytest.approx(3.0, rel=1e-3)
    assert fresh[2] == 0.0
    assert age.min() > 0 and age[2] > age[1] > age[0]


def test_round_to_total_keeps_the_sum():
    values = np.array([0.4, 1.6, 2.5, 0.5])
    ints = round_to_total(values)
    assert ints.sum() == 5 and (np.abs(ints - values) < 1).all()


def test_expected_delay_matches_numeric_integration():
    rng = np.random.default_rng(0)
    rates = rng.random((2, 24))
    positions = np.sort(rng.random((2, 3)) * 24, axis=1)
    closed = expected_delay(RateGrid(rates, 1.0), positions)
    t = (np.arange(200_000) + 0.5) / 200_000 * 24
    for row in range(2):
        nxt = np.searchsorted(positions[row], t)
        fetch = np.where(nxt < 3, positions[row][np.minimum(nxt, 2)], positions[row][0] + 24)
        numeric = (rates[row][t.astype(int)] * (fetch - t)).sum() * 24 / len(t)
        assert closed[row] == pytest.approx(numeric, rel=1e-4)


def test_theorem_2_single_fetch_after_the_busy_period():
    # the paper's Example 1: rate 1 on [0,1), 0 on [1,2): fetch at t = 1, delay 1/2
    rates = np.array([[1.0] * 12 + [0.0] * 12])
    pos = place_batch(rates, 1.0 / 12, 1)
    assert pos[0, 0] == pytest.approx(1.0)
    assert expected_delay(RateGrid(rates, 1.0 / 12), pos)[0] == pytest.approx(0.5)


def test_theorem_3_two_fetches_match_brute_force():
    bins = 240
    t = (np.arange(bins) + 0.5) / bins
    rates = (2 + 2 * np.sin(2 * np.pi * t))[None, :]
    grid = RateGrid(rates, 1.0 / bins)
    placed = expected_delay(grid, place_batch(rates, 1.0 / bins, 2, sweeps=10))[0]
    best = min(expected_delay(grid, np.sort(np.array([[x, y % 1.0]]), axis=1))[0]
               for x in np.linspace(0, 1, 101) for y in np.linspace(x + 0.01, x + 0.99, 99))
    assert placed <= best + 1e-3
    assert placed < expected_delay(grid, np.array([[0.25, 0.75]]))[0]


def test_placement_respects_the_max_gap():
    rng = np.random.default_rng(1)
    rates = rng.gamma(0.3, 1.0, (50, 168))
    pos = place_batch(rates, 1.0, 4, max_gap=46.0)
    gaps = np.diff(pos, axis=1, append=pos[:, :1] + 168.0)
    assert gaps.max() <= 46.0 + 1e-6


def _brute_oracle(feeds, fetches):
    def best(times, k):
        if k >= len(times):
            return 0.0
        result = np.inf
        for cuts in itertools.combinations(range(len(times) - 1), k - 1):
            ends, start, delay = [*cuts, len(times) - 1], 0, 0.0
            for end in ends:
                delay += sum(times[end] - times[i] for i in range(start, end + 1))
                start = end + 1
            result = min(result, delay)
        return result

    total = sum(len(t) for t in feeds)
    return min(sum(best(t, k) for t, k in zip(feeds, ks, strict=True))
               for ks in itertools.product(*[range(1, len(t) + 1) for t in feeds])
               if sum(ks) <= fetches) / total


@pytest.mark.parametrize("fetches", [4, 6, 9])
def test_oracle_bound_is_exact_on_small_cases(fetches):
    rng = np.random.default_rng(3)
    feeds = [np.sort(rng.random(rng.integers(1, 6)) * 100) for _ in range(4)]
    assert oracle_mean_delay(feeds, fetches) == pytest.approx(_brute_oracle(feeds, fetches),
                                                              rel=1e-9, abs=1e-9)
