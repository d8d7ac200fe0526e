"""Re-provisioning (Cobra 3.6): live figures in, violations and next decompositions out.

The command scrapes each hub's Prometheus ``/metrics`` twice, some seconds apart, and hands both
scrapes here (pure). A ``feedmesh serve`` hub runs all three tiers in one process, so each URL
gives one crawler, one filter and one reflector, read from the hub's metrics:

==================  =========================================  ===============================
service             measured                                   estimated (not exported)
==================  =========================================  ===============================
crawler             bytes in/out (``feedmesh_tier_bytes_*``)    -
filter              bytes in/out; CPU (``feedmesh_match_        memory: subscriptions x the
                    seconds`` sum per second)                   model's index bytes + base
reflector           bytes in; memory (``feedmesh_reflector_     out: 200 answers/s x the
                    memory_bytes``)                             model's bytes per answer
the hub process     memory (``feedmesh_process_memory_bytes``)  -
==================  =========================================  ===============================

CPU of the crawler and the reflector is not exported by the hub, so it is not checked.

A topology of separate processes (``feedmesh up``: its ``DATA/up.json``, or role-tagged URLs
``crawler=URL``) is checked process by process, each as its role, every figure measured from
the process's own ``/metrics``:

==========  ==========================  ========================  ============================
role        in                          out                       CPU, memory
==========  ==========================  ========================  ============================
crawler     bytes from publishers       bytes to the bus          ``feedmesh_process_cpu_
filter      articles from the bus       match messages            seconds`` per second;
reflector   match messages              answers to polls          ``feedmesh_process_memory_
                                        (``tier_bytes_out``)      bytes`` (resident)
==========  ==========================  ========================  ============================
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .decomposition import DECOMPOSITION
from .loads import Load
from .model import ResourceModel
from .planner import Violation, find_violations
from .topology import NodeLimits

__all__ = ["ROLES", "Finding", "Scrape", "check", "live_loads", "role_load"]

Scrape = dict[str, float]  # "name{label=value}" -> value, as benchmarks/hub.py keys them


@dataclass(frozen=True)
class Finding:
    violation: Violation
    decomposition: str  # "in" or "out"
    replicas: int  # the linear estimate: ceil(load / limit)
    reason: str

    def describe(self) -> str:
        return (f"{self.violation.describe()}: next {self.decomposition}-decomposition into "
                f"~{self.replicas} replicas ({self.reason})")


def _rate(before: Scrape, after: Scrape, key: str, seconds: float) -> float:
    return max(0.0, after.get(key, 0.0) - before.get(key, 0.0)) / seconds


def live_loads(hub: str, before: Scrape, after: Scrape, seconds: float,
               model: ResourceModel) -> tuple[dict[str, Load], dict[str, list[str]]]:
    """(loads by service name, the estimated figures of each service)."""
    if seconds <= 0:
        raise ValueError("the scrapes must be apart in time")

    def tier(name: str, direction: str) -> float:
        return _rate(before, after, f"feedmesh_tier_bytes_{direction}_total{{tier={name}}}",
                     seconds)

    subs = after.get("feedmesh_subscriptions", 0.0)
    filter_memory = (model.filter.memory_base_bytes
                     + subs * model.filter.memory_bytes_per_subscription)
    answers = _rate(before, after, "feedmesh_feed_requests_total{status=200}", seconds)
    loads = {
        f"crawler@{hub}": Load(tier("crawler", "in"), tier("crawler", "out"), 0.0, 0.0),
        f"filter@{hub}": Load(tier("filter", "in"), tier("filter", "out"),
                              _rate(before, after, "feedmesh_match_seconds_sum", seconds),
                              filter_memory,
                              _rate(before, after, "feedmesh_tier_articles_in_total{tier=filter}",
                                    seconds)),
        f"reflector@{hub}": Load(tier("reflector", "in"),
                                 answers * model.reflector.bytes_per_poll_answer, 0.0,
                                 after.get("feedmesh_reflector_memory_bytes", 0.0)),
        f"hub@{hub}": Load(0.0, 0.0, 0.0, after.get("feedmesh_process_memory_bytes", 0.0)),
    }
    estimated = {f"crawler@{hub}": ["cpu", "memory"],
                 f"filter@{hub}": ["memory"],
                 f"reflector@{hub}": ["out_bandwidth", "cpu"],
                 f"hub@{hub}": []}
    return loads, estimated


ROLES = ("crawler", "filter", "reflector")


def role_load(role: str, before: Scrape, after: Scrape, seconds: float) -> Load:
    """One process of a role (``feedmesh crawler``, ``filter``, ``reflector``), measured."""
    if role not in ROLES:
        raise ValueError(f"role {role!r}: one of {', '.join(ROLES)}")
    if seconds <= 0:
        raise ValueError("the scrapes must be apart in time")
    return Load(
        _rate(before, after, f"feedmesh_tier_bytes_in_total{{tier={role}}}", seconds),
        _rate(before, after, f"feedmesh_tier_bytes_out_total{{tier={role}}}", seconds),
        _rate(before, after, "feedmesh_process_cpu_seconds", seconds),
        after.get("feedmesh_process_memory_bytes", 0.0),
        _rate(before, after, f"feedmesh_tier_articles_in_total{{tier={role}}}", seconds))


def check(loads: dict[str, Load], limits: NodeLimits,
          tiers: dict[str, str] | None = None) -> list[Finding]:
    """The violations of live loads, in the planner's order, each with its next decomposition.
    ``tiers``: each service's role (default: the part of its name before ``@``). The whole hub
    process (``hub@...``) is checked on memory only; a violation there is resolved by running
    its tiers as separate services, the first step of any plan."""
    tiers = tiers or {name: name.split("@", 1)[0] for name in loads}
    findings = []
    for violation in find_violations({n: v for n, v in loads.items() if tiers[n] != "hub"},
                                     tiers, limits):
        decomposition = DECOMPOSITION[(violation.tier, violation.resource)]
        findings.append(Finding(violation, decomposition.kind,
                                max(2, math.ceil(violation.ratio)), decomposition.reason))
    for name, load in loads.items():
        if tiers[name] == "hub" and load.memory * (1 + limits.overprovision) > limits.memory_bytes:
            violation = Violation(name, "hub", "memory", load.memory * (1 + limits.overprovision),
                                  limits.memory_bytes)
            findings.append(Finding(violation, "tier", 3, "run the crawler, filter and reflector "
                                    "as three services, then plan each"))
    return findings
