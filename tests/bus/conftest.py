"""The implementations of the Bus port that tests/bus/test_contract.py runs against.

The JetStream bus runs against a real ``nats-server`` this fixture starts on a free loopback
port (one per test session and worker), unless ``FEEDMESH_TEST_NATS`` names one; each test gets
a namespace of its own on it, so tests never see each other's streams.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from feedmesh.bus import Bus
from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.bus.memory import MemoryBus
from feedmesh.bus.nats_server import LocalNats


@pytest.fixture(scope="session")
def nats_url(tmp_path_factory) -> Iterator[str]:
    given = os.environ.get("FEEDMESH_TEST_NATS")
    if given:
        yield given
        return
    server = LocalNats(tmp_path_factory.mktemp("nats")).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(params=["memory", "jetstream"])
async def bus(request) -> AsyncIterator[Bus]:
    if request.param == "memory":
        implementation: Bus = MemoryBus(capacity_bytes=64 * 1024)
    else:
        url = request.getfixturevalue("nats_url")
        implementation = await JetStreamBus.connect(
            url, namespace=f"t{uuid.uuid4().hex[:12]}", capacity_bytes=64 * 1024)
    yield implementation
    await implementation.close()
