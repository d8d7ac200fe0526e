"""`feedmesh up` supervises its roles: a filter, the reflector, the crawler and the web process,
each killed with SIGKILL in turn, come back by themselves (up.json and `stats --up --json` show
each one restarted once, with a new pid); the hub goes on matching and serving; the reflector's
feeds answer while it is down (503 feed_unavailable with Retry-After, never a refused
connection); and, checked offline once `down` drained it, every stored entry that matches a
subscription is held by the reflector once, none lost, none doubled (the oracle of
tests/hub/test_distributed_faults.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import aiohttp

from feedmesh.compose import open_hub_state
from feedmesh.farm import FarmConfig, FarmServer
from tests.eventually import eventually
from tests.hub.test_distributed_faults import KEEP, QUERIES, held, oracle
from tests.upprocess import running_up

from .test_up import ORIGIN, feedmesh


def subscriptions(state_at: str) -> dict[int, tuple[str, int]]:
    """One account with every query, on the one reflector: id -> (query, reflector)."""
    state = open_hub_state(state_at)
    account, _ = state.create_account("ann", 1.0)
    subs = {}
    for query in QUERIES:
        sub = state.add_subscription(account.id, name="", query=query, keep=KEEP, reflector=0,
                                     now=1.0)
        subs[sub.id] = (query, 0)
    state.close()
    return subs


def row(data: Path, role: str) -> dict:
    listing = json.loads((data / "up.json").read_text())
    return next(p for p in listing["processes"] if p["role"] == role)


async def test_killed_roles_come_back_by_themselves_and_lose_nothing(tmp_path):
    data = tmp_path / "up"
    (data / "hub").mkdir(parents=True, mode=0o700)
    subs = subscriptions(str(data / "hub" / "hub.db"))  # before anything is crawled
    config = FarmConfig(feeds=20, seed=5, faults="none", speed=3600.0, origin=ORIGIN)
    async with FarmServer(config) as farm, aiohttp.ClientSession() as session, running_up(
            "--data", str(data), "--store", "sqlite", "--filters", "1", "--reflectors", "1",
            "--port", "0", "--crawl-interval", "0.5", "--opml", farm.opml_url,
            "--allow-network", "127.0.0.0/8", timeout=120) as up:
        web = up.web
        assert (data / "up.json").stat().st_mode & 0o077 == 0
        async with session.post(f"{web}/api/accounts", json={"name": "bob"}) as answer:
            auth = {"Authorization": f"Bearer {(await answer.json())['token']}"}
        async with session.post(f"{web}/api/subscriptions", headers=auth,
                                json={"query": "people OR time OR world"}) as answer:
            assert answer.status == 201, await answer.text()
            sub = (await answer.json())["subscription"]
        rss = sub["feed_urls"]["rss"]

        async def entry_ids() -> set[int]:
            async with session.get(f"{web}/api/subscriptions/{sub['id']}/entries",
                                   headers=auth) as answer:
                assert answer.status == 200, await answer.text()
                return {e["id"] for e in (await answer.json())["entries"]}

        async def matching_goes_on() -> None:
            """A newly matched entry reaches the subscription, through the web."""
            seen = await entry_ids()
            await eventually(lambda: _more(entry_ids, seen), timeout=60, interval=0.5)

        await matching_goes_on()
        answers: list[tuple[int, str, str]] = []
        web_pid = row(data, "web")["pid"]
        for role in ("filter", "reflector", "crawler", "web"):
            before = row(data, role)
            assert before["state"] == "running" and before["restarts"] == 0, before
            os.kill(before["pid"], signal.SIGKILL)
            killed = time.monotonic()

            def back(role: str = role, pid: int = before["pid"]) -> bool:
                now = row(data, role)
                return now["pid"] != pid and now["state"] == "running" and \
                    now["restarts"] == 1

            while role == "reflector" and not back():  # its feeds answer meanwhile
                async with session.get(rss) as answer:
                    answers.append((answer.status, answer.headers.get("Retry-After", ""),
                                    await answer.text()))
                await asyncio.sleep(0.3)
            await eventually(back, timeout=60, what=f"{role} restarted by up")
            assert time.monotonic() - killed < 30
            await matching_goes_on()
            if role != "web":  # the web process served throughout the others' restarts
                assert row(data, "web")["pid"] == web_pid
        assert answers and all(status in (200, 304, 429, 503) for status, _, _ in answers), \
            answers
        for status, retry, body in answers:
            if status == 503:
                assert retry.isdigit() and "feed_unavailable" in body, (retry, body)

        code, out, err = await feedmesh("stats", "--up", str(data), "--json")
        assert code == 0, err
        rows = {r["role"]: r for r in json.loads(out)}
        for role in ("filter", "reflector", "crawler", "web"):
            assert rows[role]["restarts"] == 1 and rows[role]["state"] == "running", rows[role]
            assert rows[role]["alive"], rows[role]
        assert rows["nats"]["restarts"] == 0
        code, _, err = await feedmesh("down", "--data", str(data))
        assert code == 0, err
        assert await asyncio.wait_for(up.process.wait(), 120) == 0
    text = up.text()
    for name in ("filter 0/1", "reflector 0/1", "crawler 0/1", "web 0"):
        assert f"feedmesh up: {name} exited with status -9; starting it again in" in text, text
        assert f"feedmesh up: {name} is back (pid " in text, text
    assert "Traceback" not in text, text
    truth = oracle(str(data / "hub" / "feedmesh.db"), subs)
    assert truth.twice == 0
    lost = duplicated = 0
    for sub_id, pairs in held(str(data / "hub" / "reflector-0.db"), 0, subs).items():
        ids = [entry_id for entry_id, _ in pairs]
        duplicated += len(ids) - len(set(ids))
        lost += len(truth.want[sub_id] - set(ids))
    assert sum(len(w) for w in truth.want.values()) > 50  # worth checking
    assert (lost, duplicated) == (0, 0)


async def _more(entry_ids, seen: set[int]) -> bool:
    return bool(await entry_ids() - seen)


async def test_stats_up_shows_a_role_left_down_by_its_crash_loop(tmp_path):
    """A listing as up writes it once a filter's crash loop left it down: stats --up says so,
    in the table and in --json, beside the roles that run."""
    listing = {"pid": os.getpid(), "web": "http://127.0.0.1:1", "processes": [
        {"role": "filter", "shard": "0/2", "pid": 2**22 + 7, "state": "down", "restarts": 4},
        {"role": "web", "pid": os.getpid(), "state": "running", "restarts": 1}]}
    (tmp_path / "up.json").write_text(json.dumps(listing))
    code, out, err = await feedmesh("stats", "--up", str(tmp_path), "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["role"], r["state"], r["restarts"], r["alive"]) for r in rows] == [
        ("filter", "down", 4, False), ("web", "running", 1, True)]
    code, out, err = await feedmesh("stats", "--up", str(tmp_path))
    assert code == 0, err
    line = next(x for x in out.splitlines() if "filter" in x)
    assert "down" in line and " 4 " in line, out
