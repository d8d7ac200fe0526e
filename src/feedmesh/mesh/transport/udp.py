"""A UDP endpoint that drives one sans-IO :class:`~feedmesh.mesh.overlay.ScribeNode` on a real socket.

It does for one node what the simulator does for all, through the mesh's one live driver loop
(:class:`~feedmesh.mesh.transport.driver.NodeDriver`, which the FeedEx HTTP transport runs too):
hands it each datagram (``receive(now, sender, message)``), wakes it at ``next_deadline()``
(``fire``), and sends what ``take()`` returns. Time is the event loop's clock (monotonic seconds), injected into the node on
every call. Several endpoints share one process and one loop; each binds its own loopback address
and port (``127.0.4.x``).

Link latency is emulated on the way out: each datagram leaves after the pair's one-way latency
(by default 25 ms +-10%, fixed per pair like the simulator's matrix, so each link stays FIFO).
The delayed sends and the node's wake-ups go on the loop's shared
:class:`~feedmesh.mesh.transport.wheel.TimerWheel` (1 ms slots), not one asyncio timer each.

Bad datagrams are refused, logged (one throttled line per kind) and counted in :attr:`counters`:
``oversized`` (over :data:`~feedmesh.mesh.overlay.wire.MAX_DATAGRAM`), ``malformed`` (not an
overlay message), ``spoofed`` (the sender handle names another address than the datagram came
from); ``unsendable`` counts our own messages too big to send, ``send-dropped`` datagrams the
socket's full buffer refused, ``send-errors`` ICMP errors (a dead peer's port).

The socket is read by the endpoint itself (``loop.add_reader``), which drains every queued datagram
per wake-up: asyncio's datagram transport costs one callback per datagram.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections import Counter
from collections.abc import Callable
from typing import Any

from feedmesh.logs import Throttled
from feedmesh.mesh.overlay import Delivery, Handle, LatencyMatrix, ScribeNode, node_id
from feedmesh.mesh.overlay.wire import MAX_DATAGRAM, WireError, decode_datagram, encode_datagram
from feedmesh.mesh.transport.driver import NodeDriver
from feedmesh.mesh.transport.wheel import TimerWheel

__all__ = ["Address", "UdpNode", "address_key", "handle_at", "pair_latency"]

log = logging.getLogger("feedmesh.mesh.udp")
Address = tuple[str, int]
_RECEIVE_BYTES = 65_536        # any UDP datagram fits; over max_datagram is refused after
_DRAIN = 64                    # datagrams read per wake-up before other endpoints get a turn


def address_key(addr: Address) -> int:
    """An address as one int (IPv4 << 16 | port), for the latency matrix's pair hash."""
    return int(ipaddress.IPv4Address(addr[0])) << 16 | addr[1]


def handle_at(host: str, port: int) -> Handle:
    """The handle of the endpoint bound at ``host:port`` (its id is drawn from that address)."""
    return Handle(node_id(f"{host}:{port}".encode()), (host, port))


def pair_latency(matrix: LatencyMatrix | None = None) -> Callable[[Address, Address], float]:
    matrix = matrix or LatencyMatrix()
    return lambda a, b: matrix(address_key(a), address_key(b))


