"""Cobra's greedy provisioner (3.5): grow a topology until no service violates a limit.

Start from one crawler, one filter and one reflector. Each step predicts every service's load,
lists every violation (a load times ``1 + overprovision`` above the node's limit), and resolves
one: the violation with the least potential to be resolved indirectly by the others
(:func:`indirect_potential`), upstream tiers first, then the
worst overload. It is resolved by the decomposition of Figure 3 (:mod:`.decomposition`) into the
fewest replicas whose own load of that resource fits. The plan is done when nothing violates; a
violation that no number of replicas resolves stops the planner with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .decomposition import DECOMPOSITION, LOWERS, decompose, split_size
from .errors import UnresolvableError
from .loads import Load, predict, selectivity
from .model import ResourceModel
from .topology import RESOURCES, TIERS, NodeLimits, Targets, Topology

__all__ = ["Plan", "PlannerSettings", "Step", "Violation", "find_violations",
           "indirect_potential", "plan", "resolve"]

UNITS = {"in_bandwidth": "Mbps", "out_bandwidth": "Mbps", "cpu": "x CPU", "memory": "MB"}


def in_units(resource: str, value: float) -> float:
    if resource in ("in_bandwidth", "out_bandwidth"):
        return value * 8 / 1e6
    if resource == "memory":
        return value / 2**20
    return value


@dataclass(frozen=True)
class PlannerSettings:
    # A subscription share smaller than this is not worth a process: splitting further is how
    # "cannot be resolved" is decided for loads that fall only with selectivity.
    min_subscriptions_per_service: int = 1000
    max_steps: int = 10_000
    max_services: int = 2_000
    """A plan past this many services is refused, not computed: planning time grows with the
    links (every filter to every reflector sharing its users), 1,516 services take a second and
    5,788 over three minutes. ``feedmesh provision --max-services`` raises it."""


@dataclass(frozen=True)
class Violation:
    service: str
    tier: str
    resource: str
    load: float  # with over-provisioning applied
    limit: float

    @property
    def ratio(self) -> float:
        return self.load / self.limit

    def describe(self) -> str:
        unit = UNITS[self.resource]
        return (f"{self.service} {self.resource.replace('_', '-')} "
                f"{in_units(self.resource, self.load):,.3g} {unit} > limit "
                f"{in_units(self.resource, self.limit):,.3g} {unit}")


@dataclass(frozen=True)
class Step:
    violation: Violation
    kind: str
    parts: int
    replicas: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    targets: Targets
    limits: NodeLimits
    topology: Topology
    loads: dict[str, Load]
    steps: tuple[Step, ...]


def indirect_potential(violation: Violation, others: list[Violation]) -> int:
    """How many of the other violations would, resolved first, resolve this one on the way.

    Resolving ``w`` splits its service into about ``ratio(w)`` replicas; every load its
    decomposition lowers (``LOWERS``) falls by that factor, so ``w`` resolves ``v`` of the same
    service when ``v``'s resource is among them and ``ratio(w) >= ratio(v)``. Cobra's example: a
    crawler's in-bandwidth and out-bandwidth both violated, the in-bandwidth further over, then
    the out-bandwidth has potential 1 and the in-bandwidth 0: the in-bandwidth goes first.
    Effects across services are not counted (a filter split raises its crawlers' out-bandwidth,
    it never lowers another service's load)."""
    return sum(1 for other in others
               if other is not violation and other.service == violation.service
               and violation.resource in LOWERS[(other.tier, DECOMPOSITION[
                   (other.tier, other.resource)].kind)]
               and other.ratio >= violation.ratio)


def find_violations(loads: dict[str, Load], tiers: dict[str, str],
                    limits: NodeLimits) -> list[Violation]:
    """Every violation, in the order the planner resolves them: least potential to be resolved
    indirectly first, then upstream tiers first, then the worst overload."""
    found = []
    for name, load in loads.items():
        for resource in RESOURCES:
            value = load.of(resource) * (1 + limits.overprovision)
            if value > limits.limit(resource):
                found.append(Violation(name, tiers[name], resource, value,
                                       limits.limit(resource)))
    by_service: dict[str, list[Violation]] = {}
    for violation in found:
        by_service.setdefault(violation.service, []).append(violation)
    potential = {id(v): indirect_potential(v, by_service[v.service]) for v in found}
    found.sort(key=lambda v: (potential[id(v)], TIERS.index(v.tier), -v.ratio, v.service,
                              RESOURCES.index(v.resource)))
    return found


def resolve(topology: Topology, violation: Violation, model: ResourceModel,
            limits: NodeLimits, settings: PlannerSettings = PlannerSettings()) -> Step:
    """The decomposition of ``violation``'s service into the fewest replicas whose own load of
    the violated resource fits; raises UnresolvableError when no count does."""
    kind = DECOMPOSITION[(violation.tier, violation.resource)].kind
    service = topology.service(violation.service)
    if violation.resource == "memory":
        base = getattr(model, violation.tier).memory_base_bytes * (1 + limits.overprovision)
        if base > violation.limit:
            raise UnresolvableError(violation.service, violation.resource, (
                f"a {violation.tier}'s fixed memory is {base / 2**20:,.0f} MB (its process's "
                f"own, whatever its share), above the node's {violation.limit / 2**20:,.0f} MB: "
                "no split helps; give nodes at least "
                f"{math.ceil(base / 2**20 * 1.2):,} MB (--memory-mb)"))
    size = split_size(service, kind)
    unit = "feeds" if service.tier == "crawler" or (service.tier, kind) == ("filter", "in") \
        else "subscriptions"
    smallest = 1 if unit == "feeds" else settings.min_subscriptions_per_service
    most = size // smallest
    if most < 2:
        raise UnresolvableError(violation.service, violation.resource, _floor_reason(
            violation, kind, unit, size, smallest, None))
    room = settings.max_services - len(topology.services) + 1   # the service itself is replaced

    def too_many(needed: str) -> UnresolvableError:
        return UnresolvableError(violation.service, violation.resource, (
            f"{kind}-decomposition needs {needed} {service.tier}s, and the plan "
            f"would pass its bound of {settings.max_services:,} services (it has "
            f"{len(topology.services):,}); lower the targets, raise the node limits, or raise "
            "--max-services (planning time grows with the links between filters and "
            "reflectors)"))

    def worst_replica(parts: int) -> float:
        trial = decompose(topology, violation.service, kind, parts)
        loads = predict(trial, model, only=_new_names(topology, trial))
        return max(load.of(violation.resource) for load in loads.values())

    def fits(parts: int) -> bool:
        return worst_replica(parts) * (1 + limits.overprovision) <= violation.limit

    # The linear estimate is exact for loads proportional to the share; loads that fall slower
    # (selectivity, a fixed base) need more: double, then bisect.
    low = max(2, min(most, math.ceil(violation.ratio)))
    if low > room:
        raise too_many(f"at least {low:,}")
    if not fits(low):
        high = low
        while high < min(most, room):
            low, high = high, min(most, room, high * 2)
            if fits(high):
                break
        else:
            if room < most:
                raise too_many(f"more than {room:,}")
            floor = worst_replica(most) * (1 + limits.overprovision)
            share = selectivity(model.filter.matches_per_article_per_subscription, smallest)
            raise UnresolvableError(violation.service, violation.resource, _floor_reason(
                violation, kind, unit, size, smallest, floor, share))
        while high - low > 1:
            middle = (low + high) // 2
            if fits(middle):
                high = middle
            else:
                low = middle
        low = high
    trial = decompose(topology, violation.service, kind, low)
    return Step(violation, kind, low, tuple(_new_names(topology, trial)))


def _new_names(before: Topology, after: Topology) -> list[str]:
    old = {s.name for s in before.services}
    return [s.name for s in after.services if s.name not in old]


def _floor_reason(violation: Violation, kind: str, unit: str, size: int, smallest: int,
                  floor: float | None, matched_share: float = 1.0) -> str:
    split = f"{kind}-decomposition (splitting its {size:,} {unit})"
    if floor is None:
        return f"{split} is impossible: it holds too few {unit} to split"
    value = in_units(violation.resource, floor)
    why = {"in_bandwidth": " (every reflector receives every article that matches one of its "
                           f"users, and {matched_share:.4%} of articles match one of "
                           f"{smallest:,})" if violation.tier == "reflector" else "",
           "memory": " (the process's fixed memory)"}.get(violation.resource, "")
    return (f"{split} into shares of {smallest:,} still leaves {value:,.3g} "
            f"{UNITS[violation.resource]}{why}; raise the node's limit or lower the targets")


def plan(targets: Targets, limits: NodeLimits, model: ResourceModel,
         settings: PlannerSettings = PlannerSettings()) -> Plan:
    topology = Topology.initial(targets)
    steps: list[Step] = []
    for _ in range(settings.max_steps):
        loads = predict(topology, model)
        tiers = {s.name: s.tier for s in topology.services}
        violations = find_violations(loads, tiers, limits)
        if not violations:
            return Plan(targets, limits, topology, loads, tuple(steps))
        step = resolve(topology, violations[0], model, limits, settings)
        topology = decompose(topology, step.violation.service, step.kind, step.parts)
        steps.append(step)
    raise UnresolvableError("the topology", "step", f"no plan after {settings.max_steps} steps")
