"""A node is no UDP reflector: a ``Recover`` whose source address was never validated (a forged
source, as far as the node can know) gets at most as many bytes back as it carried (only the
25-byte cookie challenge); once the address returns the cookie, the same ``Recover`` is answered in
full. The transport's cap holds on its own too: what the node would send to an unvalidated child
waits, and leaves only when the address is validated."""

from __future__ import annotations

import socket

from nacl.signing import SigningKey

from feedmesh.mesh.overlay.ids import group_id
from feedmesh.mesh.overlay.scribe import Item, Recover
from feedmesh.mesh.overlay.wire import MAGIC, decode_datagram, encode_datagram
from feedmesh.mesh.records import FeedWriter
from feedmesh.mesh.transport import handle_at
from feedmesh.mesh.transport.udp import COOKIE_BYTES, COOKIE_MAGIC
from tests.eventually import eventually
from tests.mesh.transport.conftest import subscribed, udp_ring

URL = "https://amplify.example.org/feed.xml"
RECORDS = 32


class Victim:
    """A socket on an address the node never heard from: what a forged source would name."""

    def __init__(self, host: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.setblocking(False)
        self.handle = handle_at(*self.sock.getsockname())
        self.got: list[bytes] = []

    def send(self, data: bytes, to) -> int:
        self.sock.sendto(data, to.addr)
        return len(data)

    def drain(self) -> list[bytes]:
        while True:
            try:
                data, _ = self.sock.recvfrom(65_536)
            except BlockingIOError:
                return self.got
            self.got.append(data)

    def cookies(self, kind: bytes) -> list[bytes]:
        return [d for d in self.drain() if d[:5] == COOKIE_MAGIC + kind]

    def items(self) -> list[Item]:
        return [m for d in self.drain() if d[:4] == MAGIC
                for _, m in [decode_datagram(d)] if type(m) is Item]

    async def round_trip(self, to) -> None:
        """Everything ``to`` sent us before this call has arrived once our probe's echo has: the
        echo leaves after it, on the same link (each link is FIFO)."""
        before = len(self.cookies(b"!"))
        self.send(COOKIE_MAGIC + b"?" + bytes(COOKIE_BYTES - 5), to)
        await eventually(lambda: len(self.cookies(b"!")) > before)

    def close(self) -> None:
        self.sock.close()


async def test_an_unvalidated_recover_gets_no_more_than_its_size_back_a_validated_one_all() -> None:
    async with udp_ring(4, first_host=31) as nodes:
        writer = FeedWriter(SigningKey.generate(), URL)
        gid = group_id(URL)
        for node in nodes:
            node.subscribe(URL, writer.feed)
        await subscribed(nodes, gid)
        for _ in range(RECORDS):
            wire = writer.append({"id": str(writer.seq + 1), "text": "x" * 900})
            nodes[0].publish(URL, writer.seq, wire)
        target = nodes[2]
        await eventually(lambda: len(target.node.groups[gid].buffer) == RECORDS)

        victim = Victim("127.0.4.91")
        try:
            assert victim.handle.id not in target.node.groups[gid].children
            ask = encode_datagram(victim.handle, Recover(gid, tuple(range(1, RECORDS + 1))))
            sent = victim.send(ask, target)
            await victim.round_trip(target)
            back = sum(len(d) for d in victim.got if d[:5] != COOKIE_MAGIC + b"!")
            assert back <= sent, (back, sent)
            assert victim.items() == []
            assert target.node.counters["recover-unvalidated"] == 1

            # the cookie round trip: echo the challenge, and the address is validated
            (challenge,) = victim.cookies(b"?")
            victim.send(COOKIE_MAGIC + b"!" + challenge[5:], target)
            await eventually(lambda: target.is_validated(victim.handle.addr))
            victim.got.clear()
            victim.send(ask, target)
            await eventually(lambda: len(victim.items()) == RECORDS)
            out = sum(len(d) for d in victim.got)
            assert out > 30_000 and sorted(i.seq for i in victim.items()) == list(
                range(1, RECORDS + 1))
            # a forged echo (the cookie of another address) validates nothing
            other = Victim("127.0.4.92")
            try:
                other.send(COOKIE_MAGIC + b"!" + challenge[5:], target)
                await eventually(lambda: target.counters["bad-cookies"] >= 1)
                assert not target.is_validated(other.handle.addr)
            finally:
                other.close()
        finally:
            victim.close()


async def test_the_transport_holds_what_an_unvalidated_child_would_get_until_it_is_validated():
    async with udp_ring(3, first_host=35) as nodes:
        writer = FeedWriter(SigningKey.generate(), URL)
        gid = group_id(URL)
        for node in nodes:
            node.subscribe(URL, writer.feed)
        await subscribed(nodes, gid)
        for _ in range(RECORDS):
            nodes[0].publish(URL, writer.seq + 1, writer.append({"id": str(writer.seq + 1),
                                                                 "text": "y" * 900}))
        target = nodes[1]
        await eventually(lambda: len(target.node.groups[gid].buffer) == RECORDS)
        victim = Victim("127.0.4.93")
        try:
            # the node takes the address for a child (as a forged join would make it)
            target.node.groups[gid].children[victim.handle.id] = victim.handle
            ask = encode_datagram(victim.handle, Recover(gid, tuple(range(1, RECORDS + 1))))
            sent = victim.send(ask, target)
            await victim.round_trip(target)
            back = sum(len(d) for d in victim.got if d[:5] != COOKIE_MAGIC + b"!")
            assert back <= sent and victim.items() == []
            assert target.counters["amplification-held"] >= RECORDS
            (challenge,) = victim.cookies(b"?")
            victim.send(COOKIE_MAGIC + b"!" + challenge[5:], target)
            await eventually(lambda: len({i.seq for i in victim.items()}) == RECORDS,
                             what="the held answers leave once the address is validated")
        finally:
            victim.close()
