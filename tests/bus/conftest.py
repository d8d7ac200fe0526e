"""The implementations of the Bus port that tests/bus/test_contract.py runs against.

The JetStream bus runs against the real ``nats-server`` of the ``nats_url`` fixture
(tests/conftest.py), and against the three-node cluster of ``nats_cluster`` with streams
replicated three times, connected to all three nodes with the admin's key; each test gets a
namespace of its own, so tests never see each other's streams.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from feedmesh.bus import Bus
from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.bus.memory import MemoryBus


@pytest.fixture(params=["memory", "jetstream", "jetstream-cluster"])
async def bus(request) -> AsyncIterator[Bus]:
    namespace = f"t{uuid.uuid4().hex[:12]}"
    if request.param == "memory":
        implementation: Bus = MemoryBus(capacity_bytes=64 * 1024)
    elif request.param == "jetstream":
        url = request.getfixturevalue("nats_url")
        implementation = await JetStreamBus.connect(
            url, namespace=namespace, capacity_bytes=64 * 1024)
    else:
        cluster, credentials = request.getfixturevalue("nats_cluster")
        implementation = await JetStreamBus.connect(
            cluster.url, namespace=namespace, capacity_bytes=64 * 1024, replicas=3,
            credentials=credentials.path("admin"))
    yield implementation
    await implementation.close()
