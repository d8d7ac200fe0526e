"""Figure 3, derived: which decomposition resolves which violation of which service.

Cobra 3.5: an *out-decomposition* replaces a service by n replicas that all keep its incoming
links and share out its outgoing ones; an *in-decomposition* replicas keep its outgoing links and
share out its incoming ones. In our topology a link carries a share of a stream, so:

* crawler, in-decomposition: its feeds are split (its incoming links are the feeds); each replica
  still sends to every filter it did (outgoing links replicated). Out-decomposition would split
  the filters it sends to, but every filter must see every feed's articles, so it cannot be used:
  a crawler's load follows its feeds, and every crawler violation splits its feed list.
* filter, in-decomposition: its feeds (the crawlers' streams) are split, each replica keeps all
  its subscriptions and reflectors: each sees fewer articles, so in-bandwidth, out-bandwidth and
  CPU fall, but memory (the index) does not.
  Out-decomposition: its subscriptions (what it serves to reflectors) are split, each replica
  receives every article: CPU, memory and out-bandwidth fall, in-bandwidth does not.
* reflector, out-decomposition: its subscriptions (its users, its outgoing links) are split,
  each replica keeps every filter link: CPU, memory and polling bandwidth fall; in-bandwidth falls
  only by the selectivity, ``sel(n) = 1 - (1-p)^n``, which is ~1 for any reflector holding more
  than a few hundred subscriptions while nearly every article matches someone (Cobra 4.3). So a
  reflector's in-bandwidth is resolvable only where subscriptions are selective; the planner
  tries it and reports it unresolvable otherwise. In-decomposition would split its filters, so a
  user's matches would be scattered over replicas: never used.

Where both decompositions lower a load (filter CPU), the table picks the one that keeps the total
work constant (out: the subscriptions are split; in: every replica would hold the whole index),
as Cobra does. ``LOWERS`` is what each decomposition lowers on the replicas; tests check it
against :func:`~feedmesh.provision.loads.predict`, and the planner orders violations with it
(:func:`~feedmesh.provision.planner.indirect_potential`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .topology import Service, Topology

__all__ = ["DECOMPOSITION", "LOWERS", "Decomposition", "decompose", "split_size"]


@dataclass(frozen=True)
class Decomposition:
    kind: str  # "in" or "out"
    reason: str


DECOMPOSITION: dict[tuple[str, str], Decomposition] = {
    ("crawler", "in_bandwidth"): Decomposition("in", "fewer feeds fetched per crawler"),
    ("crawler", "out_bandwidth"): Decomposition("in", "fewer feeds, so fewer new articles to "
                                                "send to each filter"),
    ("crawler", "cpu"): Decomposition("in", "fewer feeds fetched and parsed"),
    ("crawler", "memory"): Decomposition("in", "less per-feed state (validators, entry hashes)"),
    ("filter", "in_bandwidth"): Decomposition("in", "each filter receives the articles of fewer "
                                              "feeds"),
    ("filter", "out_bandwidth"): Decomposition("in", "fewer articles in, so fewer matches out"),
    ("filter", "cpu"): Decomposition("out", "fewer subscriptions to match each article against"),
    ("filter", "memory"): Decomposition("out", "fewer subscriptions in each index"),
    ("reflector", "in_bandwidth"): Decomposition("out", "fewer users, so fewer articles match "
                                                 "one of them; ~none while nearly every article "
                                                 "matches someone"),
    ("reflector", "out_bandwidth"): Decomposition("out", "fewer users polling each reflector"),
    ("reflector", "cpu"): Decomposition("out", "fewer subscriptions to re-match and fewer "
                                        "private feeds to update"),
    ("reflector", "memory"): Decomposition("out", "fewer subscriptions and private feeds held"),
}

LOWERS: dict[tuple[str, str], frozenset[str]] = {
    ("crawler", "in"): frozenset({"in_bandwidth", "out_bandwidth", "cpu", "memory"}),
    ("filter", "in"): frozenset({"in_bandwidth", "out_bandwidth", "cpu"}),
    ("filter", "out"): frozenset({"out_bandwidth", "cpu", "memory"}),
    ("reflector", "out"): frozenset({"in_bandwidth", "out_bandwidth", "cpu", "memory"}),
}
"""(tier, kind) -> the resources of the replicas that fall (in_bandwidth of a reflector only by
the selectivity)."""


def decompose(topology: Topology, name: str, kind: str, parts: int) -> Topology:
    """Replace service ``name`` by ``parts`` replicas, splitting the range the decomposition
    shares out; the other range (and so the other links) is kept by every replica."""
    service = topology.service(name)
    split_attr = _split_attribute(service, kind)
    share = getattr(service, split_attr)
    if parts < 2 or parts > share.size:
        raise ValueError(f"cannot split {name}'s {share.size} {split_attr} into {parts}")
    names = topology.next_names(service.tier, parts)
    replicas = [replace(service, name=n, **{split_attr: piece})
                for n, piece in zip(names, share.split(parts), strict=True)]
    return topology.replace_service(name, replicas)


def split_size(service: Service, kind: str) -> int:
    return int(getattr(service, _split_attribute(service, kind)).size)


def _split_attribute(service: Service, kind: str) -> str:
    if (service.tier, kind) not in LOWERS:
        raise ValueError(f"a {service.tier} has no {kind}-decomposition")
    if service.tier == "crawler" or (service.tier == "filter" and kind == "in"):
        return "feeds"
    return "subscriptions"
