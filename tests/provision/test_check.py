"""`feedmesh provision --check` against a real hub (every tier and its web server, as `feedmesh
serve` runs them) crawling a real farm, both on loopback: the command scrapes the hub's
Prometheus /metrics twice and names what violates its limits and the next decomposition."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from feedmesh.compose.embedded import running_hub
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.fetch import StaticResolver
from tests.eventually import eventually
from tests.hub.conftest import ORIGIN, hub_settings


async def provision(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "feedmesh", "provision", *args, env=os.environ.copy(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()


@pytest.fixture
async def crawling_hub(tmp_path):
    config = FarmConfig(feeds=40, seed=11, faults="none", speed=3600.0, origin=ORIGIN)
    async with FarmServer(config) as farm, aiohttp.ClientSession() as session, \
            running_hub(hub_settings(str(tmp_path)), "127.0.0.1", 0,
                        resolver=StaticResolver({})) as (_hub, base):
        async with session.post(f"{base}/api/accounts", json={"name": "ann"}) as answer:
            token = (await answer.json())["token"]
        auth = {"Authorization": f"Bearer {token}"}
        async with session.post(f"{base}/api/subscriptions", json={"query": "law"},
                                headers=auth) as answer:
            assert answer.status in (200, 201), await answer.text()
        async with session.get(farm.opml_url) as answer:
            opml = await answer.read()
        async with session.post(f"{base}/api/opml", data=opml,
                                headers={**auth, "Content-Type": "text/xml"}) as answer:
            assert answer.status == 200, await answer.text()

        async def articles_flowing() -> bool:
            async with session.get(f"{base}/metrics") as answer:
                text = await answer.text()
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    if (sample.name == "feedmesh_tier_articles_in_total"
                            and sample.labels.get("tier") == "filter" and sample.value > 0):
                        return True
            return False

        await eventually(articles_flowing, what="articles reaching the filter")
        yield base


async def test_check_names_the_violations_and_their_next_decompositions(crawling_hub):
    code, out, err = await provision("--check", "--metrics", f"{crawling_hub}/metrics",
                                     "--seconds", "2", "--bandwidth-mbps", "0.0001",
                                     "--memory-mb", "1", "--json")
    assert code == 1, err
    report = json.loads(out)
    hub = crawling_hub.split("//")[1]
    loads = report["services"]
    assert loads[f"crawler@{hub}"]["in_bandwidth"] > 0
    assert loads[f"filter@{hub}"]["in_bandwidth"] > 0
    assert loads[f"hub@{hub}"]["memory"] > 10 * 2**20  # a real process's resident memory
    found = {(v["service"], v["resource"]): v for v in report["violations"]}
    # each violation gets the decomposition Figure 3 (derived) gives it
    assert found[(f"crawler@{hub}", "in_bandwidth")]["decomposition"] == "in"
    assert found[(f"filter@{hub}", "in_bandwidth")]["decomposition"] == "in"
    assert found[(f"reflector@{hub}", "memory")]["decomposition"] == "out"
    assert found[(f"hub@{hub}", "memory")]["decomposition"] == "tier"
    crawler = found[(f"crawler@{hub}", "in_bandwidth")]
    assert crawler["replicas"] >= crawler["load"] / crawler["limit"]


async def test_a_hub_within_its_limits_passes(crawling_hub):
    code, out, err = await provision("--check", "--metrics", crawling_hub, "--seconds", "1",
                                     "--bandwidth-mbps", "1000", "--memory-mb", "65536")
    assert code == 0, out + err
    assert "every service fits its limits" in out
    assert "crawler@" in out and "(estimated: cpu, memory)" in out


async def test_a_url_that_is_not_a_hub_is_one_line(crawling_hub):
    code, _, err = await provision("--check", "--metrics", "http://127.0.0.1:9/metrics",
                                   "--seconds", "1")
    assert code == 2 and "Traceback" not in err and "cannot read http://127.0.0.1:9" in err
