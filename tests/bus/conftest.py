"""The implementations of the Bus port that tests/bus/test_contract.py runs against.

The JetStream bus runs against the real ``nats-server`` of the ``nats_url`` fixture
(tests/conftest.py); each test gets a namespace of its own on it, so tests never see each other's
streams.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from feedmesh.bus import Bus
from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.bus.memory import MemoryBus


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
