"""`feedmesh up` / `stats --up` / `down`: a hub as several processes on this machine (its own NATS
server, the crawler keeping the hub's state in a real PostgreSQL, two filter processes reading the
subscriptions from there, two reflector processes keeping their logs there, two web processes)
crawling a real farm, seen in one table, stopped cleanly."""

from __future__ import annotations

import asyncio
import json
import sys

import aiohttp

from feedmesh.farm import FarmConfig, FarmServer
from tests.eventually import eventually
from tests.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures

ORIGIN = 1_760_000_000.0


async def feedmesh(*argv: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "feedmesh", *argv, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 300)
    return process.returncode, out.decode(), err.decode()


async def test_up_runs_a_topology_that_stats_shows_and_down_stops(tmp_path, postgres_url):
    data = tmp_path / "topology"
    config = FarmConfig(feeds=20, seed=3, faults="none", speed=3600.0, origin=ORIGIN)
    async with FarmServer(config) as farm, aiohttp.ClientSession() as session:
        up = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "feedmesh", "up", "--data", str(data), "--filters", "2",
            "--reflectors", "2", "--web", "2", "--crawlers", "2",
            "--port", "0", "--opml", farm.opml_url, "--allow-network", "127.0.0.0/8",
            "--store", postgres_url,
            stderr=asyncio.subprocess.PIPE)
        lines: list[str] = []

        async def read() -> None:
            while line := await up.stderr.readline():
                lines.append(line.decode())

        reader = asyncio.create_task(read())
        try:
            await eventually(lambda: any(x.startswith("feedmesh up: web UI at") for x in lines)
                             or up.returncode is not None, timeout=120)
            ready = next((x for x in lines if x.startswith("feedmesh up: web UI at")), None)
            assert ready is not None, "".join(lines)
            web = ready.split()[5].rstrip("/")
            async with session.post(f"{web}/api/accounts", json={"name": "ann"}) as answer:
                token = (await answer.json())["token"]
            auth = {"Authorization": f"Bearer {token}"}
            async with session.post(f"{web}/api/subscriptions", headers=auth,
                                    json={"query": "people OR time OR world"}) as answer:
                assert answer.status == 201, await answer.text()
                sub = (await answer.json())["subscription"]["id"]

            async def filled() -> bool:  # matched by the filter processes
                async with session.get(f"{web}/api/subscriptions/{sub}/entries",
                                       headers=auth) as answer:
                    body = await answer.json()
                    assert answer.status == 200, body
                    return len(body["entries"]) >= 3

            await eventually(filled, timeout=120, interval=0.5)  # within the API rate limit
            code, out, err = await feedmesh("stats", "--up", str(data), "--json")
            assert code == 0, err
            rows = json.loads(out)
            assert sorted(row["role"] for row in rows) == [
                "crawler", "crawler", "filter", "filter", "nats", "reflector", "reflector", "web",
                "web"]
            assert all(row["alive"] and row["rss_mb"] > 0 for row in rows)
            filters = [row for row in rows if row["role"] == "filter"]
            assert sorted(row["shard"] for row in filters) == ["0/2", "1/2"]
            assert all(row["queue_messages"] is not None for row in filters)
            reflectors = [row for row in rows if row["role"] == "reflector"]
            assert sorted(row["shard"] for row in reflectors) == ["0/2", "1/2"]
            assert all(row["queue_messages"] is not None for row in reflectors)
            code, _, err = await feedmesh("stats", "--up", str(data))  # the table, for a person
            assert code == 0, err
            code, _, err = await feedmesh("down", "--data", str(data))
            assert code == 0 and "stopped" in err, err
            assert await asyncio.wait_for(up.wait(), 120) == 0
        finally:
            if up.returncode is None:
                up.terminate()
                await up.wait()
            await reader
    text = "".join(lines)
    assert "Traceback" not in text, text
    assert not (data / "up.json").exists()


async def test_up_refuses_what_cannot_work_and_down_without_up_is_one_line(tmp_path):
    code, _, err = await feedmesh("up", "--data", str(tmp_path), "--crawlers", "2")
    assert code == 2 and err.strip() == (
        "feedmesh up: several crawlers share one ingest store: give --store postgresql://... "
        "(SQLite takes one writer at a time)")
    code, _, err = await feedmesh("down", "--data", str(tmp_path))
    assert code == 2 and err.startswith("feedmesh down: no running topology in") and \
        len(err.strip().splitlines()) == 1
