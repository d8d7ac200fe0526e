"""Overlay nodes as real UDP endpoints on loopback (127.0.4.x: this package's range)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator

import pytest

from feedmesh.mesh.overlay import Handle
from feedmesh.mesh.overlay.wire import encode_datagram
from feedmesh.mesh.transport import UdpNode
from tests.eventually import eventually


@contextlib.asynccontextmanager
async def udp_ring(count: int, first_host: int = 1) -> AsyncIterator[list[UdpNode]]:
    """``count`` endpoints, each on its own address 127.0.4.N, joined one after another."""
    nodes = [UdpNode(f"127.0.4.{first_host + i}") for i in range(count)]
    try:
        for node in nodes:
            await node.open()
        await nodes[0].start(None)
        for node in nodes[1:]:
            await node.start(nodes[0].handle)
            await eventually(lambda node=node: node.node.pastry.joined, timeout=10)
        await eventually(lambda: ring_complete(nodes), timeout=20,
                         what="every node's leaf set holds every other node")
        yield nodes
    finally:
        for node in nodes:
            node.close()


def ring_complete(nodes: list[UdpNode]) -> bool:
    """A small ring (at most 17 nodes) has converged when every leaf set holds every other node:
    only then does every node agree which one is closest to a group id (its root)."""
    everyone = {n.handle.id for n in nodes}
    for node in nodes:
        leaves = node.node.pastry.leaves
        if {h.id for h in (*leaves.left, *leaves.right)} | {node.handle.id} != everyone:
            return False
    return True


async def subscribed(nodes: list[UdpNode], group: int) -> None:
    """Wait until every node has a place in the group's tree."""
    def attached() -> bool:
        return all(n.closed or ((g := n.node.groups.get(group)) is not None
                   and (g.parent is not None or g.root)) for n in nodes)
    await eventually(attached, timeout=20, what="every subscriber attached to the tree")


class Rogue:
    """A raw UDP socket on 127.0.4.250 that sends whatever a test wants."""

    def __init__(self, handle_id: int = 1) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.4.250", 0))
        self.handle = Handle(handle_id, self.sock.getsockname())

    def send_raw(self, data: bytes, to: UdpNode) -> None:
        self.sock.sendto(data, to.addr)

    def send(self, message, to: UdpNode, sender: Handle | None = None) -> None:
        self.sock.sendto(encode_datagram(sender or self.handle, message), to.addr)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def rogue():
    sender = Rogue()
    yield sender
    sender.close()



def tree(nodes: list[UdpNode], group: int) -> str:
    """The group's tree as the nodes see it, for failure messages."""
    lines = []
    for n in nodes:
        g = n.node.groups.get(group)
        if g is None:
            lines.append(f"{n.addr[0]} {n.handle.id % 1000:03d} -")
            continue
        parent = g.parent.id % 1000 if g.parent else None
        lines.append(f"{n.addr[0]} {n.handle.id % 1000:03d} closed={n.closed} parent={parent} "
                     f"root={g.root} children={sorted(c % 1000 for c in g.children)} "
                     f"newest={g.newest} log={g.log.seq if g.log else None} "
                     f"joining={g.joining_since} {dict(n.node.counters)} {dict(n.counters)}")
    return "\n".join(lines)
