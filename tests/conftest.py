"""Fixtures every test package may use: the real servers the distributed deployment needs,
started by the tests themselves (never assumed to be running)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from feedmesh.bus.nats_auth import NatsCredentials, authorization_block, create_credentials
from feedmesh.bus.nats_cluster import LocalNatsCluster
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


@pytest.fixture(scope="session")
def nats_cluster(tmp_path_factory) -> Iterator[tuple[LocalNatsCluster, NatsCredentials]]:
    """A three-node JetStream cluster on 127.0.0.1-3 (free ports), with the roles' keys
    (bus/nats_auth.py, namespace ``fm``, two reflectors), one per test session (and xdist
    worker). Tests that use it with the admin's key keep apart by bus namespace; tests that
    kill nodes start a cluster of their own."""
    folder = tmp_path_factory.mktemp("nats-cluster")
    credentials = create_credentials(folder / "secrets")
    cluster = LocalNatsCluster(folder / "nats",
                               authorization=authorization_block(credentials, "fm", 2)).start()
    try:
        yield cluster, credentials
    finally:
        cluster.stop()
