"""Push in the distributed deployment, on a real NATS server and a real PostgreSQL: `feedmesh
crawler` (crawler and filter), two `feedmesh reflector` processes each with its delivery worker,
and a `feedmesh web` process, each on a loopback address of its own, crawling a real farm. A
person subscribes a WebSub callback and adds webhooks through the web process; a callback server
on another loopback address receives the pushes from the reflectors' workers. A reflector
stopped with SIGTERM resumes without repeating anything; one killed with SIGKILL resumes from
its durable marks, losing nothing (it may repeat what it delivered just before the kill: at
least once)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import aiohttp

from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.feeds.parser import parse_feed
from feedmesh.websub.signature import verify
from tests.eventually import eventually
from tests.websub.subscriber import LoopbackSubscriber, loopback_subscriber

from .conftest import ORIGIN
from .test_distributed_faults import Role
from .test_external_reflectors import free_port

CRAWLER = "127.0.2.60"
REFLECTORS = ("127.0.2.61", "127.0.2.62")
WEB = "127.0.2.63"
CALLBACKS = "127.0.2.64"
QUERY = "people OR time OR world"


def _number(entry_id: str) -> int:
    """n of ``tag:feedmesh,2026:entry-<n>.<mark>``."""
    return int(entry_id.rsplit("-", 1)[1].split(".")[0])


def hooked(subscriber: LoopbackSubscriber, path: str) -> list[int]:
    """The entry ids a webhook received (and acknowledged), in the order they came."""
    return [_number(entry["id"]) for delivery in subscriber.to(path)
            if delivery.status == 200 for entry in json.loads(delivery.body)["entries"]]


async def test_web_processes_take_push_requests_and_reflector_workers_deliver(
        tmp_path, nats_url, postgres_url):
    data = tmp_path / "data"
    namespace = f"t{uuid.uuid4().hex[:10]}"
    common = ["--bus", nats_url, "--bus-namespace", namespace, "--log-level", "warning"]
    stored = ["--store", postgres_url]
    reflector_urls = [f"http://{a}:{free_port(a)}" for a in REFLECTORS]
    web_listen = f"{WEB}:{free_port(WEB)}"
    push = ["--allow-network", "127.0.0.0/8", "--push-retry-first", "0.2",
            "--push-retry-max", "0.5", "--push-retries", "1000"]
    crawler = Role("crawler", ["crawler", *common, *stored, "--data", str(data), "--host",
                               CRAWLER, "--port", "0", "--reflectors", "2",
                               "--external-reflectors", ",".join(reflector_urls), "--policy",
                               "interval", "--interval", "0.5", "--allow-network",
                               "127.0.0.0/8"], "feedmesh crawler:", tmp_path)
    reflectors = [Role(f"reflector{n}", ["reflector", *common, *stored, "--state", postgres_url,
                                         "--shard", f"{n}/2", "--data", str(data), "--listen",
                                         reflector_urls[n].removeprefix("http://"), *push],
                       f"feedmesh reflector {n}/2", tmp_path) for n in (0, 1)]
    web = Role("web", ["web", *common, *stored, "--data", str(data), "--reflectors",
                       ",".join(reflector_urls), "--listen", web_listen, *push],
               "feedmesh web on", tmp_path)
    roles = [crawler, *reflectors, web]
    config = FarmConfig(feeds=12, seed=11, faults="none", speed=3600.0, origin=ORIGIN)
    codes: dict[str, int] = {}
    async with FarmServer(config) as farm, aiohttp.ClientSession() as session, \
            loopback_subscriber(CALLBACKS) as callbacks:
        base = f"http://{web_listen}"

        async def call(method: str, path: str, auth: dict, body: Any = None) -> Any:
            async with session.request(method, base + path, json=body, headers=auth) as answer:
                assert answer.status < 300, (answer.status, await answer.text())
                return await answer.json() if answer.status != 204 else None

        try:
            for role in (crawler, *reflectors):
                role.start()
            # The crawler makes the key (in PostgreSQL) the web process reads: it is ready
            # once it has, and once it reaches its reflectors.
            for role in (crawler, *reflectors):
                await role.wait_ready()
            web.start()
            await web.wait_ready()
            auths = {}
            for name in ("ann", "bob"):  # accounts 1 and 2: reflectors 1 and 0
                async with session.post(f"{base}/api/accounts", json={"name": name}) as answer:
                    auths[name] = {"Authorization":
                                   f"Bearer {(await answer.json())['token']}"}
            subs = {name: (await call("POST", "/api/subscriptions", auth,
                                      {"query": QUERY, "keep": 100}))["subscription"]
                    for name, auth in auths.items()}
            # WebSub through the web process: verified from there, saved in PostgreSQL.
            topic = subs["ann"]["feed_urls"]["atom"]
            callbacks.want("subscribe", topic, "/ws")
            async with session.post(f"{base}/hub", data={
                    "hub.mode": "subscribe", "hub.topic": topic, "hub.secret": "ws secret",
                    "hub.callback": callbacks.callback("/ws")}) as answer:
                assert answer.status == 202, await answer.text()
            await eventually(lambda: any(v.path == "/ws" for v in callbacks.verifications))
            for name in ("ann", "bob"):
                await call("POST", f"/api/subscriptions/{subs[name]['id']}/webhooks",
                           auths[name], {"url": callbacks.callback(f"/hook-{name}")})
            # The web process sends a webhook's test delivery itself, and logs it.
            hooks = (await call("GET", f"/api/subscriptions/{subs['bob']['id']}/webhooks",
                                auths["bob"]))["webhooks"]
            await call("POST", f"/api/subscriptions/{subs['bob']['id']}/webhooks/"
                       f"{hooks[0]['id']}/test", auths["bob"])
            await eventually(lambda: callbacks.to("/hook-bob"), timeout=30)
            tested = callbacks.to("/hook-bob")[0]
            assert tested.headers["X-Feedmesh-Event"] == "test"
            assert json.loads(tested.body)["entries"] == []

            async def test_logged() -> bool:
                log = await call("GET", f"/api/subscriptions/{subs['bob']['id']}/webhooks/"
                                 f"{hooks[0]['id']}/deliveries", auths["bob"])
                return [(d["status"], d["entries"]) for d in log["deliveries"]] == [(200, 0)]

            await eventually(test_logged, timeout=30)
            # The web process shows what it saved (and what other processes did, within 1 s).
            listed = await call("GET", f"/api/subscriptions/{subs['ann']['id']}/websub",
                                auths["ann"])
            assert [s["callback"] for s in listed["subscribers"]] == [callbacks.callback("/ws")]
            # Its owner chooses sha1 through the web process; the workers read it from the store.
            changed = await call("PATCH", f"/api/subscriptions/{subs['ann']['id']}/websub/"
                                 f"{listed['subscribers'][0]['id']}", auths["ann"],
                                 {"signature": "sha1"})
            assert changed["subscriber"]["signature"] == "sha1"

            async with session.get(farm.opml_url) as answer:
                opml = await answer.read()
            async with session.post(f"{base}/api/opml", data=opml,
                                    headers=auths["ann"]) as answer:
                assert answer.status in (200, 201), await answer.text()
            # Each reflector's worker delivers its own subscription's matches.
            for path in ("/hook-ann", "/hook-bob", "/ws"):
                await eventually(lambda p=path: callbacks.to(p), timeout=120, interval=0.2)

            # A graceful restart of ann's reflector (1): its marks are written at the stop,
            # so nothing is sent twice.
            codes["reflector1-stop"] = await reflectors[1].stop()
            reflectors[1].start()
            await reflectors[1].wait_ready()
            before = len(hooked(callbacks, "/hook-ann"))
            await eventually(lambda: len(hooked(callbacks, "/hook-ann")) > before + 5,
                             timeout=120, interval=0.2)
            assert not [e for e, n in Counter(hooked(callbacks, "/hook-ann")).items() if n > 1]

            # The callbacks fail for a while: entries wait in the workers, retried; then
            # ann's reflector is killed (SIGKILL). What waited is nowhere but in its feed: the
            # restarted worker resends it from the marks it had written.
            failing_from = len(callbacks.to("/hook-ann"))
            callbacks.status = 503
            await eventually(lambda: len(callbacks.to("/hook-ann")) > failing_from + 3,
                             timeout=120, interval=0.2)
            await reflectors[1].kill()
            delivered_before_kill = set(hooked(callbacks, "/hook-ann"))
            failed = {_number(e["id"]) for d in callbacks.to("/hook-ann")
                      if d.status == 503 for e in json.loads(d.body)["entries"]}
            assert failed - delivered_before_kill  # entries that waited at the kill
            callbacks.status = 200
            reflectors[1].start()
            await reflectors[1].wait_ready()
            await eventually(lambda: len(set(hooked(callbacks, "/hook-ann"))) >
                             len(delivered_before_kill) + 5, timeout=120, interval=0.2)

            # The crawler stops (draining): the feeds stop changing; every entry each feed
            # holds from the webhook's creation on reaches its webhook.
            codes["crawler"] = await crawler.stop()
            for name in ("ann", "bob"):
                path = f"/hook-{name}"

                async def all_delivered(name: str = name, path: str = path) -> bool:
                    entries = (await call("GET", f"/api/subscriptions/{subs[name]['id']}"
                                          "/entries", auths[name]))["entries"]
                    held = {e["id"] for e in entries}
                    missing = held - set(hooked(callbacks, path))
                    if name == "ann":
                        assert failed - set(hooked(callbacks, path)) == set()
                    assert not missing, f"{len(missing)} of {len(held)} not delivered"
                    return bool(held)

                await eventually(all_delivered, timeout=120, interval=0.5)
            repeats = {e for e, n in Counter(hooked(callbacks, "/hook-ann")).items() if n > 1}
            assert repeats <= delivered_before_kill  # only across the kill, at least once
            assert not [e for e, n in Counter(hooked(callbacks, "/hook-bob")).items() if n > 1]
            # The fat pings to the WebSub callback are the feed as its topic serves it.
            last = callbacks.to("/ws")[-1]
            assert last.headers["Content-Type"].startswith("application/atom+xml")
            assert parse_feed(last.body, url=topic).feed.self_link == topic
            assert verify("ws secret", last.body, last.headers["X-Hub-Signature"]) == "sha1"
            log = await call("GET", f"/api/subscriptions/{subs['bob']['id']}/webhooks",
                             auths["bob"])
            assert log["webhooks"][0]["deliveries"][0]["status"] == 200
        finally:
            for role in (web, crawler, *reflectors):
                if role.process is not None and role.process.poll() is None:
                    codes[role.name] = await role.stop()
    logs = {role.name: role.text() for role in roles}
    assert all(code == 0 for code in codes.values()), (codes, logs)
    assert not any("Traceback" in text for text in logs.values()), logs
