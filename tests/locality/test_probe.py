"""Latency measured against the real farm on loopback, from crawlers on their own addresses,
through the farm's emulated geography; then the mapping that measurement leads to."""

from __future__ import annotations

import itertools

import pytest

from feedmesh.farm import FarmConfig, FarmServer, Geography
from feedmesh.locality import (
    CrawlerSite,
    FeedLoad,
    LocalityError,
    balanced,
    first_fit,
    group_by_host,
)
from feedmesh.locality.probe import MatrixFileEstimator, ProbeEstimator, resolve_addresses

EU, ASIA = "127.0.1.201", "127.0.1.202"
CRAWLERS = [CrawlerSite("eu", EU), CrawlerSite("asia", ASIA)]
GEOGRAPHY = Geography(clients={EU: "eu", ASIA: "asia"}, jitter=0.0, access_ms_max=0.0)


async def test_probes_measure_each_crawlers_round_trip_to_each_host_group():
    # Hosts 127.0.1.1 (na), .2 (eu), .3 (asia); feed i on host i % 3.
    config = FarmConfig(feeds=9, hosts=3, seed=2, faults="none", geography=GEOGRAPHY)
    async with FarmServer(config) as farm:
        groups = group_by_host({str(i): farm.feed_url(i) for i in range(9)})
        probe = ProbeEstimator(probes=2, spacing_s=0.0, allow_networks=("127.0.0.0/8",))
        matrix = await probe.estimate(CRAWLERS, groups)
        log = farm.requests()
    assert [g.key for g in groups] == [f"127.0.1.{h}:{farm.port}" for h in (1, 2, 3)]
    assert probe.failures == []
    expected_ms = {"eu": [90, 20, 250], "asia": [160, 250, 40]}
    for crawler, row in expected_ms.items():
        for group, rtt_ms in zip(groups, row, strict=True):
            measured = matrix.rtt_s(crawler, group.key)
            assert rtt_ms / 1000 <= measured < rtt_ms / 1000 + 0.1, (crawler, group.key)
    # One probe feed per group (never each feed), HEAD only, three per crawler and group.
    assert {r.method for r in log} == {"HEAD"} and {r.feed for r in log} == {0, 1, 2}
    assert len(log) == 2 * 3 * 3
    # Never two probes in flight to one host.
    for host in {r.host for r in log}:
        spans = sorted((r.real_time, r.real_time + r.duration_s) for r in log if r.host == host)
        assert all(later[0] >= earlier[1] - 0.005 for earlier, later in itertools.pairwise(spans))
    # The measurement drives both mappings: each crawler keeps the feeds of its own region.
    loads = [FeedLoad(feed, g.key) for g in groups for feed in g.feeds]
    eu_host, asia_host = groups[1].key, groups[2].key
    for mapping in (first_fit(loads, ["eu", "asia"], matrix),
                    balanced(loads, ["eu", "asia"], matrix)):
        assert all(mapping[f] == "eu" for f in groups[1].feeds), eu_host
        assert all(mapping[f] == "asia" for f in groups[2].feeds), asia_host


async def test_an_unreachable_group_is_recorded_as_far_and_listed():
    config = FarmConfig(feeds=2, hosts=1, seed=2, faults="none")
    async with FarmServer(config) as farm:
        groups = group_by_host({"0": farm.feed_url(0), "gone": "http://127.0.0.1:9/feed"})
        probe = ProbeEstimator(probes=1, timeout_s=1.0, allow_networks=("127.0.0.0/8",))
        matrix = await probe.estimate([CrawlerSite("local")], groups)
    assert matrix.rtt_s("local", "127.0.0.1:9") == 1.0
    assert [(c, g) for c, g, _ in probe.failures] == [("local", "127.0.0.1:9")]
    assert matrix.rtt_s("local", f"127.0.0.1:{farm.port}") < 0.5


async def test_the_probe_will_not_reach_into_private_networks_by_default():
    groups = group_by_host({"x": "http://10.1.2.3/feed"})
    with pytest.raises(LocalityError, match=r"10\.1\.2\.3"):
        await ProbeEstimator().estimate([CrawlerSite("c")], groups)


async def test_a_matrix_file_is_checked_against_the_crawlers_and_groups(tmp_path):
    groups = group_by_host({"a": "http://h1.example/a", "b": "http://h2.example/b"})
    path = tmp_path / "m.json"
    path.write_text('{"rtt_ms": {"eu": {"h1.example:80": 20, "h2.example:80": 90}}}')
    matrix = await MatrixFileEstimator(path).estimate([CrawlerSite("eu")], groups)
    assert matrix.rtt_s("eu", "h2.example:80") == pytest.approx(0.090)
    with pytest.raises(LocalityError, match=r"m.json: latency matrix has no row for crawler"):
        await MatrixFileEstimator(path).estimate([CrawlerSite("na")], groups)
    with pytest.raises(LocalityError, match="cannot read it"):
        await MatrixFileEstimator(tmp_path / "absent.json").estimate([CrawlerSite("eu")], groups)


async def test_names_resolve_to_the_addresses_groups_are_keyed_by():
    assert await resolve_addresses(["localhost", "no-such-host.invalid"]) in (
        {"localhost": "127.0.0.1"}, {"localhost": "::1"})
