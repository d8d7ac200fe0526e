"""The inputs (targets, node limits) and the topology the planner grows.

A topology is three lists of services. Each service holds a *share*: a crawler a range of feed
ids, a reflector a range of subscription ids, a filter both (the feeds whose articles it receives
and the subscriptions it matches them against). Links follow from the shares: a crawler sends to
every filter whose feed range overlaps its own, a filter to every reflector whose subscriptions
overlap its own. So a link carries a share of a stream, and decomposing a service is splitting one
of its two ranges (see :mod:`.decomposition`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .errors import TargetsError

__all__ = ["RESOURCES", "TIERS", "Link", "NodeLimits", "Service", "Share", "Targets", "Topology"]

TIERS = ("crawler", "filter", "reflector")
RESOURCES = ("in_bandwidth", "out_bandwidth", "cpu", "memory")


@dataclass(frozen=True)
class Targets:
    feeds: int
    subscriptions: int

    def __post_init__(self) -> None:
        if self.feeds < 1:
            raise TargetsError(f"--feeds must be >= 1, got {self.feeds}")
        if self.subscriptions < 1:
            raise TargetsError(f"--subs must be >= 1, got {self.subscriptions}")


@dataclass(frozen=True)
class NodeLimits:
    """One node's limits: each service runs on its own node (Cobra 3.5's conservative model)."""

    bandwidth_bps: float  # bytes per second, inbound and outbound each
    memory_bytes: float
    cpu: float = 1.0  # relative to the model's machine (one of its cores)
    overprovision: float = 0.0  # a load fits when load * (1 + overprovision) <= limit

    def __post_init__(self) -> None:
        for name, value in (("--bandwidth-mbps", self.bandwidth_bps),
                            ("--memory-mb", self.memory_bytes), ("--cpu", self.cpu)):
            if not value > 0:
                raise TargetsError(f"{name} must be > 0, got {value}")
        if not 0 <= self.overprovision < 10:
            raise TargetsError(f"--overprovision must be in [0, 10), got {self.overprovision}")

    @classmethod
    def from_units(cls, *, bandwidth_mbps: float, memory_mb: float, cpu: float = 1.0,
                   overprovision: float = 0.0) -> NodeLimits:
        return cls(bandwidth_mbps * 1e6 / 8, memory_mb * 2**20, cpu, overprovision)

    def limit(self, resource: str) -> float:
        if resource == "memory":
            return self.memory_bytes
        if resource == "cpu":
            return self.cpu  # core-seconds per second of the model's machine
        return self.bandwidth_bps


@dataclass(frozen=True)
class Share:
    """Half-open id range [start, stop)."""

    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start

    def overlap(self, other: Share) -> int:
        return max(0, min(self.stop, other.stop) - max(self.start, other.start))

    def split(self, parts: int) -> list[Share]:
        """``parts`` contiguous ranges whose sizes differ by at most one."""
        bounds = [self.start + (self.size * i) // parts for i in range(parts + 1)]
        return [Share(a, b) for a, b in itertools.pairwise(bounds)]

    def __str__(self) -> str:
        return f"{self.start}:{self.stop}"


@dataclass(frozen=True)
class Service:
    tier: str
    name: str
    feeds: Share | None = None  # crawler, filter
    subscriptions: Share | None = None  # filter, reflector


@dataclass(frozen=True)
class Link:
    source: str
    target: str
    feeds: int  # feeds whose articles travel on it
    subscriptions: int  # subscriptions of the target it serves (filter -> reflector)


@dataclass(frozen=True)
class Topology:
    crawlers: tuple[Service, ...]
    filters: tuple[Service, ...]
    reflectors: tuple[Service, ...]
    _counters: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def initial(cls, targets: Targets) -> Topology:
        """Cobra's start: one crawler, one filter, one reflector."""
        feeds, subs = Share(0, targets.feeds), Share(0, targets.subscriptions)
        return cls((Service("crawler", "crawler-0", feeds=feeds),),
                   (Service("filter", "filter-0", feeds=feeds, subscriptions=subs),),
                   (Service("reflector", "reflector-0", subscriptions=subs),),
                   {"crawler": 1, "filter": 1, "reflector": 1})

    def tier(self, tier: str) -> tuple[Service, ...]:
        tiers = {"crawler": self.crawlers, "filter": self.filters, "reflector": self.reflectors}
        return tiers[tier]

    @property
    def services(self) -> tuple[Service, ...]:
        return self.crawlers + self.filters + self.reflectors

    def service(self, name: str) -> Service:
        for service in self.services:
            if service.name == name:
                return service
        raise KeyError(name)

    def replace_service(self, name: str, replicas: list[Service]) -> Topology:
        """This topology with service ``name`` replaced by ``replicas`` (in its place)."""
        old = self.service(name)
        tiers = {t: list(self.tier(t)) for t in TIERS}
        at = tiers[old.tier].index(old)
        tiers[old.tier][at:at + 1] = replicas
        counters = dict(self._counters)
        counters[old.tier] = counters.get(old.tier, 0) + len(replicas)
        return Topology(tuple(tiers["crawler"]), tuple(tiers["filter"]),
                        tuple(tiers["reflector"]), counters)

    def next_names(self, tier: str, count: int) -> list[str]:
        """Names never used before in this topology's history (replicas get new names)."""
        start = self._counters.get(tier, len(self.tier(tier)))
        return [f"{tier}-{i}" for i in range(start, start + count)]

    def links(self) -> list[Link]:
        links = []
        for crawler in self.crawlers:
            for flt in self.filters:
                shared = crawler.feeds.overlap(flt.feeds)  # type: ignore[union-attr]
                if shared:
                    links.append(Link(crawler.name, flt.name, shared, 0))
        for flt in self.filters:
            for reflector in self.reflectors:
                shared = flt.subscriptions.overlap(reflector.subscriptions)  # type: ignore[union-attr]
                if shared:
                    links.append(Link(flt.name, reflector.name, flt.feeds.size, shared))  # type: ignore[union-attr]
        return links
