"""Pytest fixtures for anything that needs feeds to crawl. Import them into a conftest::

    from feedmesh.farm.testing import farm, farm_config, farm_factory, farm_process  # noqa: F401

(or list ``"feedmesh.farm.testing"`` in the root conftest's ``pytest_plugins``). Then:

* ``farm`` - an in-process :class:`FarmServer` on port 0 built from ``farm_config``; override
  ``farm_config`` in a test module (a fixture of the same name) to change it;
* ``farm_factory`` - ``async with farm_factory(feeds=5, fault_overrides={0: "timeout"}) as f:``
  for tests that need several farms or a config per test;
* ``farm_process`` - a module-scoped farm in a child process (for code that must not share the
  event loop or the core with the farm).

Every farm binds loopback only and stops at the end of its test, with its connections.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest

from feedmesh.farm.config import FarmConfig
from feedmesh.farm.process import FarmProcess
from feedmesh.farm.server import FarmServer

__all__ = ["farm", "farm_config", "farm_factory", "farm_process"]

# A fixed origin makes tests reproducible: the same posts at the same farm times on every run.
TEST_ORIGIN = 1_760_000_000.0


@pytest.fixture
def farm_config() -> FarmConfig:
    """Twenty healthy feeds, fixed seed and origin. Override this fixture to change the farm."""
    return FarmConfig(feeds=20, seed=7, faults="none", origin=TEST_ORIGIN)


@pytest.fixture
async def farm(farm_config: FarmConfig) -> AsyncIterator[FarmServer]:
    async with FarmServer(farm_config) as server:
        yield server


@pytest.fixture
def farm_factory():
    """Returns ``make(**config_fields)``, an async context manager yielding a running farm."""

    @contextlib.asynccontextmanager
    async def make(**fields) -> AsyncIterator[FarmServer]:
        fields.setdefault("seed", 7)
        fields.setdefault("origin", TEST_ORIGIN)
        async with FarmServer(FarmConfig(**fields)) as server:
            yield server

    return make


@pytest.fixture(scope="module")
def farm_process() -> Iterator[FarmProcess]:
    with FarmProcess(FarmConfig(feeds=200, seed=7, faults="none", origin=TEST_ORIGIN)) as process:
        yield process
