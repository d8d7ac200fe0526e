"""The plan as data: the topology JSON and the launch plan (role, shard, flags, host).

Each service gets its own emulated host, a loopback address (many machines on one): crawlers
127.1.x.y, filters 127.2.x.y, reflectors 127.3.x.y. The command is the real one for that role
and share: ``crawler --shard i/n`` (the planner's feed ranges are equal slices; the processes
split the feeds by id modulo n, the same sizes), ``filter --shard j/m`` for the j-th distinct
subscription range (services with the same range are replicas: one group, sharing its articles,
as the planner's in-decomposition of a filter shares them by feed range), ``reflector --shard
k/R``. ``feedmesh up --topology FILE`` starts a topology from this JSON; the flags every process
shares (``--bus``, ``--state``, ``--store``) are ``up``'s.
"""

from __future__ import annotations

from typing import Any

from .loads import Load
from .planner import Plan
from .topology import TIERS, Service, Topology

__all__ = ["host_of", "launch_plan", "topology_json"]

def host_of(topology: Topology, service: Service) -> str:
    index = topology.tier(service.tier).index(service)
    return f"127.{TIERS.index(service.tier) + 1}.{index // 254}.{index % 254 + 1}"


def _shard(service: Service) -> dict[str, str]:
    shard = {}
    if service.feeds is not None:
        shard["feeds"] = str(service.feeds)
    if service.subscriptions is not None:
        shard["subscriptions"] = str(service.subscriptions)
    return shard


def _shards(topology: Topology) -> dict[str, str]:
    """Each service's ``i/n`` among its tier's processes (a filter's among the distinct
    subscription ranges: replicas share one)."""
    out = {}
    for services in (topology.crawlers, topology.reflectors):
        ordered = sorted(services, key=lambda s: (s.feeds or s.subscriptions).start)
        for i, service in enumerate(ordered):
            out[service.name] = f"{i}/{len(ordered)}"
    ranges = sorted({(s.subscriptions.start, s.subscriptions.stop) for s in topology.filters
                     if s.subscriptions is not None})
    for service in topology.filters:
        if service.subscriptions is not None:
            key = (service.subscriptions.start, service.subscriptions.stop)
            out[service.name] = f"{ranges.index(key)}/{len(ranges)}"
    return out


def launch_plan(plan: Plan) -> list[dict[str, Any]]:
    topology = plan.topology
    shards = _shards(topology)
    rows = []
    for service in topology.services:
        rows.append({"service": service.name, "role": service.tier, "shard": _shard(service),
                     "process_shard": shards[service.name], "host": host_of(topology, service),
                     "flags": f"{service.tier} --shard {shards[service.name]}"})
    return rows


def _load_json(load: Load, plan: Plan) -> dict[str, float]:
    limits = plan.limits
    return {"in_mbps": round(load.in_bandwidth * 8 / 1e6, 4),
            "out_mbps": round(load.out_bandwidth * 8 / 1e6, 4),
            "cpu": round(load.cpu, 5),
            "memory_mb": round(load.memory / 2**20, 2),
            "articles_in_per_s": round(load.articles_in_per_s, 3),
            "in_share": round(load.in_bandwidth / limits.bandwidth_bps, 4),
            "out_share": round(load.out_bandwidth / limits.bandwidth_bps, 4),
            "cpu_share": round(load.cpu / limits.cpu, 4),
            "memory_share": round(load.memory / limits.memory_bytes, 4)}


def topology_json(plan: Plan) -> dict[str, Any]:
    """``crawlers``, ``filters``, ``reflectors`` (counts), ``services`` and ``links``."""
    topology = plan.topology
    hosts = {row["service"]: row for row in launch_plan(plan)}
    services = []
    for service in topology.services:
        row = hosts[service.name]
        services.append({"name": service.name, "role": service.tier, "host": row["host"],
                         "process_shard": row["process_shard"],
                         "feeds": service.feeds.size if service.feeds else None,
                         "subscriptions": (service.subscriptions.size
                                           if service.subscriptions else None),
                         "shard": row["shard"], "flags": row["flags"],
                         "load": _load_json(plan.loads[service.name], plan)})
    links = [{"from": link.source, "to": link.target, "feeds": link.feeds,
              "subscriptions": link.subscriptions or None} for link in topology.links()]
    limits = plan.limits
    return {"crawlers": len(topology.crawlers), "filters": len(topology.filters),
            "reflectors": len(topology.reflectors),
            "targets": {"feeds": plan.targets.feeds, "subscriptions": plan.targets.subscriptions},
            "limits": {"bandwidth_mbps": limits.bandwidth_bps * 8 / 1e6,
                       "memory_mb": limits.memory_bytes / 2**20, "cpu": limits.cpu,
                       "overprovision": limits.overprovision},
            "steps": [{"violation": s.violation.describe(), "decomposition": s.kind,
                       "replicas": s.parts} for s in plan.steps],
            "services": services, "links": links}
