"""The implementations of the Bus port that tests/bus/test_contract.py runs against."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from feedmesh.bus import Bus
from feedmesh.bus.memory import MemoryBus


@pytest.fixture(params=["memory"])
async def bus(request) -> AsyncIterator[Bus]:
    if request.param == "memory":
        implementation = MemoryBus(capacity_bytes=64 * 1024)
    yield implementation
    await implementation.close()
