"""benchmarks/cobra_scale.py's workload, small (issue 34): a few thousand farm feeds posting
Cobra's 48.5 articles a second, 100k Cobra-shaped subscriptions, one crawl interval measured
after the first two cycles, through the benchmark's own code paths (the farm, ``feedmesh
serve`` or ``feedmesh up`` with the processes model's plan, the ttl poller, the offline
re-match)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import cobra_scale

from feedmesh.store.pg_server import find_bindir

FEEDS, SUBS, INTERVAL = 2_000, 100_000, 10.0


def check(run: dict) -> None:
    keyed = cobra_scale.keyed(run)
    prefix = f"1m10m_{run['mode']}_"
    for key in cobra_scale.KEYS:
        assert keyed[prefix + key] is not None, key
    assert run["latency_samples"] > 50  # entries crawled in the window reached the reflector
    assert 0 < run["p50_ms"] <= run["p99_ms"] < 60_000
    assert len(run["cdf_ms"]) == 101
    # the two legs split the whole: each item was matched after it was first seen, stored after
    legs = run["legs"]
    assert 0 <= legs["match_p50_ms"] <= legs["match_p99_ms"] < 60_000
    assert 0 <= legs["store_p50_ms"] <= legs["store_p99_ms"] < 60_000
    assert run["rematch_pairs"] > 0  # the re-match found something to check...
    assert run["dropped"] == 0  # ...and the reflectors hold every pair they should
    assert run["fetches_per_s"] >= 0.5 * FEEDS / INTERVAL
    # the window opened as a cycle began and held it: one paced over 0.8 of the interval
    assert 0.7 * INTERVAL <= run["cycle_s"] <= 2 * INTERVAL
    assert run["articles_per_s"] > 0
    assert run["rss_gb"] > 0 and run["rss_peak_gb"]
    busy = "hub" if run["mode"] == "embedded" else "crawler-0/1"
    assert run["cpu_cores"][busy] > 0 and run["cpu_cores"]["farm"] > 0  # who used the cores
    assert run["cpu_cores_total"] >= run["cpu_cores"][busy]
    assert run["farm_renders_per_s"] > 0  # the new posts rendered (and counted)
    assert run["feed_200_per_s"] > 0  # the poller's reads at the (compressed) ttl...
    assert run["feed_failed_per_s"] == 0  # ...each answered 200 or 304


def test_farm_speed_gives_the_asked_rate() -> None:
    # the farm's mean posting rate (farm/posting.py's power law, 1/90 to 100 posts a day)
    assert math.isclose(cobra_scale.mean_posts_per_day(), 4.8248, rel_tol=1e-3)
    speed = cobra_scale.farm_speed(1_000_000, 48.5)
    assert math.isclose(1_000_000 * cobra_scale.mean_posts_per_day() / 86400 * speed, 48.5)


def test_a_pair_is_dropped_unless_held_or_pushed_out_by_newer_ones() -> None:
    held = {1: [9, 8, 7], 2: list(range(20, 10, -1))}  # 2 holds its keep (10) newest
    assert cobra_scale.dropped_pairs([(1, 8), (1, 9)], held, 10) == 0
    assert cobra_scale.dropped_pairs([(1, 5)], held, 10) == 1  # room left: 5 was lost
    assert cobra_scale.dropped_pairs([(2, 5)], held, 10) == 0  # pushed out by 10 newer
    assert cobra_scale.dropped_pairs([(2, 15)], {2: [20, 19, 18, 17, 16, 14, 13, 12, 11, 10]},
                                     10) == 1  # newer than the oldest held: lost
    assert cobra_scale.dropped_pairs([(3, 1)], held, 10) == 1  # a subscription holding nothing


def test_embedded_small() -> None:
    check(cobra_scale.run_embedded("1m10m", FEEDS, SUBS, 48.5, INTERVAL, 1, 30, 300, 300))


def test_up_small() -> None:
    try:
        find_bindir()
    except Exception as error:  # noqa: BLE001 (whatever says there is no server here)
        pytest.skip(f"no PostgreSQL: {error}")
    check(cobra_scale.run_up("1m10m", FEEDS, SUBS, 48.5, INTERVAL, 1, 30, 300, 300))
