"""The posting process: rates, daily rhythm, determinism, and lazy, order-free generation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from feedmesh.farm.posting import PROFILES, PostingProcess, block_seconds

DAY = 86400.0
T0 = 1_700_000_000.0


def test_profiles_are_distinct_daily_shapes_with_mean_one():
    shapes = list(PROFILES.values())
    assert len(shapes) >= 5
    for shape in shapes:
        assert len(shape) == 24 and abs(sum(shape) / 24 - 1) < 1e-9
    peaks = {int(np.argmax(shape)) for shape in shapes}
    assert len(peaks) >= 5  # they peak at different hours


def test_post_count_matches_the_rate():
    process = PostingProcess(3, 1, 20.0, PROFILES["wire"])
    posts = process.posts_between(T0, T0 + 200 * DAY)
    assert abs(len(posts) - 20 * 200) < 4 * (20 * 200) ** 0.5  # Poisson: within 4 sigma


def test_posts_follow_the_daily_profile():
    profile = PROFILES["morning_digest"]
    process = PostingProcess(3, 2, 30.0, profile)
    hours = np.bincount([int(p.time % DAY) // 3600 for p in
                         process.posts_between(T0, T0 + 300 * DAY)], minlength=24)
    expected = np.asarray(profile) / 24 * hours.sum()
    assert int(np.argmax(hours)) == int(np.argmax(profile))
    chi2 = ((hours - expected) ** 2 / expected).sum()
    assert chi2 < 80, (chi2, hours)  # 23 degrees of freedom: a fit, not a coincidence


def test_same_arguments_same_posts_and_different_seeds_differ():
    a = PostingProcess(9, 4, 5.0, PROFILES["eu_office"]).posts_between(T0, T0 + 30 * DAY)
    b = PostingProcess(9, 4, 5.0, PROFILES["eu_office"]).posts_between(T0, T0 + 30 * DAY)
    c = PostingProcess(10, 4, 5.0, PROFILES["eu_office"]).posts_between(T0, T0 + 30 * DAY)
    assert a == b and a != c


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.02, 90.0), cut=st.floats(0.0, 1.0), span=st.floats(0.5, 40.0))
def test_windows_compose_in_any_order(rate, cut, span):
    process = PostingProcess(1, 7, rate, PROFILES["us_newsroom"])
    end = T0 + span * DAY
    middle = T0 + cut * span * DAY
    later = PostingProcess(1, 7, rate, PROFILES["us_newsroom"]).posts_between(middle, end)
    whole = process.posts_between(T0, end)
    assert process.posts_between(T0, middle) + later == whole
    times = [p.time for p in whole]
    assert times == sorted(times) and len({p.key for p in whole}) == len(whole)


def test_last_posts_and_next_post():
    process = PostingProcess(2, 3, 3.0, PROFILES["asia_day"])
    t = T0 + 12.3 * DAY
    last = process.last_posts(t, 10, t - 365 * DAY)
    assert len(last) == 10 and last == sorted(last, reverse=True) and last[0].time <= t
    assert last[::-1] == process.posts_between(last[-1].time - 1, t)
    following = process.next_post_after(t, 30 * DAY)
    assert following > t and not process.posts_between(t, following - 1)
    assert process.posts_between(t, following)[0].time == following


def test_block_size_holds_a_handful_of_posts():
    for rate in (0.011, 0.3, 1.0, 7.0, 100.0):
        expected = rate * block_seconds(rate) / DAY
        assert 2.5 <= expected <= 16 or block_seconds(rate) in (86400 * 1024, 2700)


def test_flood_turns_each_post_into_a_burst():
    process = PostingProcess(1, 1, 2.0, PROFILES["wire"], burst=10_000)
    last = process.last_posts(T0 + 10 * DAY, 10_000, T0 - 30 * DAY)
    assert len(last) == 10_000 and len({p.time for p in last}) == 1
    assert len({p.key for p in last}) == 10_000
