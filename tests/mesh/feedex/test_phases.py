"""Filling the largest gap between known fetch phases (the network as one monitor)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from feedmesh.mesh.feedex.phases import crowded, fill_largest_gap

T = 1000.0


@given(st.lists(st.floats(0, 10 * T), min_size=1, max_size=20), st.floats(0, 10 * T),
       st.integers(0, 1000))
def test_the_choice_lies_in_the_middle_half_of_the_largest_gap(known, now, seed):
    at = fill_largest_gap(now, T, known, random.Random(seed))
    assert now <= at < now + T + 1e-6
    phases = sorted({k % T for k in known})
    gaps = [((phases[(i + 1) % len(phases)] - p) % T or T, p) for i, p in enumerate(phases)]
    largest = max(g for g, _ in gaps)
    offsets = [((at % T) - p) % T for g, p in gaps if g == largest]
    assert any(largest / 4 - 1e-6 <= off <= 3 * largest / 4 + 1e-6 for off in offsets)


def test_no_knowledge_gives_a_random_phase_and_crowding_needs_a_close_neighbour():
    rng = random.Random(3)
    picks = {round(fill_largest_gap(0.0, T, [], rng)) for _ in range(20)}
    assert len(picks) > 10
    assert crowded(100.0, [105.0, 600.0], T)
    assert not crowded(100.0, [400.0, 700.0], T)
    assert crowded(2 * T + 998.0, [3.0], T)  # phases wrap around the interval
    assert not crowded(5.0, [], T)


def test_sequential_gap_filling_spreads_phases_evenly():
    rng = random.Random(4)
    known: list[float] = []
    for _ in range(16):
        known.append(fill_largest_gap(0.0, T, known, rng))
    phases = sorted(k % T for k in known)
    gaps = [(phases[(i + 1) % 16] - p) % T for i, p in enumerate(phases)]
    assert max(gaps) < 3 * T / 16  # random phases: the largest of 16 gaps is ~3.4 T/16 on average
