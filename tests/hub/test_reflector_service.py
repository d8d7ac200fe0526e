"""A reflector's internal API on a real socket: the batch of versions a web process asks for,
and the batching of concurrent lookups into one round trip."""

from __future__ import annotations

import asyncio

import aiohttp
import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from feedmesh.bus.memory import MemoryBus
from feedmesh.clock import ManualClock
from feedmesh.hub.front.facade import FeedVersion
from feedmesh.hub.front.holders import VersionBatches
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector_api import MAX_BATCH, PREFIX
from feedmesh.hub.reflector_client import ReflectorClient, ReflectorUnavailable
from feedmesh.hub.tiers.reflector import Reflector
from feedmesh.hub.tiers.reflector_service import MAX_BODY_REQUEST, reflector_routes
from feedmesh.store.sqlite_reflector import SQLiteReflectorLog
from tests.eventually import eventually


def reflector_app(reflector: Reflector, metrics: HubMetrics) -> web.Application:
    """The reflector's API as a process serves it (its routes, its body limit)."""
    app = web.Application(client_max_size=MAX_BODY_REQUEST)
    app.add_routes(reflector_routes(reflector, metrics))
    return app


@pytest.fixture
async def served(tmp_path):
    """A reflector holding feeds 1..40 (generation 0; feed 5 at generation 2), its API on a
    loopback port, and a client of it."""
    reflector = Reflector(0, SQLiteReflectorLog(tmp_path / "r.db"), MemoryBus(),
                          ManualClock(100.0), HubMetrics())
    for sub_id in range(1, 41):
        reflector.register(sub_id, keep=10, generation=2 if sub_id == 5 else 0,
                           modified=float(sub_id))
    server = TestServer(reflector_app(reflector, HubMetrics()), host="127.0.0.1")
    await server.start_server()
    client = ReflectorClient(0, str(server.make_url("")))
    yield reflector, server, client
    await client.close()
    await server.close()
    reflector.close()


async def test_a_batch_answers_as_each_feed_alone(served):
    _, _, client = served
    pairs = [(1, 0), (5, 2), (5, 0), (40, 0), (41, 0), (3, 0)]
    alone = [await client.feed_version(*pair) for pair in pairs]
    assert await client.feed_versions(pairs) == alone
    assert alone[2] is None and alone[4] is None  # an old generation, a feed not held
    assert isinstance(alone[0], FeedVersion) and alone[0].modified == 1.0


async def test_lookups_at_the_same_time_share_round_trips(served):
    _, _, client = served
    batches = VersionBatches(client)
    keys = [(sub_id, 0) for sub_id in range(1, 41)] * 2  # each feed asked twice at once
    found = await asyncio.gather(*(batches.get(*key) for key in keys))
    assert found == [await client.feed_version(*key) for key in keys]
    assert batches.requests == 1  # asked in the same moment: one round trip
    # A lone lookup waits for nothing: its own request, at once.
    assert await batches.get(1, 0) == found[0]
    assert batches.requests == 2


async def test_lookups_that_arrive_during_a_request_go_together_in_the_next(tmp_path):
    reflector = Reflector(0, SQLiteReflectorLog(tmp_path / "r.db"), MemoryBus(),
                          ManualClock(100.0), HubMetrics())
    for sub_id in range(1, 41):
        reflector.register(sub_id, keep=10, generation=0)
    app = reflector_app(reflector, HubMetrics())
    gate, arrived = asyncio.Event(), asyncio.Event()

    @web.middleware
    async def held(request, handler):  # the reflector is slow to answer
        arrived.set()
        await gate.wait()
        return await handler(request)

    app.middlewares.append(held)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    client = ReflectorClient(0, str(server.make_url("")))
    try:
        batches = VersionBatches(client)
        first = asyncio.create_task(batches.get(1, 0))
        await arrived.wait()  # the first request is in flight, held by the reflector
        rest = [asyncio.create_task(batches.get(n, 0)) for n in range(2, 41)]
        await eventually(lambda: len(batches._waiting) == 39)
        gate.set()
        found = await asyncio.gather(first, *rest)
        assert found == [await client.feed_version(n, 0) for n in range(1, 41)]
        assert batches.requests == 2
    finally:
        await client.close()
        await server.close()
        reflector.close()


async def test_a_reader_leaving_does_not_cancel_the_answer_others_wait_for(served):
    _, _, client = served
    batches = VersionBatches(client)
    first = asyncio.create_task(batches.get(1, 0))
    second = asyncio.create_task(batches.get(1, 0))
    await asyncio.sleep(0)
    first.cancel()
    assert (await second) == await client.feed_version(1, 0)


async def test_every_waiter_hears_that_the_reflector_is_gone(served):
    _, server, client = served
    await server.close()
    batches = VersionBatches(client)
    results = await asyncio.gather(*(batches.get(n, 0) for n in range(1, 6)),
                                   return_exceptions=True)
    assert all(isinstance(r, ReflectorUnavailable) for r in results)
    assert "reflector 0 at http://127.0.0.1" in str(results[0])


@pytest.mark.parametrize(("body", "says"), [
    (b"\xc1", "a msgpack list of [sub_id, generation] pairs expected"),
    (msgspec.msgpack.encode([[1, "x"]]), "a msgpack list of [sub_id, generation] pairs"),
    (msgspec.msgpack.encode([[1, 0]] * (MAX_BATCH + 1)), f"at most {MAX_BATCH}"),
])
async def test_a_bad_batch_is_refused_with_the_reason(served, body, says):
    _, server, _ = served
    async with aiohttp.ClientSession() as session, session.post(
            str(server.make_url(PREFIX + "/versions")), data=body) as answer:
        assert answer.status == 400
        assert says in await answer.text()
