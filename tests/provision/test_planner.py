"""The greedy planner as a whole: it stops on success with nothing violated, grows with the
targets and shrinks with the limits, and names what it cannot resolve."""

from __future__ import annotations

import pytest

from feedmesh.provision import (
    NodeLimits,
    PlannerSettings,
    Targets,
    TargetsError,
    UnresolvableError,
    find_violations,
    plan,
    predict,
)

from .conftest import make_model


def limits(**kwargs: float) -> NodeLimits:
    units = {"bandwidth_mbps": 100, "memory_mb": 1024, "cpu": 1.0}
    units.update(kwargs)
    return NodeLimits.from_units(**units)


def counts(result) -> tuple[int, int, int]:
    t = result.topology
    return len(t.crawlers), len(t.filters), len(t.reflectors)


def test_a_small_target_is_cobras_starting_topology(model):
    result = plan(Targets(1000, 1000), limits(), model)
    assert counts(result) == (1, 1, 1) and result.steps == ()


def test_a_plan_has_no_violation_left_and_covers_every_feed_and_subscription(model):
    result = plan(Targets(2_000_000, 20_000_000), limits(), model)
    t = result.topology
    assert not find_violations(predict(t, model), {s.name: s.tier for s in t.services}, limits())
    assert result.steps, "this target needs decompositions"
    assert sum(c.feeds.size for c in t.crawlers) == 2_000_000
    assert sum(r.subscriptions.size for r in t.reflectors) == 20_000_000
    # every subscription is matched against every feed's articles exactly once
    for feed in (0, 999_999, 1_999_999):
        covering = [f for f in t.filters if f.feeds.start <= feed < f.feeds.stop]
        assert sum(f.subscriptions.size for f in covering) == 20_000_000
    assert result.loads == predict(t, model)


def test_more_bandwidth_fewer_crawlers_less_cpu_more_filters():
    model = make_model(filter__cpu_s_per_article_per_ksubs=1e-5,
                       crawler__bytes_in_per_feed_per_crawl=5000)
    target = Targets(800_000, 8_000_000)
    a = plan(target, limits(bandwidth_mbps=25, cpu=4.0), model)
    b = plan(target, limits(bandwidth_mbps=100, cpu=1.0), model)
    assert counts(b)[0] < counts(a)[0]
    assert counts(b)[1] > counts(a)[1]


def test_cpu_scales_relative_to_the_models_machine():
    model = make_model(filter__cpu_s_per_article_per_ksubs=1e-5)
    target = Targets(800_000, 8_000_000)
    slow = plan(target, limits(cpu=0.5), model)
    fast = plan(target, limits(cpu=2.0), model)
    worst_slow = max(slow.loads[f.name].cpu for f in slow.topology.filters)
    assert worst_slow <= 0.5
    assert counts(slow)[1] > counts(fast)[1]


def test_over_provisioning_leaves_head_room(model):
    target = Targets(5_000_000, 1000)
    tight = plan(target, limits(), model)
    roomy = plan(target, NodeLimits.from_units(bandwidth_mbps=100, memory_mb=1024,
                                               overprovision=0.5), model)
    assert counts(roomy)[0] > counts(tight)[0]
    assert all(roomy.loads[c.name].in_bandwidth * 1.5 <= roomy.limits.bandwidth_bps
               for c in roomy.topology.crawlers)


def test_a_violation_nothing_resolves_names_the_service_the_limit_and_why(model):
    # 100 MB of fixed memory per process on 64 MB nodes: no split helps
    with pytest.raises(UnresolvableError) as caught:
        plan(Targets(1000, 1000), limits(memory_mb=64), model)
    assert caught.value.resource == "memory"
    assert "fixed memory" in str(caught.value) and "memory" in str(caught.value)


@pytest.mark.parametrize("kwargs", [{"bandwidth_mbps": 0}, {"memory_mb": -1}, {"cpu": 0}])
def test_limits_out_of_range_are_refused(kwargs):
    with pytest.raises(TargetsError):
        limits(**kwargs)


def test_targets_out_of_range_are_refused():
    with pytest.raises(TargetsError, match="--feeds"):
        Targets(0, 10)


def test_a_process_s_fixed_cpu_is_paid_by_every_replica_and_bounds_what_a_split_saves():
    plain = make_model(crawler__cpu_s_per_feed_per_crawl=0.01)
    based = make_model(crawler__cpu_s_per_feed_per_crawl=0.01, crawler__cpu_s_per_s_base=0.3,
                       filter__cpu_s_per_s_base=0.2, reflector__cpu_s_per_s_base=0.1)
    target = Targets(100_000, 10_000)
    before = plan(target, limits(cpu=4.0), plain)
    loads, base_loads = predict(before.topology, plain), predict(before.topology, based)
    for service in before.topology.services:
        fixed = {"crawler": 0.3, "filter": 0.2, "reflector": 0.1}[service.tier]
        assert base_loads[service.name].cpu == pytest.approx(loads[service.name].cpu + fixed)
    # 100,000 feeds x 0.01 s / 900 s = 1.11 cores: two crawlers of 0.56 without the fixed part,
    # three with it (0.3 + 0.37 each)
    assert counts(plan(target, limits(cpu=0.8), plain))[0] == 2
    assert counts(plan(target, limits(cpu=0.8), based))[0] == 3


def test_answers_and_held_rows_are_priced_per_entry_held():
    import msgspec

    from feedmesh.provision.model import Workload

    priced = make_model(reflector__bytes_per_poll_answer=6_000, reflector__bytes_per_poll_item=500)
    topology = plan(Targets(1_000, 100_000), limits(), priced).topology
    name = topology.reflectors[0].name
    full = predict(topology, priced)[name]
    held = msgspec.structs.replace(priced, workload=Workload(held_per_answer=2.0))
    partial = predict(topology, held)[name]
    polls = 100_000 / Workload().poll_interval_s
    assert full.out_bandwidth == pytest.approx(polls * 6_000)
    # 8 entries fewer than k = 10: 8 x 500 bytes fewer an answer
    assert partial.out_bandwidth == pytest.approx(polls * (6_000 - 8 * 500))
    # held rows: 20 bytes a pair, 100,000 subscriptions x (10 - 2) pairs fewer
    assert full.memory - partial.memory == pytest.approx(100_000 * 8 * 20)


def test_a_plan_past_the_bound_on_services_is_refused_and_says_how_many(model):
    targets = Targets(feeds=8_000_000, subscriptions=80_000_000)
    whole = plan(targets, limits(), model)
    size = len(whole.topology.services)
    assert size > 10
    # the same plan with room for exactly its services, then with one fewer
    assert counts(plan(targets, limits(), model, PlannerSettings(max_services=size))) == \
        counts(whole)
    with pytest.raises(UnresolvableError) as caught:
        plan(targets, limits(), model, PlannerSettings(max_services=size - 1))
    message = str(caught.value)
    assert f"bound of {size - 1:,} services" in message and "--max-services" in message
