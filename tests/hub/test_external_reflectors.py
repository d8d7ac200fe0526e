"""The hub with its reflectors in other processes: `feedmesh serve --external-reflectors` (crawler,
filter and web here) and two `feedmesh reflector` processes, each on a loopback address of its
own, meeting on a real NATS server, crawling a real farm. Private feeds are served through the
hub's web from the reflectors' memory; a reflector killed with SIGKILL answers, once restarted,
the same entries and the same validators, and its feeds answer 503 (not an error page or a
traceback) while it is down."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import uuid

import aiohttp

from feedmesh.compose.embedded import running_hub
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.fetch import StaticResolver
from feedmesh.store.sqlite_hub import SQLiteHubState
from tests.eventually import eventually

from .conftest import ORIGIN, hub_settings
from .test_hub import QUERY, expected_newest, held_newest

ADDRESSES = ("127.0.2.11", "127.0.2.12")


def free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def start_reflector(tmp_path, nats_url: str, namespace: str, number: int,
                    listen: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "feedmesh", "reflector", "--bus", nats_url, "--bus-namespace",
         namespace, "--state", str(tmp_path / "hub.db"), "--shard", f"{number}/2",
         "--data", str(tmp_path), "--listen", listen, "--log-level", "warning"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    line = process.stderr.readline()
    assert line.startswith(f"feedmesh reflector {number}/2:"), line + process.stderr.read()
    return process


async def fetch(session: aiohttp.ClientSession, url: str,
                etag: str = "") -> tuple[int, str, bytes]:
    headers = {"If-None-Match": etag} if etag else {}
    async with session.get(url, headers=headers) as answer:
        return answer.status, answer.headers.get("ETag", ""), await answer.read()


async def test_reflectors_in_their_own_processes_serve_and_survive_a_kill(tmp_path, nats_url):
    namespace = f"t{uuid.uuid4().hex[:10]}"
    SQLiteHubState(tmp_path / "hub.db").close()  # the reflectors read it; the hub fills it
    listens = [f"{host}:{free_port(host)}" for host in ADDRESSES]
    config = FarmConfig(feeds=30, seed=7, faults="none", speed=3600.0, origin=ORIGIN)
    settings = hub_settings(str(tmp_path), reflectors=2,
                            external_reflectors=tuple(f"http://{a}" for a in listens))
    reflectors = [start_reflector(tmp_path, nats_url, namespace, n, listens[n]) for n in (0, 1)]
    try:
        async with (FarmServer(config) as farm, aiohttp.ClientSession() as session,
                    running_hub(settings, "127.0.2.10", 0, resolver=StaticResolver({}),
                                bus=nats_url, bus_namespace=namespace) as (hub, base)):
            subs = []
            for name in ("ann", "bob"):  # accounts 1 and 2: reflectors 1 and 0
                account, _ = await hub.front.create_account(name)
                sub = await hub.front.add_subscription(account.id, name="", query=QUERY,
                                                       keep=5000)
                subs.append(sub)
            assert sorted(s.reflector for s in subs) == [0, 1]
            await hub.add_feeds([farm.feed_url(i) for i in range(30)])
            urls = [f"{base}/f/{hub.front.feed_token(s)}.rss" for s in subs]

            async def both_filled() -> bool:
                return all([len(await hub.front.feed_items(s.id)) >= 5 for s in subs])

            await eventually(both_filled, timeout=60)
            await hub.stop_crawling()  # no more crawling; what was published is drained below
            await hub.crawler.aclose()
            assert await hub.drain(timeout=60)
            before = [await fetch(session, url) for url in urls]
            assert [status for status, _, _ in before] == [200, 200]
            assert all(etag for _, etag, _ in before)

            # Reflector 0 dies without a word; its feed is unavailable, not broken.
            zero = next(n for n, s in enumerate(subs) if s.reflector == 0)
            reflectors[0].send_signal(signal.SIGKILL)
            reflectors[0].wait(30)
            # (Within a second: a web process reuses a feed's version that long.)
            async def unavailable() -> bool:
                async with session.get(urls[zero]) as answer:
                    body = await answer.read()
                    retry = answer.headers.get("Retry-After", "")
                if answer.status != 503:
                    return False
                # a reader is told when to come back: an up restarts the reflector
                assert b'"feed_unavailable"' in body and retry.isdigit() and \
                    1 <= int(retry) <= 30, (body, retry)
                return True

            await eventually(unavailable, timeout=10, interval=0.5)  # under the rate limit
            other = 1 - zero
            assert (await fetch(session, urls[other], before[other][1]))[0] == 304
            reflectors[0] = start_reflector(tmp_path, nats_url, namespace, 0, listens[0])
            # The same validators: a reader's copy is still current...
            assert (await fetch(session, urls[zero], before[zero][1]))[0] == 304
            # ...and the same content for one that has none.
            again = await fetch(session, urls[zero])
            assert again[:2] == (200, before[zero][1])
            assert again[2] == before[zero][2]
    finally:
        for process in reflectors:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        errors = [process.communicate(timeout=60)[1] for process in reflectors]
    assert [process.returncode for process in reflectors] == [0, 0], errors
    assert not any("Traceback" in text for text in errors), errors
    for sub in subs:  # exactly the reference matcher's entries, each once
        final = held_newest(tmp_path, sub.id, 5000, reflector=sub.reflector)
        assert len(final) == len(set(final)) > 5
        assert final == expected_newest(tmp_path, QUERY, 5000)


async def test_external_reflectors_need_a_nats_bus_and_one_url_each(tmp_path):
    import pytest

    from feedmesh.compose.embedded import embedded_hub

    with pytest.raises(ValueError, match="need a NATS bus"):
        embedded_hub(hub_settings(str(tmp_path), external_reflectors=("http://127.0.0.1:1",)))
    with pytest.raises(ValueError, match="2 reflectors need 2 URLs, got 1"):
        hub_settings(str(tmp_path), reflectors=2, external_reflectors=("http://127.0.0.1:1",))
