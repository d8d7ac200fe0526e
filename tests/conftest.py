"""Fixtures every test package may use: the real servers the distributed deployment needs,
started by the tests themselves (never assumed to be running)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from feedmesh.bus.nats_server import LocalNats


@pytest.fixture(scope="session")
def nats_url(tmp_path_factory) -> Iterator[str]:
    """A NATS server with JetStream on a free loopback port, one per test session (and xdist
    worker), unless ``FEEDMESH_TEST_NATS`` names one. Tests keep apart by bus namespace."""
    given = os.environ.get("FEEDMESH_TEST_NATS")
    if given:
        yield given
        return
    server = LocalNats(tmp_path_factory.mktemp("nats")).start()
    try:
        yield server.url
    finally:
        server.stop()
