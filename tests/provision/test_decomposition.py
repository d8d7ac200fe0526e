"""Figure 3, cell by cell: each service's each violation is resolved by the table's
decomposition, the replicas fit, and the load moves as the table says (docs/provisioning.md)."""

from __future__ import annotations

import itertools

import pytest

from feedmesh.provision.decomposition import DECOMPOSITION, LOWERS, decompose
from feedmesh.provision.errors import UnresolvableError
from feedmesh.provision.loads import predict
from feedmesh.provision.planner import find_violations, indirect_potential, resolve
from feedmesh.provision.topology import RESOURCES, NodeLimits, Targets, Topology

from .conftest import make_model

LIMITS = NodeLimits.from_units(bandwidth_mbps=100, memory_mb=1024, cpu=1.0)

# (tier, resource) -> (feeds, subscriptions, model changes) that make that service violate it
CELLS = {
    ("crawler", "in_bandwidth"): (10_000_000, 1000, {}),
    ("crawler", "out_bandwidth"): (10_000_000, 1000, {
        "crawler__bytes_in_per_feed_per_crawl": 100,
        "crawler__bytes_out_per_feed_per_crawl": 3000}),
    ("crawler", "cpu"): (1_000_000, 1000, {"crawler__cpu_s_per_feed_per_crawl": 1e-3}),
    ("crawler", "memory"): (1_000_000, 1000, {"crawler__memory_bytes_per_feed": 2000}),
    ("filter", "in_bandwidth"): (10_000_000, 1000, {"crawler__bytes_in_per_feed_per_crawl": 100,
                                                    "crawler__bytes_out_per_feed_per_crawl": 3000}),
    ("filter", "out_bandwidth"): (1_000_000, 10_000, {"filter__bytes_per_match_message": 1e6}),
    ("filter", "cpu"): (1_000_000, 1_000_000, {"filter__cpu_s_per_article_per_ksubs": 1e-4}),
    ("filter", "memory"): (1000, 1_000_000, {"filter__memory_bytes_per_subscription": 2000}),
    ("reflector", "in_bandwidth"): (1_000_000, 1_000_000, {
        "filter__bytes_per_match_message": 1e6,
        "filter__matches_per_article_per_subscription": 1e-6}),
    ("reflector", "out_bandwidth"): (1000, 1_000_000, {"reflector__bytes_per_poll_answer": 1e5}),
    ("reflector", "cpu"): (1_000_000, 1_000_000, {"reflector__cpu_s_per_article_per_ksubs": 1e-4}),
    ("reflector", "memory"): (1000, 1_000_000, {"reflector__memory_bytes_per_held_entry": 200}),
}


def test_the_table_has_a_cell_for_every_service_and_violation():
    assert set(DECOMPOSITION) == set(CELLS) == {(t, r) for t in ("crawler", "filter", "reflector")
                                                for r in RESOURCES}


@pytest.mark.parametrize("tier, resource", sorted(CELLS))
def test_the_tables_decomposition_resolves_the_violation(tier, resource):
    feeds, subs, changes = CELLS[(tier, resource)]
    model = make_model(**changes)
    topology = Topology.initial(Targets(feeds, subs))
    loads = predict(topology, model)
    violations = find_violations(loads, {s.name: s.tier for s in topology.services}, LIMITS)
    [violation] = [v for v in violations if (v.tier, v.resource) == (tier, resource)]

    step = resolve(topology, violation, model, LIMITS)
    assert step.kind == DECOMPOSITION[(tier, resource)].kind
    after = decompose(topology, violation.service, step.kind, step.parts)
    new_loads = predict(after, model)
    original = topology.service(violation.service)
    replicas = [after.service(name) for name in step.replicas]
    assert len(replicas) == step.parts >= 2

    # every replica fits where the original did not, and with one replica fewer it would not
    assert all(new_loads[r.name].of(resource) <= LIMITS.limit(resource) for r in replicas)
    if step.parts > 2:
        fewer = predict(decompose(topology, violation.service, step.kind, step.parts - 1), model)
        assert max(fewer[n].of(resource) for n in fewer if n.startswith(tier) and n not in
                   {s.name for s in topology.services}) > LIMITS.limit(resource)

    # the load moves as the table says: the split range is partitioned among the replicas,
    # the other range (and so the other side's links) is kept by every one
    split, kept = (("feeds", "subscriptions") if tier == "crawler" or (step.kind == "in" and
                   tier == "filter") else ("subscriptions", "feeds"))
    pieces = sorted((getattr(r, split).start, getattr(r, split).stop) for r in replicas)
    assert pieces[0][0] == getattr(original, split).start
    assert pieces[-1][1] == getattr(original, split).stop
    assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))
    assert all(getattr(r, kept) == getattr(original, kept) for r in replicas)
    old_peers = {link.target if link.source == original.name else link.source
                 for link in topology.links() if original.name in (link.source, link.target)}
    for replica in replicas:
        peers = {link.target if link.source == replica.name else link.source
                 for link in after.links() if replica.name in (link.source, link.target)}
        if (tier, step.kind) in (("crawler", "in"), ("filter", "in")):
            assert peers & {s.name for s in after.tier("reflector")} == \
                old_peers & {s.name for s in after.tier("reflector")}  # outgoing replicated
        if step.kind == "out":
            upstream = {"filter": "crawler", "reflector": "filter"}[tier]
            assert {p for p in peers if p.startswith(upstream)} == \
                {p for p in old_peers if p.startswith(upstream)}  # incoming replicated


