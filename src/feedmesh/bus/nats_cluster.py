"""A three-node NATS JetStream cluster on loopback, started by feedmesh itself: what a real
deployment runs on three machines, for the tests and ``feedmesh up --nats-cluster 3``.

Each node is a :class:`~feedmesh.bus.nats_server.LocalNats` on an address of its own (127.0.0.x
by default), a free client port and a free route port there, its JetStream files in a folder of
its own, and routes to the other two. A route must give the cluster's user and password (a
random one, in each node's config, 0600), so a process of another user cannot join as a node
and be sent the streams. The same ``authorization`` block (bus/nats_auth.py) is on every node:
a client's key works on any of them. Streams made with ``replicas=3`` are held by all three; a
stream stays writable while two of them run, and its leader moves when its node dies.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import nats.js.errors

from feedmesh.bus.nats_server import ClusterNode, LocalNats, NatsServerError, free_port

__all__ = ["LocalNatsCluster", "prepare_placed"]

_SETTLING = (10005, 10059)
"""What a cluster just started (or just missing a node) answers for a while: "no suitable peers
for placement" (its metadata leader is elected before it knows every peer) and "stream not
found" (a node not yet told of a stream just made)."""


async def prepare_placed(admin: Any, subjects: Sequence[str],
                         groups: Sequence[tuple[str, str]] = (), *,
                         timeout: float = 60.0) -> None:
    """``admin.prepare(subjects, groups)`` (a JetStreamBus with the admin's key), tried again
    while the cluster settles (see :data:`_SETTLING`); NatsServerError once ``timeout`` seconds
    have passed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await asyncio.wait_for(admin.prepare(subjects, groups),
                                   max(1.0, deadline - time.monotonic()))
            return
        except nats.js.errors.APIError as exc:
            if exc.err_code not in _SETTLING or time.monotonic() > deadline:
                raise NatsServerError(f"the NATS server at {admin.url} did not take the "
                                      f"streams ({exc.description}, code {exc.err_code})"
                                      ) from exc
            await asyncio.sleep(0.25)
        except TimeoutError as exc:
            raise NatsServerError(f"the NATS server at {admin.url} did not take the streams "
                                  f"within {timeout:.0f} s") from exc

DEFAULT_HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
_META_LEADER = "JetStream cluster new metadata leader"


class LocalNatsCluster:
    """Three (or ``len(hosts)``) ``nats-server`` nodes joined by routes, in ``folder``/node-N."""

    def __init__(self, folder: Path | str, *, hosts: Sequence[str] = DEFAULT_HOSTS,
                 authorization: str = "", max_payload: int = 8 * 1024 * 1024,
                 name: str = "feedmesh") -> None:
        if len(hosts) < 3:
            raise NatsServerError(f"a JetStream cluster that survives a node needs 3 nodes, "
                                  f"not {len(hosts)}")
        folder = Path(folder)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)
        user, password = "route", secrets.token_urlsafe(24)
        routes = tuple((host, free_port(host)) for host in hosts)
        self.nodes = [
            LocalNats(folder / f"node-{n}", host=host, port=free_port(host),
                      max_payload=max_payload, authorization=authorization,
                      cluster=ClusterNode(
                          server_name=f"{name}-{n}", cluster_name=name, route_host=host,
                          route_port=route_port, route_user=user, route_password=password,
                          routes=tuple(r for r in routes if r != (host, route_port))))
            for n, (host, route_port) in enumerate(routes)]

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        """Every node's URL, separated by commas (what ``JetStreamBus`` and ``--bus`` take)."""
        return ",".join(self.urls)

    def start(self, timeout: float = 30.0) -> Self:
        """Start every node that is not running, then wait until the cluster has elected the
        leader of its JetStream metadata (streams can be made)."""
        for node in self.nodes:
            node.start(timeout)
        self._wait_meta_leader(timeout)
        return self

    def _wait_meta_leader(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in self.nodes:
                try:
                    if _META_LEADER in (node.folder / "nats-server.log").read_text(
                            errors="replace"):
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        raise NatsServerError(f"the NATS cluster elected no JetStream leader within "
                              f"{timeout:.0f} s; logs in {self.nodes[0].folder.parent}")

    def start_node(self, n: int, timeout: float = 30.0) -> None:
        """Start node ``n`` again (same ports, same files): it catches up from the others."""
        self.nodes[n].start(timeout)

    def kill(self, n: int) -> None:
        """kill -9 of node ``n``."""
        self.nodes[n].kill()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
