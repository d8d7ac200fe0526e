"""The bus on a three-node JetStream cluster (bus/nats_cluster.py), streams replicated three
times: kill -9 of a node while a publisher and a consumer run loses nothing and stores nothing
twice, and both go on (the stream's and the group's leaders move); a stranger cannot join as a
route. Each test starts a cluster of its own on 127.0.6.1-3 (the contract suite runs on the
shared one of tests/conftest.py)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import nats.js.errors
import pytest

from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.bus.nats_auth import authorization_block, create_credentials
from feedmesh.bus.nats_cluster import LocalNatsCluster, prepare_placed
from tests.eventually import eventually

NS = "fm"
HOSTS = ("127.0.6.1", "127.0.6.2", "127.0.6.3")


@pytest.fixture
def cluster(tmp_path):
    credentials = create_credentials(tmp_path / "secrets")
    nodes = LocalNatsCluster(tmp_path / "nats", hosts=HOSTS,
                             authorization=authorization_block(credentials, NS, 2)).start()
    yield nodes, credentials
    nodes.stop()


async def found(call):  # type: ignore[no-untyped-def]
    """What the JetStream API ``call`` answers, or None while the node asked does not know the
    stream or group yet: right after it is made, or while a leader is elected after a kill, a
    node may answer 'stream not found' (10059) for a stream the cluster holds."""
    try:
        return await call()
    except nats.js.errors.NotFoundError:
        return None


async def leader(admin: JetStreamBus, stream: str, group: str | None = None) -> int | None:
    """The node (index) leading ``stream``, or its ``group`` (None while one is elected)."""
    info = await found(lambda: admin._call("asking for a leader", lambda: admin._js.consumer_info(
        stream, group) if group else admin._js.stream_info(stream)))
    name = info.cluster.leader if info is not None and info.cluster else None
    return int(name.rsplit("-", 1)[1]) if name else None


async def elected(find) -> int:
    """What ``find`` answers once it is not None (a leader being elected)."""
    async def boxed() -> tuple[int] | None:
        found = await find()
        return None if found is None else (found,)

    return (await eventually(boxed, what="a leader elected"))[0]


def connected_node(bus: JetStreamBus, nodes: LocalNatsCluster) -> int:
    url = bus._nc.connected_url
    return next(n for n, node in enumerate(nodes.nodes)
                if (url.hostname, url.port) == (node.host, node.port))


async def test_streams_are_held_by_all_three_nodes(cluster):
    nodes, credentials = cluster
    admin = await JetStreamBus.connect(nodes.url, namespace=NS, replicas=3,
                                       credentials=credentials.path("admin"))
    try:
        await prepare_placed(admin, ["articles"], [("articles", "filter-0")])

        async def replicated(group: str | None = None) -> bool:
            info = await found(lambda: admin._js.consumer_info(f"{NS}_articles", group)
                               if group else admin._js.stream_info(f"{NS}_articles"))
            if info is None or info.cluster is None:
                return False
            if group is None:
                assert info.config.num_replicas == 3
            return len(info.cluster.replicas or []) == 2  # beside the leader

        await eventually(replicated, what="the stream on three nodes")
        await eventually(lambda: replicated("filter-0"), what="the group on three nodes")
    finally:
        await admin.close()


async def test_a_node_killed_mid_run_loses_and_doubles_nothing(cluster):
    """Three kill -9, one after another, each node restarted before the next: the articles
    stream's leader, then the filter group's leader, then the node the publisher is on."""
    nodes, credentials = cluster
    admin = await JetStreamBus.connect(nodes.url, namespace=NS, replicas=3,
                                       credentials=credentials.path("admin"))
    await prepare_placed(admin, ["articles"], [("articles", "filter-0")])
    crawler = await JetStreamBus.connect(nodes.url, namespace=NS, ack_wait_s=2.0,
                                         credentials=credentials.path("crawler"))
    filter_ = await JetStreamBus.connect(nodes.url, namespace=NS, ack_wait_s=2.0,
                                         credentials=credentials.path("filter"))
    total, batch, step = 1200, 10, 300
    stored: dict[bytes, set[int]] = {}  # payload -> the seqs it was delivered under
    deliveries = 0
    allowed = step  # what the publisher may publish so far: the test moves it on

    async def publish() -> None:
        for start in range(0, total, batch):
            await eventually(lambda start=start: start < allowed, timeout=300,
                             what=f"leave to publish {start}")
            await crawler.publish_many([("articles", b"a%d" % n, f"a{n}")
                                        for n in range(start, start + batch)])

    async def consume() -> None:
        nonlocal deliveries
        member = await filter_.consumer("articles", "filter-0")
        while len(stored) < total:
            got = []
            while len(got) < batch and (delivery := await member.get(0.05)) is not None:
                got.append(delivery)
            for delivery in got:
                stored.setdefault(delivery.data, set()).add(delivery.seq)
                deliveries += 1
            await filter_.ack_many(got)

    publishing = asyncio.create_task(publish())
    consuming = asyncio.create_task(consume())
    stream = f"{NS}_articles"
    choosers = (lambda: leader(admin, stream), lambda: leader(admin, stream, "filter-0"),
                lambda: asyncio.sleep(0, connected_node(crawler, nodes)))
    killed = []
    try:
        for chooser in choosers:
            await eventually(lambda target=allowed: len(stored) >= target, timeout=60,
                             what=f"{allowed} delivered")
            victim = await elected(chooser)
            allowed += step
            # killed while the next messages are being published and consumed
            await eventually(lambda target=allowed - step + batch: len(stored) >= target,
                             timeout=60, what="the flow under way")
            nodes.kill(victim)
            killed.append(victim)
            # the others go on without it: the rest delivered, under a new leader
            await eventually(lambda target=allowed: len(stored) >= target, timeout=60,
                             what=f"deliveries after node {victim} was killed")
            assert await elected(lambda: leader(admin, stream)) != victim
            nodes.start_node(victim)
        allowed = total
        await asyncio.wait_for(publishing, 120)
        await asyncio.wait_for(consuming, 120)
    finally:
        publishing.cancel()
        consuming.cancel()
    published = await eventually(lambda: found(lambda: admin.last_seq("articles")),
                                 what="the stream's last sequence")
    for bus in (admin, crawler, filter_):
        await bus.close()
    lost = total - len(stored)
    doubled = sum(len(seqs) - 1 for seqs in stored.values()) + (published - total)
    assert (lost, doubled) == (0, 0), (killed, lost, doubled)
    assert sorted(stored) == sorted(b"a%d" % n for n in range(total))
    assert len(killed) == 3 and deliveries >= total  # redeliveries of one seq are not doubles


def route_handshake(host: str, port: int, connect: bytes) -> bytes:
    with socket.create_connection((host, port), timeout=5) as raw:
        raw.settimeout(5)
        assert raw.recv(4096).startswith(b"INFO")
        raw.sendall(b"CONNECT " + connect + b"\r\nPING\r\n")
        answer = b""
        while b"\r\n" not in answer or answer.startswith(b"INFO"):
            chunk = raw.recv(4096)
            if not chunk:
                break
            answer = chunk if answer.startswith(b"INFO") else answer + chunk
        return answer


def test_a_stranger_cannot_join_as_a_route(cluster):
    nodes, _ = cluster
    node = nodes.nodes[0].cluster
    assert node is not None
    for server in nodes.nodes:  # what every user reads: no password there
        cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes()
        assert node.route_password.encode() not in cmdline and b"route" not in cmdline
        assert node.route_password in (server.folder / "nats.conf").read_text()  # 0600
    for connect in (b'{"verbose":false,"name":"stranger","cluster":"feedmesh"}',
                    b'{"verbose":false,"user":"route","pass":"guessed","cluster":"feedmesh"}'):
        assert b"Authorization Violation" in route_handshake(node.route_host, node.route_port,
                                                            connect)
    # the nodes' own routes are the way in: the handshake is right, only the secret was not
    good = b'{"verbose":false,"user":"route","pass":"%s","cluster":"feedmesh","name":"x"}' % (
        node.route_password.encode())
    assert b"Authorization Violation" not in route_handshake(node.route_host, node.route_port,
                                                            good)