def test_a_reflectors_in_bandwidth_is_unresolvable_while_nearly_every_article_matches():
    # p = 1%: a thousand subscriptions already catch all but 0.004% of articles (Cobra 4.3)
    model = make_model(filter__bytes_per_match_message=1e6)
    topology = Topology.initial(Targets(1_000_000, 1_000_000))
    violations = find_violations(predict(topology, model),
                                 {s.name: s.tier for s in topology.services}, LIMITS)
    [violation] = [v for v in violations if (v.tier, v.resource) == ("reflector", "in_bandwidth")]
    with pytest.raises(UnresolvableError) as caught:
        resolve(topology, violation, model, LIMITS)
    message = str(caught.value)
    assert caught.value.service == "reflector-0" and caught.value.resource == "in_bandwidth"
    assert "every reflector receives every article" in message
    assert "out-decomposition" in message


@pytest.mark.parametrize("tier, kind", sorted(LOWERS))
def test_each_decomposition_lowers_what_the_table_says_and_nothing_else(tier, kind):
    # a load on every resource, selective subscriptions (so selectivity can fall), 2 reflectors
    model = make_model(filter__matches_per_article_per_subscription=1e-6)
    topology = Topology.initial(Targets(100_000, 1_000_000))
    topology = decompose(topology, "reflector-0", "out", 2) if tier != "reflector" else topology
    name = topology.tier(tier)[0].name
    before = predict(topology, model)[name]
    after_topology = decompose(topology, name, kind, 2)
    after = predict(after_topology, model)
    replicas = [s.name for s in after_topology.tier(tier) if s.name.split("-")[1] not in
                {x.name.split("-")[1] for x in topology.tier(tier)}]
    for resource in RESOURCES:
        for replica in replicas:
            if resource in LOWERS[(tier, kind)]:
                assert after[replica].of(resource) < before.of(resource), (replica, resource)
            else:
                assert after[replica].of(resource) == pytest.approx(before.of(resource)), \
                    (replica, resource)


@pytest.mark.parametrize("bytes_out, first", [
    (1500, "in_bandwidth"),    # in 4.4x over, out 3.3x: splitting for the in-bandwidth does both
    (3000, "out_bandwidth"),   # out 6.7x over: splitting for it resolves the in-bandwidth too
])
def test_violations_less_likely_to_be_resolved_indirectly_come_first(bytes_out, first):
    model = make_model(crawler__bytes_out_per_feed_per_crawl=bytes_out,
                       crawler__cpu_s_per_feed_per_crawl=0, crawler__memory_bytes_per_feed=0)
    topology = Topology.initial(Targets(25_000_000, 1000))
    violations = find_violations(predict(topology, model),
                                 {s.name: s.tier for s in topology.services}, LIMITS)
    crawler = [v for v in violations if v.tier == "crawler"]
    assert {v.resource for v in crawler} == {"in_bandwidth", "out_bandwidth"}
    assert violations[0].resource == first and violations[0].tier == "crawler"
    assert indirect_potential(violations[0], violations) == 0
    # and resolving the first resolved the other on the way
    step = resolve(topology, violations[0], model, LIMITS)
    after = predict(decompose(topology, "crawler-0", step.kind, step.parts), model)
    for name in step.replicas:
        assert after[name].in_bandwidth <= LIMITS.bandwidth_bps
        assert after[name].out_bandwidth <= LIMITS.bandwidth_bps
