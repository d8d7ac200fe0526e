"""Instances for the assignment tests: regions of crawlers and hosts, as the farm emulates them."""

from __future__ import annotations

import numpy as np

from feedmesh.locality import FeedLoad, LatencyMatrix

WAN3_MS = [[30.0, 90.0, 160.0], [90.0, 20.0, 250.0], [160.0, 250.0, 40.0]]


def geography(crawler_regions: list[int], group_regions: list[int],
              rtt_ms=WAN3_MS, access_ms=None) -> tuple[list[str], LatencyMatrix]:
    crawlers = [f"c{i}" for i in range(len(crawler_regions))]
    access = access_ms if access_ms is not None else [0.0] * len(group_regions)
    matrix = {crawler: {f"g{g}": rtt_ms[region][group_regions[g]] + access[g]
                        for g in range(len(group_regions))}
              for crawler, region in zip(crawlers, crawler_regions, strict=True)}
    return crawlers, LatencyMatrix.from_mapping(matrix)


def skewed_loads(feeds: int, groups: int, seed: int) -> list[FeedLoad]:
    """Posting rates and sizes with heavy tails: a few feeds cost many times the median."""
    rng = np.random.default_rng(seed)
    fetches = np.minimum(12.0, np.maximum(1.0, rng.pareto(1.2, feeds)))
    sizes = rng.lognormal(9.0, 1.2, feeds).astype(int)
    return [FeedLoad(f"f{i}", f"g{i % groups}", float(fetches[i]), int(sizes[i]))
            for i in range(feeds)]
