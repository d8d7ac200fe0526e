"""`feedmesh provision --check` against a topology of separate processes (`feedmesh up`: NATS, a
crawler, a filter, a reflector, a web process) crawling a real farm on loopback: each process is
checked as its role, from its own /metrics, and a violation names the process and the next
decomposition Figure 3 (derived) gives its role."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from feedmesh.farm import FarmConfig, FarmServer
from tests.eventually import eventually
from tests.upprocess import running_up

ORIGIN = 1_760_000_000.0


async def feedmesh(*argv: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "feedmesh", *argv, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()


# One topology for the module's tests (starting one takes ~15 s here).
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up_topology():
    data = Path(tempfile.mkdtemp(prefix="feedmesh-test-check-up-"))
    code, plan, err = await feedmesh("provision", "--feeds", "30", "--subs", "1000", "--json")
    assert code == 0, err
    (data / "plan.json").write_text(plan)
    config = FarmConfig(feeds=30, seed=5, faults="none", speed=3600.0, origin=ORIGIN)
    async with FarmServer(config) as farm, aiohttp.ClientSession() as session, running_up(
            "--data", str(data / "up"), "--topology", str(data / "plan.json"), "--store",
            "sqlite", "--port", "0", "--opml", farm.opml_url, "--allow-network", "127.0.0.0/8",
            "--crawl-interval", "2", "--delivery", "article", timeout=90) as up:
        web = up.web
        async with session.post(f"{web}/api/accounts", json={"name": "ann"}) as answer:
            body = await answer.json()
            assert "token" in body, body
            token = body["token"]
        async with session.post(f"{web}/api/subscriptions",
                                headers={"Authorization": f"Bearer {token}"},
                                json={"query": "people OR time OR world"}) as answer:
            assert answer.status == 201, await answer.text()
        listing = json.loads((data / "up" / "up.json").read_text())
        filter_metrics = next(p["metrics"] for p in listing["processes"]
                              if p["role"] == "filter")

        async def matched() -> bool:  # articles flow crawler -> filter -> reflector
            async with session.get(filter_metrics) as answer:
                text = await answer.text()
            return any(line.startswith('feedmesh_tier_bytes_out_total{tier="filter"}')
                       and float(line.split()[-1]) > 0 for line in text.splitlines())

        await eventually(matched, timeout=60, interval=0.5)
        yield data / "up", listing
    shutil.rmtree(data, ignore_errors=True)
    assert "Traceback" not in up.text(), up.text()


async def test_each_process_is_checked_as_its_role(up_topology):
    folder, listing = up_topology
    code, out, err = await feedmesh("provision", "--check", "--up", str(folder), "--seconds",
                                    "3", "--bandwidth-mbps", "0.000001", "--memory-mb", "20",
                                    "--cpu", "0.0001", "--json")
    assert code == 1, out + err
    report = json.loads(out)
    services = report["services"]
    pids = {p["role"]: p["pid"] for p in listing["processes"]}
    by_role = {load["role"]: (name, load) for name, load in services.items()}
    assert set(by_role) == {"crawler", "filter", "reflector"}  # not nats, web
    for role, (name, load) in by_role.items():
        assert name == f"{role} 0/1@pid {pids[role]}"
        assert load["cpu"] > 0, (role, load)  # the process's own CPU time, per second
        assert load["memory"] > 20 * 2**20  # a real process's resident memory
        assert report["estimated"][name] == []  # every figure measured
    assert by_role["crawler"][1]["in_bandwidth"] > 0  # bytes from publishers
    assert by_role["crawler"][1]["out_bandwidth"] > 0  # new entries to the bus
    assert by_role["filter"][1]["in_bandwidth"] > 0
    assert by_role["filter"][1]["out_bandwidth"] > 0  # match messages
    found = {(v["role"], v["resource"]): v for v in report["violations"]}
    # each role's violations get its own decomposition (Figure 3, derived)
    for role, resource, kind in (("crawler", "in_bandwidth", "in"), ("crawler", "cpu", "in"),
                                 ("crawler", "memory", "in"), ("filter", "in_bandwidth", "in"),
                                 ("filter", "cpu", "out"), ("filter", "memory", "out"),
                                 ("reflector", "cpu", "out"), ("reflector", "memory", "out")):
        violation = found[(role, resource)]
        assert violation["decomposition"] == kind, violation
        assert violation["service"] == by_role[role][0]
        assert violation["replicas"] >= violation["load"] / violation["limit"]
    code, out, err = await feedmesh("provision", "--check", "--up", str(folder), "--seconds",
                                    "2", "--bandwidth-mbps", "0.000001", "--memory-mb", "20")
    assert code == 1
    crawler = by_role["crawler"][0]
    assert f"VIOLATION {crawler} in-bandwidth" in out and "next in-decomposition" in out, out


async def test_role_tagged_urls_and_generous_limits(up_topology):
    folder, listing = up_topology
    urls = [f"{p['role']}={p['metrics']}" for p in listing["processes"]
            if p["role"] in ("crawler", "filter", "reflector")]
    limits = ["--seconds", "1", "--bandwidth-mbps", "1000", "--memory-mb", "65536", "--cpu", "4"]
    # up's reflectors ask for their token, their /metrics too
    code, out, err = await feedmesh("provision", "--check", "--metrics", *urls, *limits)
    assert code == 2 and "401" in err, out + err
    code, out, err = await feedmesh("provision", "--check", "--metrics", *urls, *limits,
                                    "--reflector-token-file",
                                    str(Path(folder) / "secrets" / "reflector.token"))
    assert code == 0, out + err
    assert "every service fits its limits" in out
    assert sum(line.startswith(("crawler@", "filter@", "reflector@"))
               for line in out.splitlines()) == 3, out


async def test_bad_inputs_are_one_line(tmp_path):
    code, _, err = await feedmesh("provision", "--check", "--up", str(tmp_path))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "no running `feedmesh up` topology there" in err
    code, _, err = await feedmesh("provision", "--check", "--metrics", "crawlr=http://x/metrics")
    assert code == 2 and "a role is one of crawler, filter, reflector" in err, err
