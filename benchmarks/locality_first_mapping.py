"""The first mapping of `feedmesh up --by-locality`: from scratch (``balanced``) or reassigned
from where the crawlers' provisional rule put the feeds (``reassign``), on a sketch of
tests/commands/test_up.py's farm.

Twelve feeds on three servers (North America, Europe, Asia; four each), two crawlers (one in
Asia, one in Europe) with the farm geography's round trips (:data:`feedmesh.farm.geography.
WAN3_RTT_MS`), every feed on the Asian crawler first (the provisional rule gives the first
crawler everything), one poll per cycle each, and each feed's size drawn at random (5-60 KB,
what the store may hold of it when the mapping runs: it decides the round trips a fetch costs).
Counted: the draws in which every European feed ends with the European crawler and every Asian
one with the Asian crawler.

    .venv/bin/python benchmarks/locality_first_mapping.py [--draws 3000] [--seed 1]

Last line: JSON with ``all_near_share_fresh``, ``all_near_share_reassigned`` and the counts of
far feeds per draw. Pure computation, a few seconds.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter

import numpy as np

from feedmesh.farm.geography import WAN3_RTT_MS
from feedmesh.locality.assign import balanced, reassign
from feedmesh.locality.cost import FeedLoad
from feedmesh.locality.latency import LatencyMatrix

REGIONS = ("na", "eu", "asia")
CRAWLERS = ("asia-crawler", "eu-crawler")
NEAR = {"eu": "eu-crawler", "asia": "asia-crawler"}
SIZES = (5_000, 20_000, 30_000, 50_000, 60_000)


def far_feeds(mapping: dict[str, str], loads: list[FeedLoad]) -> int:
    return sum(1 for load in loads if load.group in NEAR and mapping[load.feed] != NEAR[load.group])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rtt = np.array([[WAN3_RTT_MS[2][j] / 1000 for j in range(3)],     # a client in Asia
                    [WAN3_RTT_MS[1][j] / 1000 for j in range(3)]])    # a client in Europe
    latency = LatencyMatrix(CRAWLERS, REGIONS, rtt)
    rng = random.Random(args.seed)
    far = {"fresh": Counter(), "reassigned": Counter()}
    for _ in range(args.draws):
        loads = [FeedLoad(str(i), REGIONS[i % 3], 1.0, rng.choice(SIZES)) for i in range(12)]
        provisional = {load.feed: CRAWLERS[0] for load in loads}
        far["fresh"][far_feeds(balanced(loads, CRAWLERS, latency), loads)] += 1
        far["reassigned"][far_feeds(reassign(provisional, loads, CRAWLERS, latency), loads)] += 1
    figures = {f"all_near_share_{how}": round(counts[0] / args.draws, 3)
               for how, counts in far.items()}
    for how, counts in far.items():
        print(f"{how:>10}: every European and Asian feed near in {counts[0]:,} of {args.draws:,} "
              f"draws; far feeds per draw {dict(sorted(counts.items()))}")
    figures |= {f"far_feeds_{how}": dict(sorted(counts.items())) for how, counts in far.items()}
    figures["draws"] = args.draws
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
