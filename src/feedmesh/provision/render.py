"""The plan for a person: a table of services and a Graphviz picture in the spirit of Cobra's
Figure 2 (crawlers, filters and reflectors in three ranks, each labelled with its share)."""

from __future__ import annotations

from .launch import host_of, launch_plan
from .planner import Plan

__all__ = ["counted", "plan_table", "topology_dot"]

_COLOURS = {"crawler": "#9ecae1", "filter": "#fdae6b", "reflector": "#a1d99b"}


def _share(service: object) -> str:
    parts = []
    if getattr(service, "feeds", None) is not None:
        parts.append(f"{service.feeds.size:,} feeds")  # type: ignore[attr-defined]
    if getattr(service, "subscriptions", None) is not None:
        parts.append(f"{service.subscriptions.size:,} subs")  # type: ignore[attr-defined]
    return ", ".join(parts)


def counted(count: int, noun: str) -> str:
    """``1 crawler``, ``2 crawlers``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def plan_table(plan: Plan) -> str:
    t = plan.topology
    shards = {row["service"]: row["flags"] for row in launch_plan(plan)}
    lines = [(f"{counted(len(t.crawlers), 'crawler')}, {counted(len(t.filters), 'filter')}, "
             f"{counted(len(t.reflectors), 'reflector')} for {plan.targets.feeds:,} feeds and "
             f"{plan.targets.subscriptions:,} subscriptions "
             f"({counted(len(plan.steps), 'decomposition')})"),
             (f"{'service':14} {'node':12} {'share':28} {'in Mbps':>8} {'out Mbps':>8} "
             f"{'CPU':>6} {'MB':>7}  flags")]
    for service in t.services:
        load = plan.loads[service.name]
        flags = shards[service.name]
        lines.append(f"{service.name:14} {host_of(t, service):12} {_share(service):28} "
                     f"{load.in_bandwidth * 8 / 1e6:8.2f} {load.out_bandwidth * 8 / 1e6:8.2f} "
                     f"{load.cpu / plan.limits.cpu:6.3f} {load.memory / 2**20:7.0f}  {flags}")
    lines.append(f"limits per node: {plan.limits.bandwidth_bps * 8 / 1e6:g} Mbps in and out, "
                 f"{plan.limits.memory_bytes / 2**20:g} MB, CPU {plan.limits.cpu:g}x, "
                 f"over-provisioned {plan.limits.overprovision:.0%}; CPU column: share of a node")
    lines.append("node: a machine of these limits per service; the addresses are the loopback "
                 "hosts that `feedmesh up --topology` gives each on one machine, not real ones")
    return "\n".join(lines)


def topology_dot(plan: Plan) -> str:
    t = plan.topology
    out = ["digraph feedmesh {", "  rankdir=TB; node [shape=box, style=filled, fontsize=10];",
           (f'  label="{plan.targets.feeds:,} feeds, {plan.targets.subscriptions:,} '
           f'subscriptions: {counted(len(t.crawlers), "crawler")}, '
           f'{counted(len(t.filters), "filter")}, {counted(len(t.reflectors), "reflector")}"; '
           'labelloc=t;')]
    for tier, services in (("crawler", t.crawlers), ("filter", t.filters),
                           ("reflector", t.reflectors)):
        out.append(f"  subgraph {tier}s {{ rank=same;")
        for s in services:
            out.append(f'    "{s.name}" [label="{s.name}\\n{_share(s)}", '
                       f'fillcolor="{_COLOURS[tier]}"];')
        out.append("  }")
    for link in t.links():
        out.append(f'  "{link.source}" -> "{link.target}";')
    out.append("}")
    return "\n".join(out) + "\n"
