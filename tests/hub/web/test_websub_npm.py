"""Interop with software no one here wrote: the npm ``pubsubhubbub`` package's subscriber
(pinned in scripts/npm-test-packages, installed from the npm registry by the test setup),
running in node on its own loopback address, subscribes to a feedmesh personalized feed through
``POST /hub``, answers our verification of intent, and receives the feed when the farm posts an
entry the subscription matches.

Without a secret: this version sends the hub ``HMAC-SHA1(secret, topic)`` as ``hub.secret`` but
checks deliveries against the secret itself, so no hub's signed delivery can pass its check (it
drops them silently with a 202); the signed path is covered by websub.rocks test 101 in
test_websub_hub.py."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
from pathlib import Path

from feedmesh.feeds.parser import parse_feed
from feedmesh.hub.entry_ids import entry_id_in
from tests.eventually import eventually
from tests.hub.web.conftest import filled_subscription
from tests.interop import node_modules

SCRIPT = Path(__file__).with_name("npm_subscriber.js")
HOST = "127.0.0.3"


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


async def _next_event(process: asyncio.subprocess.Process, wanted: str,
                      timeout: float) -> dict:
    """The subscriber's next line whose event is ``wanted`` (a failure event fails the test)."""
    async def read() -> dict:
        while True:
            line = await process.stdout.readline()
            assert line, f"the npm subscriber exited before {wanted!r}"
            event = json.loads(line)
            assert event["event"] not in ("denied", "error"), event
            if event["event"] == wanted:
                return event

    return await asyncio.wait_for(read(), timeout)


async def test_the_npm_pubsubhubbub_subscriber_receives_a_matching_entry(hub_env, ann):
    modules = node_modules("pubsubhubbub")
    sub = await filled_subscription(hub_env, ann)
    topic = sub["feed_urls"]["atom"]
    port = _free_port(HOST)
    process = await asyncio.create_subprocess_exec(
        shutil.which("node") or "node", str(SCRIPT), f"{hub_env.base}/hub", topic, HOST,
        str(port), stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "NODE_PATH": str(modules)})
    try:
        await _next_event(process, "listening", 30.0)
        verified = await _next_event(process, "subscribe", 30.0)  # our GET, its echo
        assert verified["topic"] == topic
        (target,) = await eventually(lambda: hub_env.hub.front.push_targets(sub["id"]))
        assert target.url.startswith(f"http://{HOST}:{port}/callback?topic=")
        delivered = await _next_event(process, "feed", 90.0)
        assert delivered["topic"] == topic and delivered["hub"] == f"{hub_env.base}/hub"
        assert delivered["type"].startswith("application/atom+xml")
        parsed = parse_feed(delivered["feed"].encode(), url=topic)
        assert parsed.error is None and parsed.feed.self_link == topic
        pushed = {e.guid for e in parsed.entries}
        held = {entry_id_in(await hub_env.hub.front.subscription(sub["id"]), i.entry_id)
                for i in await hub_env.hub.front.feed_items(sub["id"])}
        assert pushed & held  # the feed as it is now: what the subscription holds
        assert any(word in f"{e.title} {e.summary}".lower()
                   for e in parsed.entries for word in ("government", "music", "water"))
    finally:
        process.kill()
        await process.wait()