class UdpNode:
    """One overlay node on one UDP socket. ``await start()``, then ``subscribe``/``publish``."""

    def __init__(self, host: str, port: int = 0, *,
                 make_node: Callable[[Handle], ScribeNode] = ScribeNode,
                 latency: Callable[[Address, Address], float] | None = None,
                 on_delivery: Callable[[Delivery], None] | None = None,
                 max_datagram: int = MAX_DATAGRAM, keep_deliveries: bool = True) -> None:
        """``keep_deliveries`` False: deliveries go to ``on_delivery`` only, not also to the
        :attr:`deliveries` list (a long-running node would keep every record it ever got)."""
        self.addr: Address = (host, port)
        self.make_node = make_node
        self.node: ScribeNode | None = None
        self.latency = latency if latency is not None else pair_latency()
        self._latency_to: dict[Address, float] = {}   # fixed per pair: computed once
        self.on_delivery = on_delivery
        self.keep_deliveries = keep_deliveries
        self.max_datagram = max_datagram
        self.counters: Counter[str] = Counter()
        self.deliveries: list[Delivery] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sock: socket.socket | None = None
        self._wheel: TimerWheel | None = None
        self._driver: NodeDriver | None = None
        self._log = Throttled(log, every_s=10.0)
        self.closed = False

    @property
    def handle(self) -> Handle:
        assert self.node is not None, "the endpoint is not open"
        return self.node.handle

    # ---- life --------------------------------------------------------------------------------
    async def open(self) -> None:
        """Bind the socket (port 0: any free port), then make the node: its id is drawn from
        the address it got."""
        self._loop = asyncio.get_running_loop()
        self._wheel = TimerWheel.of(self._loop)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            sock.bind(self.addr)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        host, port = sock.getsockname()[:2]
        self.addr = (host, port)
        self.node = self.make_node(handle_at(host, port))
        self._driver = NodeDriver(self.node, self._wheel, self._send_message, self._delivered)
        # our own reader, not asyncio's datagram transport: one wake-up drains every datagram
        # queued on the socket instead of one callback per datagram
        self._loop.add_reader(sock.fileno(), self._readable)

    async def start(self, bootstrap: Handle | None = None) -> None:
        if self.node is None:
            await self.open()
        self.act(lambda node, now: node.start(now, bootstrap))

    def close(self) -> None:
        """Stop at once, like a crash: no goodbye, nothing more sent or received."""
        self.closed = True
        if self._driver is not None:
            self._driver.close()
        sock, self._sock = self._sock, None
        if sock is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(sock.fileno())
            sock.close()

    def now(self) -> float:
        assert self._loop is not None, "the endpoint is not open"
        return self._loop.time()

    def act(self, call: Callable[[ScribeNode, float], Any]) -> Any:
        """Run ``call(node, now)`` and send what it produced (subscribe, publish, leave...)."""
        assert self._driver is not None, "the endpoint is not open"
        return self._driver.act(call)

    def subscribe(self, url: str, feed_key: str, *, republication: bool = False,
                  topic: str | None = None) -> int:
        return self.act(lambda node, now: node.subscribe(now, url, feed_key, topic=topic,
                                                         republication=republication))

    def publish(self, url: str, seq: int, wire: bytes, *, topic: str | None = None) -> None:
        self.act(lambda node, now: node.publish(now, url, seq, wire, topic=topic))

    # ---- the socket's side --------------------------------------------------------------------
    def _readable(self) -> None:
        sock = self._sock
        for _ in range(_DRAIN):
            if self.closed or sock is None:
                return
            try:
                data, addr = sock.recvfrom(_RECEIVE_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:       # ICMP errors surface on the next receive
                self.error_received(error)
                continue
            self.datagram_received(data, addr)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if self.closed or self.node is None:
            return
        if len(data) > self.max_datagram:
            self._refuse("oversized", addr, f"{len(data)} bytes over the {self.max_datagram}-byte "
                         "limit")
            return
        try:
            sender, message = decode_datagram(data)
        except WireError as error:
            self._refuse("malformed", addr, str(error))
            return
        if tuple(sender.addr) != (addr[0], addr[1]):
            self._refuse("spoofed", addr, f"the envelope names {sender.addr}")
            return
        self.counters["received"] += 1
        assert self._driver is not None
        self._driver.receive(sender, message)

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable from a dead peer: the overlay notices by missing acks
        self.counters["send-errors"] += 1

    # ---- driving -----------------------------------------------------------------------------
    def _refuse(self, kind: str, addr: Any, why: str) -> None:
        self.counters[kind] += 1
        self._log.log(logging.WARNING, kind, "datagram_refused node=%s:%d from=%s:%s kind=%s "
                      "why=%r", self.addr[0], self.addr[1], addr[0], addr[1], kind, why)

    def _send_message(self, destination: Handle, body: Any) -> None:
        """The driver's ``send``: encode, then leave after the link's latency (on the wheel)."""
        assert self._wheel is not None and self.node is not None
        try:
            data = encode_datagram(self.node.handle, body, max_bytes=self.max_datagram)
        except WireError as error:
            self.counters["unsendable"] += 1
            self._log.log(logging.WARNING, "unsendable", "datagram_unsendable node=%s:%d "
                          "to=%s why=%r", self.addr[0], self.addr[1], destination.addr, str(error))
            return
        self.counters["sent"] += 1
        to = destination.addr
        delay = self._latency_to.get(to)
        if delay is None:
            if len(self._latency_to) >= 4096:     # a long-lived node meets many peers
                self._latency_to.clear()
            delay = self._latency_to[to] = self.latency(self.addr, to)
        self._wheel.call_later(delay, self._send, data, to)

    def _delivered(self, delivery: Delivery) -> None:
        if self.keep_deliveries:
            self.deliveries.append(delivery)
        if self.on_delivery is not None:
            self.on_delivery(delivery)

    def _send(self, data: bytes, addr: Any) -> None:
        if self.closed or self._sock is None:
            return
        try:
            self._sock.sendto(data, addr)
        except (BlockingIOError, InterruptedError):
            self.counters["send-dropped"] += 1      # the socket's buffer is full: UDP drops
        except OSError as error:
            self.error_received(error)
