"""What a feed costs the crawler that owns it, per crawl cycle: the weights "equal work" divides.

A fetch over a wide-area path costs round trips, not bytes: one for the request and its answer,
plus the extra rounds TCP's slow start needs for a body past its initial window (10 segments,
doubling each round: 14.6 KB in one round, 43.8 KB in two, 102 KB in three). A feed polled ``n``
times a cycle with bodies of ``b`` bytes therefore costs a crawler at round trip ``rtt``::

    n * (rtt * round_trips(b) + overhead_s)

``n`` follows the feed's posting rate (as the monitor estimates it: a scheduler polls a feed about
once per expected post, and at least once a cycle); ``b`` is what its last fetch brought.
``overhead_s`` is the crawler's own time per fetch (parsing, bookkeeping), the same anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
import numpy as np

from feedmesh.locality.errors import LocalityError
from feedmesh.locality.latency import LatencyMatrix

__all__ = ["FeedLoad", "cost_matrix", "fetches_per_cycle", "round_trips"]

SEGMENT_BYTES = 1460
INITIAL_WINDOW_SEGMENTS = 10


class FeedLoad(msgspec.Struct, frozen=True):
    """A feed, the host group it belongs to, and how much fetching it needs per cycle."""

    feed: str
    group: str
    fetches_per_cycle: float = 1.0
    bytes_per_fetch: int = 0


def fetches_per_cycle(rate_per_day: float, cycle_s: float, max_fetches: float) -> float:
    """Polls a cycle for a feed posting ``rate_per_day``: one per expected post, within
    ``[1, max_fetches]``."""
    if cycle_s <= 0 or max_fetches < 1 or rate_per_day < 0:
        raise LocalityError(f"fetches_per_cycle: need cycle_s > 0, max_fetches >= 1 and a rate "
                            f">= 0, got {cycle_s}, {max_fetches}, {rate_per_day}")
    return min(float(max_fetches), max(1.0, rate_per_day * cycle_s / 86400.0))


def round_trips(body_bytes: int) -> int:
    """Round trips to fetch a body on an open connection: the request, plus slow start's."""
    window = INITIAL_WINDOW_SEGMENTS * SEGMENT_BYTES
    if body_bytes <= window:
        return 1
    return math.ceil(math.log2(body_bytes / window + 1))


def cost_matrix(loads: Sequence[FeedLoad], crawlers: Sequence[str], latency: LatencyMatrix,
                overhead_s: float = 0.002) -> np.ndarray:
    """Seconds of fetching per cycle for each feed (rows) if each crawler (columns) owned it."""
    if not crawlers:
        raise LocalityError("no crawlers to assign feeds to")
    groups = sorted({load.group for load in loads})
    column = {g: j for j, g in enumerate(groups)}
    rtt = latency.rows(crawlers, groups).T  # groups x crawlers
    index = np.fromiter((column[load.group] for load in loads), dtype=np.int64, count=len(loads))
    fetches = np.fromiter((load.fetches_per_cycle for load in loads), dtype=float, count=len(loads))
    rounds = np.fromiter((round_trips(load.bytes_per_fetch) for load in loads), dtype=float,
                         count=len(loads))
    if np.any(fetches <= 0):
        raise LocalityError("every feed needs fetches_per_cycle > 0")
    return fetches[:, None] * (rtt[index] * rounds[:, None] + overhead_s)
