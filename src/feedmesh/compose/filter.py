"""The filter role: one filter shard (:class:`~feedmesh.hub.tiers.filter.FilterTier`, Cobra
section 3.2), in the embedded hub or in a process of its own (``feedmesh filter``).

It joins its group of ``control`` before it reads the subscriptions, so that no change made
meanwhile is missed; then it builds its index (from its snapshot plus the changes since, else
from the stored queries, writing a snapshot) and joins ``articles``. Several processes given the
same shard are replicas of it: members of one group, they share the article stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import numpy as np

from feedmesh.bus import Bus
from feedmesh.clock import Clock, SystemClock
from feedmesh.compose.engines import existing_hub_state, open_bus
from feedmesh.compose.lifecycle import HttpPart, Tasks, cancel, ended
from feedmesh.compose.settings import FilterSettings
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.tiers.filter import FilterTier
from feedmesh.model import Entry
from feedmesh.store import HubState

__all__ = ["FilterRole", "filter_process", "filter_tier", "snapshot_path"]


def snapshot_path(data_dir: Path, shard: int, shards: int) -> Path:
    return data_dir / f"filter-{shard}-of-{shards}.index"


class FilterRole:
    """One filter shard. ``columns``: the subscriptions as the embedded hub reads them once for
    every tier (else read here); ``save_on_stop``: write the index snapshot when stopping (the
    embedded hub, whose crawler has drained every change into it by then)."""

    def __init__(self, tier: FilterTier, *, state: HubState, data_dir: Path,
                 open_state: Callable[[], HubState], metrics: HubMetrics,
                 columns: Callable[[], dict[str, np.ndarray]] | None = None,
                 save_on_stop: bool = False, own_bus: bool = False,
                 count_subscriptions: bool = False) -> None:
        self.tier = tier
        self.name = f"filter {tier.shard}/{tier.shards}"
        self.ready = asyncio.Event()
        self.metrics = metrics
        self._state = state
        self._data = data_dir
        self._open_state = open_state
        self._columns = columns
        self._save_on_stop = save_on_stop
        self._count = count_subscriptions
        self._own_bus = own_bus
        self._loops: list[asyncio.Task] = []
        self.held = 0

    @property
    def registry(self):  # type: ignore[no-untyped-def]
        return self.metrics.registry

    def http(self) -> HttpPart:
        return HttpPart()

    async def start(self, tasks: Tasks) -> None:
        tier = self.tier
        await tier.join_control()  # before reading: no change falls between
        columns = await asyncio.to_thread(self._columns or self._state.subscription_columns)
        self.held = await asyncio.to_thread(tier.load, self._state, columns, self._data,
                                            self._open_state)
        del columns
        # The matcher's compiled kernels load on first use: before the first article, not on it.
        await asyncio.to_thread(tier.index.match_entry,
                                Entry(key="warm-up", title="warm up the matcher"), "", "")
        if self._count:
            self.metrics.subscriptions.set(self.held)
        name = f"filter-{tier.shard}"
        self._loops = [tasks.spawn(f"{name}.control", tier.run_control),
                       tasks.spawn(name, tier.run)]
        await tier.stream_joined.wait()
        self.ready.set()

    async def stop(self) -> None:
        """The loops end (what they held unacknowledged goes to another member of the group,
        or to this shard's next start); the embedded hub's snapshot is written. ``own_bus``
        (a process of its own): closing the bus ends the loops."""
        if self._own_bus:
            await self.tier.bus.close()
            await ended(self._loops)
        else:
            await cancel(self._loops)
        if self._save_on_stop:
            seq = self._state.change_seq()  # every change up to here reached the filters
            self.tier.save(snapshot_path(self._data, self.tier.shard, self.tier.shards), seq)


def filter_tier(shard: int, shards: int, bus: Bus, clock: Clock, metrics: HubMetrics,
                delivery: str) -> FilterTier:
    """The one place a filter tier is made."""
    return FilterTier(shard, shards, bus, clock, metrics, delivery=delivery)


def filter_process(settings: FilterSettings) -> tuple[FilterRole, list[Callable]]:
    """``feedmesh filter``: the role, and what its process closes after it (the bus, the
    hub's state)."""
    data = Path(settings.data_dir)
    data.mkdir(mode=0o700, parents=True, exist_ok=True)
    state, reopen = existing_hub_state(settings.state)
    metrics = HubMetrics()
    bus = open_bus(settings.bus.url, namespace=settings.bus.namespace,
                   credentials=settings.bus.credentials)
    metrics.watch_queues(bus.depths)
    tier = filter_tier(*settings.shard, bus, SystemClock(), metrics, settings.delivery)
    role = FilterRole(tier, state=state, data_dir=data, open_state=reopen, metrics=metrics,
                      count_subscriptions=True, own_bus=True)
    return role, [bus.close, state.close]

