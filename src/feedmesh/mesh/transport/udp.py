"""A UDP endpoint that drives one sans-IO :class:`~feedmesh.mesh.overlay.ScribeNode` on a real
socket.

It does for one node what the simulator does for all, through the mesh's one live driver loop
(:class:`~feedmesh.mesh.transport.driver.NodeDriver`, which the FeedEx HTTP transport runs too):
hands it each datagram (``receive(now, sender, message)``), wakes it at ``next_deadline()``
(``fire``), and sends what ``take()`` returns. Time is the event loop's clock (monotonic seconds),
injected into the node on every call. Several endpoints share one process and one loop; each binds
its own loopback address and port (``127.0.4.x``).

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

**Anti-amplification** (QUIC's rule, RFC 9000 section 8, as the model). A UDP source address is a
claim, not a fact, and the spoofing check above only compares two claims. So, to an address it has
not validated, the endpoint sends at most as many bytes as it received from it
(``amplification`` times, 1 by default); what does not fit waits, up to ``STRANGER_QUEUE_BYTES``
per address and ``STRANGERS_QUEUED_BYTES`` in all, and goes once the address is validated (else it
is dropped, ``amplification-dropped``). An address is validated by a **cookie round trip**: on the
first datagram from it (and again at most once a second while data waits) the endpoint sends
``FMC1?`` plus a cookie, a 4-byte time bucket and an HMAC-SHA256 (a per-endpoint secret) of the
address and bucket, 25 bytes in all; the peer's endpoint echoes it (``FMC1!``: as many bytes as it
got, so the echo is no amplifier either) and the cookie, checked without any state kept (this
bucket or the one before, ``COOKIE_BUCKET_S``), proves the address receives what is sent to it.
A challenge to an address that sent nothing (a join routed to us names its joiner) comes out of a
small node-wide allowance (``CHALLENGES_PER_S``). Strangers' state is bounded (``MAX_STRANGERS``,
oldest forgotten); validated addresses are remembered up to ``MAX_VALIDATED``. The node learns of
validation through :attr:`ScribeNode.validated`, and answers ``Recover`` and ``Vouch`` only to
children and validated senders.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import logging
import os
import socket
from collections import Counter, OrderedDict
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
COOKIE_MAGIC = b"FMC1"
_CHALLENGE = COOKIE_MAGIC + b"?"
_ECHO = COOKIE_MAGIC + b"!"
COOKIE_BYTES = 25              # magic, kind, 4-byte bucket, 16 bytes of HMAC
COOKIE_BUCKET_S = 60.0
STRANGER_QUEUE_BYTES = 128_000
STRANGERS_QUEUED_BYTES = 4_000_000
MAX_STRANGERS = 4096
MAX_VALIDATED = 16_384
CHALLENGES_PER_S = 200.0
_RECHALLENGE_S = 1.0


class _Stranger:
    """What we know of an address not validated yet: bytes each way, and what waits for it."""

    __slots__ = ("challenged_at", "queue", "queued", "received", "sent")

    def __init__(self) -> None:
        self.received = 0
        self.sent = 0
        self.queue: list[bytes] = []
        self.queued = 0
        self.challenged_at = -1e9


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
                 max_datagram: int = MAX_DATAGRAM, keep_deliveries: bool = True,
                 amplification: float = 1.0) -> None:
        """``keep_deliveries`` False: deliveries go to ``on_delivery`` only, not also to the
        :attr:`deliveries` list (a long-running node would keep every record it ever got).
        ``amplification``: bytes sent per byte received to an address not validated yet."""
        self.addr: Address = (host, port)
        self.make_node = make_node
        self.node: ScribeNode | None = None
        self.latency = latency if latency is not None else pair_latency()
        self._latency_to: dict[Address, float] = {}   # fixed per pair: computed once
        self._listeners: list[Callable[[Delivery], None]] = (
            [] if on_delivery is None else [on_delivery])
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
        self.amplification = amplification
        self._secret = os.urandom(32)
        self._validated: OrderedDict[Address, None] = OrderedDict()
        self._strangers: OrderedDict[Address, _Stranger] = OrderedDict()
        self._queued_total = 0
        self._allowance = CHALLENGES_PER_S
        self._allowance_at = 0.0

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
        self.node.validated = lambda handle: self.is_validated(tuple(handle.addr))
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
        if data[:4] == COOKIE_MAGIC:
            self._cookie_received(data, (addr[0], addr[1]))
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
        source = (addr[0], addr[1])
        if source not in self._validated:
            stranger = self._stranger(source)
            stranger.received += len(data)
            self._challenge(source, stranger)
        assert self._driver is not None
        self._driver.receive(sender, message)

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable from a dead peer: the overlay notices by missing acks
        self.counters["send-errors"] += 1

    # ---- address validation (anti-amplification) ---------------------------------------------
    def is_validated(self, addr: Address) -> bool:
        return addr in self._validated

    def _cookie(self, addr: Address, bucket: int) -> bytes:
        stamp = (bucket & 0xFFFFFFFF).to_bytes(4, "big")
        mac = hmac.new(self._secret, f"{addr[0]}:{addr[1]}".encode() + stamp, hashlib.sha256)
        return stamp + mac.digest()[:16]

    def _stranger(self, addr: Address) -> _Stranger:
        stranger = self._strangers.get(addr)
        if stranger is None:
            while len(self._strangers) >= MAX_STRANGERS:
                _, old = self._strangers.popitem(last=False)
                self._queued_total -= old.queued
                self.counters["amplification-dropped"] += len(old.queue)
            stranger = self._strangers[addr] = _Stranger()
        return stranger

    def _challenge(self, addr: Address, stranger: _Stranger) -> None:
        now = self.now()
        if now - stranger.challenged_at < _RECHALLENGE_S:
            return
        if stranger.sent + COOKIE_BYTES <= stranger.received * self.amplification:
            stranger.sent += COOKIE_BYTES
        else:
            # nothing (or too little) came from it: a join routed to us names this address
            self._allowance = min(CHALLENGES_PER_S, self._allowance
                                  + (now - self._allowance_at) * CHALLENGES_PER_S)
            self._allowance_at = now
            if self._allowance < 1.0:
                self.counters["challenge-throttled"] += 1
                return
            self._allowance -= 1.0
        stranger.challenged_at = now
        self.counters["challenges-sent"] += 1
        self._send_later(_CHALLENGE + self._cookie(addr, int(now // COOKIE_BUCKET_S)), addr)

    def _cookie_received(self, data: bytes, addr: Address) -> None:
        if len(data) != COOKIE_BYTES:
            self._refuse("malformed", addr, "a cookie datagram of the wrong size")
            return
        kind, cookie = data[:5], data[5:]
        if kind == _CHALLENGE:
            # echo it: as many bytes as came, so no amplification; nothing kept
            self.counters["challenges-answered"] += 1
            self._send_later(_ECHO + cookie, addr)
            return
        if kind != _ECHO:
            self._refuse("malformed", addr, "an unknown cookie datagram")
            return
        bucket = int(self.now() // COOKIE_BUCKET_S)
        if not any(hmac.compare_digest(cookie, self._cookie(addr, b))
                   for b in (bucket, bucket - 1)):
            self.counters["bad-cookies"] += 1
            return
        if addr in self._validated:
            self._validated.move_to_end(addr)
            return
        self._validated[addr] = None
        while len(self._validated) > MAX_VALIDATED:
            self._validated.popitem(last=False)
        self.counters["validated"] += 1
        stranger = self._strangers.pop(addr, None)
        if stranger is not None:
            self._queued_total -= stranger.queued
            for queued in stranger.queue:
                self._send_later(queued, addr)

    def _send_out(self, data: bytes, to: Address) -> None:
        """Send ``data`` now if ``to`` is validated or within its budget, else hold it."""
        if to in self._validated:
            self._send_later(data, to)
            return
        stranger = self._stranger(to)
        allowed = stranger.received * self.amplification
        if not stranger.queue and stranger.sent + len(data) <= allowed:
            stranger.sent += len(data)
            self._send_later(data, to)
            return
        if (stranger.queued + len(data) > STRANGER_QUEUE_BYTES
                or self._queued_total + len(data) > STRANGERS_QUEUED_BYTES):
            self.counters["amplification-dropped"] += 1
        else:
            stranger.queue.append(data)
            stranger.queued += len(data)
            self._queued_total += len(data)
            self.counters["amplification-held"] += 1
        self._challenge(to, stranger)

    def _send_later(self, data: bytes, to: Address) -> None:
        if self._wheel is None:
            return
        delay = self._latency_to.get(to)
        if delay is None:
            if len(self._latency_to) >= 4096:     # a long-lived node meets many peers
                self._latency_to.clear()
            delay = self._latency_to[to] = self.latency(self.addr, to)
        self._wheel.call_later(delay, self._send, data, to)

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
        self._send_out(data, (destination.addr[0], destination.addr[1]))

    def listen(self, listener: Callable[[Delivery], None]) -> None:
        """Hand each delivery to ``listener`` too (a reader of this endpoint: the sanctioned
        place, beside ``on_delivery`` given at construction; nothing reassigns a hook)."""
        self._listeners.append(listener)

    def _delivered(self, delivery: Delivery) -> None:
        if self.keep_deliveries:
            self.deliveries.append(delivery)
        for listener in self._listeners:
            listener(delivery)

    def _send(self, data: bytes, addr: Any) -> None:
        if self.closed or self._sock is None:
            return
        try:
            self._sock.sendto(data, addr)
        except (BlockingIOError, InterruptedError):
            self.counters["send-dropped"] += 1      # the socket's buffer is full: UDP drops
        except OSError as error:
            self.error_received(error)
