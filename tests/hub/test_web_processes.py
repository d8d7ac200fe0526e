"""The hub with no web server in the crawling process: `feedmesh crawler` (the crawler and the
filter tier), two `feedmesh reflector` processes and two `feedmesh web` processes, each on a
loopback address of its own, meeting on a real NATS server. A person signs up and follows a
farm's feeds through one web process; the crawler, told on the `feeds` subject, crawls them;
the person's private feed answers the same entries and the same validators from either web
process (both behind one public name), and the sources list shows how their fetching goes."""

from __future__ import annotations

import uuid

import aiohttp

from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.hub.front.holders import VERSION_TTL_S
from tests.eventually import eventually

from .conftest import ORIGIN
from .test_distributed_faults import Role
from .test_external_reflectors import free_port

REFLECTORS = ("127.0.2.31", "127.0.2.32")
WEBS = ("127.0.2.41", "127.0.2.42")


async def test_two_web_processes_serve_the_same_feeds(tmp_path, nats_url):
    data = tmp_path / "data"
    namespace = f"t{uuid.uuid4().hex[:10]}"
    common = ["--bus", nats_url, "--bus-namespace", namespace, "--log-level", "warning"]
    reflector_urls = [f"http://{a}:{free_port(a)}" for a in REFLECTORS]
    web_listens = [f"{a}:{free_port(a)}" for a in WEBS]
    crawler = Role("crawler", ["crawler", *common, "--data", str(data), "--host", "127.0.2.30",
                               "--port", "0", "--reflectors", "2", "--external-reflectors",
                               ",".join(reflector_urls), "--policy", "interval", "--interval",
                               "0.5", "--allow-network", "127.0.0.0/8"],
                   "feedmesh crawler:", tmp_path)
    reflectors = [Role(f"reflector{n}", ["reflector", *common, "--state", str(data / "hub.db"),
                                         "--shard", f"{n}/2", "--data", str(data), "--listen",
                                         reflector_urls[n].removeprefix("http://")],
                       f"feedmesh reflector {n}/2", tmp_path) for n in (0, 1)]
    # One public name for both, as behind a load balancer: the feeds' own links are the same.
    public = "http://feeds.example.org"
    webs = [Role(f"web{n}", ["web", *common, "--data", str(data), "--reflectors",
                             ",".join(reflector_urls), "--listen", web_listens[n],
                             "--base-url", public],
                 "feedmesh web on", tmp_path) for n in (0, 1)]
    config = FarmConfig(feeds=12, seed=9, faults="none", speed=3600.0, origin=ORIGIN)
    roles = [crawler, *reflectors, *webs]
    codes = {}
    async with FarmServer(config) as farm, aiohttp.ClientSession() as session:
        try:
            crawler.start()  # makes the databases and the key the others read
            await eventually(lambda: (data / "feed-secret.key").exists(), timeout=60)
            for role in (*reflectors, *webs):
                role.start()
            for role in roles:
                await role.wait_ready()
            one, two = (f"http://{listen}" for listen in web_listens)
            async with session.post(f"{one}/api/accounts", json={"name": "ann"}) as answer:
                assert answer.status == 201, await answer.text()
                auth = {"Authorization": f"Bearer {(await answer.json())['token']}"}
            async with session.get(farm.opml_url) as answer:
                opml = await answer.read()
            async with session.post(f"{one}/api/opml", data=opml, headers=auth) as answer:
                assert answer.status in (200, 201), await answer.text()
            async with session.post(f"{two}/api/subscriptions", headers=auth,
                                    json={"query": "people OR time OR world",
                                          "keep": 50}) as answer:
                assert answer.status == 201, await answer.text()
                sub = (await answer.json())["subscription"]

            async def filled() -> bool:  # through the other web process
                async with session.get(f"{one}/api/subscriptions/{sub['id']}/entries",
                                       headers=auth) as answer:
                    body = await answer.json()
                    assert answer.status == 200, body
                    return len(body["entries"]) >= 5

            await eventually(filled, timeout=90, interval=0.5)
            # A web process takes push requests itself (tests/hub/test_push_distributed.py),
            # behind the address guard: without --allow-network, loopback is refused.
            async with session.post(f"{one}/hub", data={
                    "hub.mode": "subscribe", "hub.topic": sub["feed_urls"]["atom"],
                    "hub.callback": "http://127.0.2.99:9/cb"}) as answer:
                assert answer.status == 400, await answer.text()
                assert (await answer.json())["error"]["code"] == "callback_refused"
            async with session.post(f"{two}/api/subscriptions/{sub['id']}/webhooks",
                                    headers=auth, json={"url": "http://127.0.2.99:9/"}) as answer:
                assert answer.status == 400, await answer.text()
                assert (await answer.json())["error"]["code"] == "callback_refused"
            async with session.get(f"{two}/api/sources", headers=auth) as answer:
                sources = (await answer.json())["sources"]
            assert len(sources) == 12
            assert any(source["last_outcome"] for source in sources)  # what the crawler stored

            # The crawler stops (draining what it published); the matches already on the bus
            # still reach the reflectors, and each web process reuses a feed's version for
            # VERSION_TTL_S (1 s): once the feed is quiet both answer the same bytes and ETag.
            # Polled slower than the TTL, within the feed's burst of 10 polls per reader.
            codes["crawler"] = await crawler.stop()
            rss = sub["feed_urls"]["rss"].removeprefix(public)

            async def agree() -> tuple[int, str, bytes]:
                answers = []
                for base in (one, two):
                    async with session.get(base + rss) as answer:
                        answers.append((answer.status, answer.headers.get("ETag", ""),
                                        await answer.read()))
                assert answers[0][0] == answers[1][0] == 200, [a[:2] for a in answers]
                assert answers[0] == answers[1], [a[:2] for a in answers]
                return answers[0]

            _, etag, _ = await eventually(agree, timeout=20, interval=VERSION_TTL_S + 0.2)
            async with session.get(one + rss, headers={"If-None-Match": etag}) as answer:
                assert answer.status == 304
        finally:
            for role in (crawler, *webs, *reflectors):
                if role.process is not None and role.name not in codes:
                    codes[role.name] = await role.stop()
    logs = {role.name: role.text() for role in roles}
    assert codes == dict.fromkeys(codes, 0), logs
    assert not any("Traceback" in text for text in logs.values()), logs
