"""FeedEx over HTTP: the aiohttp driver of one :class:`~feedmesh.mesh.feedex.FeedExNode`.

The node is sans-IO; this is its edge. One endpoint, ``POST /feedex/v1``, takes one message: the
node's own :func:`~feedmesh.mesh.feedex.encode` bytes (an envelope with the protocol version and
the sender's stated port, msgpack). What the transport does, and nothing else:

* **Identity.** The sender is (the address the connection came from, the port stated in the
  envelope). Outgoing connections are made *from* the node's own address, so on a machine that
  runs many nodes on 127.0.3.x each is seen as itself.
* **In.** A body over the cap is refused unread (413), one that does not decode is refused
  (400) and reported to the node (``malformed``: it counts against the sender), a source host
  past ``max_requests_per_minute`` is refused (429) before anything is read: all counted in
  :attr:`FeedExTransport.stats`. A valid message goes to ``node.receive``; the first reply the
  node makes to that sender travels back as the response body (a call's return, as Table 1
  pairs them), the rest as calls of their own.
* **Out.** Each :class:`~feedmesh.mesh.feedex.Send` is one POST, on a kept-alive connection to
  that peer (:mod:`.channel`; archive downloads use an aiohttp session); a message in the
  response body is handed to the node as received from the callee. A peer that cannot be
  reached (refused, timed out, 5xx) is reported with ``node.unreachable``.
* **Driving.** The node speaks the mesh's one dialect and is driven by its one live driver loop
  (:class:`~feedmesh.mesh.transport.driver.NodeDriver`, the UDP endpoints' too): each input is
  followed by sending what ``take()`` returns and handing ``take_deliveries()`` to
  ``on_delivery``; ``fire`` runs at ``next_deadline()``.
* **Time.** The node's timers run on the injected :class:`~feedmesh.clock.Clock` (a
  :class:`~feedmesh.mesh.transport.wheel.ClockWheel`);
  rate limits count real seconds (``monotonic``, injectable), since what they protect is this
  machine's CPU.
* **Archive downloads** (3.6): ``GET /feedex/v1/entries?feed=URL&since=T&until=T`` answers with
  the entries this node holds (an :class:`Archived` body, capped), so that a node that found us
  through ``query_feed`` downloads them directly.

Errors: nothing raised by a peer's bytes leaves a handler; each refusal is a status with a
FeedEx ``error`` message saying what was wrong.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Annotated

import aiohttp
import msgspec
from aiohttp import web
from msgspec import Meta

from feedmesh.clock import Clock
from feedmesh.mesh.feedex import Event, FeedExNode, MessageError, Send, decode, encode
from feedmesh.mesh.feedex.messages import MAX_MESSAGE_BYTES, Address, Entry, Error, Message
from feedmesh.mesh.transport.driver import NodeDriver
from feedmesh.mesh.transport.wheel import ClockWheel

from .channel import Channels

__all__ = ["Archived", "FeedExTransport", "HostRate", "TransportSettings"]

log = logging.getLogger("feedmesh.mesh.peer")

PATH = "/feedex/v1"
ENTRIES_PATH = "/feedex/v1/entries"
CONTENT_TYPE = "application/x-feedex+msgpack"
PORT_HEADER = "FeedEx-Port"
"""The stated port again, in a header: it lets a refused body (too large, not msgpack) still be
counted against its sender."""


class Archived(msgspec.Struct, frozen=True):
    """The answer to an archive download: entries of ``feed`` this node holds."""

    feed: Annotated[str, Meta(max_length=2048)]
    entries: Annotated[list[Entry], Meta(max_length=1000)]


_archived_decoder = msgspec.msgpack.Decoder(Archived)
_encoder = msgspec.msgpack.Encoder()


@dataclass(frozen=True, slots=True)
class TransportSettings:
    max_body_bytes: int = MAX_MESSAGE_BYTES
    max_requests_per_minute: int = 1200
    """Requests one source host may make per minute of real time (every node behind it)."""
    send_timeout_s: float = 10.0
    """Real seconds a call may take before the callee counts as unreachable."""
    connect_timeout_s: float = 3.0
    max_archive_entries: int = 500
    """Entries one archive download answers with at most."""

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024 or self.max_requests_per_minute < 1:
            raise ValueError("TransportSettings: max_body_bytes >= 1024 and "
                             "max_requests_per_minute >= 1 are required")
        if self.send_timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ValueError("TransportSettings: timeouts must be > 0")
        if not 1 <= self.max_archive_entries <= 1000:
            raise ValueError("TransportSettings.max_archive_entries must be within 1..1000")


class HostRate:
    """Requests per source host in the current minute; past the limit they are refused."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._minute = -1
        self._counts: dict[str, int] = {}

    def allow(self, host: str, now: float) -> bool:
        minute = int(now // 60)
        if minute != self._minute:
            self._minute = minute
            self._counts.clear()
        count = self._counts.get(host, 0) + 1
        self._counts[host] = count
        return count <= self.per_minute


ArchiveReader = Callable[[str, float | None, float | None, int], Awaitable[list[Entry]]]
"""``(feed, since, until, limit)`` -> entries of the feed this node holds, published in range."""


class FeedExTransport:
    """Runs ``node`` on real sockets: ``await start()``, ``await stop()``.

    ``on_delivery`` receives what the node hands out besides messages (:class:`Deliver`,
    :class:`QueryResult`). ``archive`` answers archive downloads (None: none are served).
    Local calls go through :meth:`act` (``act(lambda node, now: node.fetched(now, ...))``).
    """

    def __init__(self, node: FeedExNode, clock: Clock, *,
                 on_delivery: Callable[[Event], None],
                 archive: ArchiveReader | None = None,
                 settings: TransportSettings | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 withhold: Callable[[Message], bool] | None = None) -> None:
        """``withhold(message)`` True: that message is not sent (a free rider's transport, for
        experiments: it withholds what it would forward)."""
        self.node = node
        self.withhold = withhold
        self.clock = clock
        self.on_delivery = on_delivery
        self.archive = archive
        self.settings = settings or TransportSettings()
        self.monotonic = monotonic
        self.host, self.port = node.address
        self.stats: dict[str, int] = {
            "received": 0, "sent": 0, "send_failures": 0, "send_timeouts": 0, "send_refused": 0,
            "send_broken": 0, "malformed": 0, "oversized": 0,
            "rate_limited": 0, "bytes_in": 0, "bytes_out": 0, "archive_served": 0}
        self._rate = HostRate(self.settings.max_requests_per_minute)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._wheel = ClockWheel(clock)
        self._driver = NodeDriver(node, self._wheel, self._send_message, on_delivery)
        self._channels = Channels(self.host, connect_timeout_s=self.settings.connect_timeout_s,
                                  call_timeout_s=self.settings.send_timeout_s,
                                  max_body_bytes=self.settings.max_body_bytes)
        self._headers = {"Content-Type": CONTENT_TYPE, PORT_HEADER: str(self.port)}
        self._stopping = False

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self, candidates: Iterable[Address] = ()) -> None:
        app = web.Application(client_max_size=self.settings.max_body_bytes + 1)
        app.router.add_post(PATH, self._on_message)
        app.router.add_get(ENTRIES_PATH, self._on_entries)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        timeout = aiohttp.ClientTimeout(total=self.settings.send_timeout_s,
                                        connect=self.settings.connect_timeout_s)
        connector = aiohttp.TCPConnector(local_addr=(self.host, 0), limit=64,
                                         limit_per_host=4)
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        self.act(lambda node, now: node.start(now, candidates))

    async def stop(self) -> None:
        self._stopping = True
        await self._wheel.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._channels.close()
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- the node's outputs --------------------------------------------------------------------

    def act(self, call: Callable[[FeedExNode, float], object]) -> object:
        """Run ``call(node, now)`` and carry out what the node made; its result."""
        return self._driver.act(call)

    def flush(self) -> None:
        """Carry out what the node made since (a call made on the node directly)."""
        self._driver.flush()

    def _send_message(self, to: Address, message: Message) -> None:
        """The driver's ``send``: one POST each, unless withheld or stopping."""
        if self.withhold is not None and self.withhold(message):
            self.stats["withheld"] = self.stats.get("withheld", 0) + 1
        elif not self._stopping:
            self._spawn(self._send(to, message))

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, to: Address, message: Message) -> None:
        try:
            data = encode(message, self.port)
        except MessageError as error:
            log.error("feedex_send_too_large to=%s:%s type=%s error=%s", to[0], to[1],
                      type(message).__name__, error)
            return
        try:
            status, body = await self._channels.post(to, PATH, data, self._headers)
        except (TimeoutError, OSError) as error:
            self.stats["send_failures"] += 1
            kind = "send_timeouts" if isinstance(error, TimeoutError) else \
                "send_refused" if "cannot connect" in str(error) else "send_broken"
            self.stats[kind] += 1
            log.debug("feedex_unreachable to=%s:%s error=%r", to[0], to[1], error)
            if not self._stopping:
                self.act(lambda node, now: node.unreachable(now, to))
            return
        self.stats["sent"] += 1
        self.stats["bytes_out"] += len(data)
        self.stats["bytes_in"] += len(body)
        if status >= 500:
            self.act(lambda node, now: node.unreachable(now, to))
            return
        if status < 300:
            self._alive(to)
        if body and len(body) <= self.settings.max_body_bytes:
            try:
                reply = decode(body).body
            except MessageError:
                return  # an answer we cannot read is no answer; the node's timeouts handle it
            if not self._stopping:
                self._driver.receive(to, reply)

    def _alive(self, address: Address) -> None:
        """A call to ``address`` was answered: it is alive. The core's keep-alive is one-way (an
        empty update_subset to a silent neighbour, which the callee does not answer), so after
        one side probed, the other would hear nothing and drop it as dead; over HTTP the answer
        is there, and counts as hearing from it."""
        neighbour = self.node.neighbours.get(address)
        if neighbour is not None:
            neighbour.last_heard = max(neighbour.last_heard, self.clock.now())
            neighbour.probed_at = None

    # -- the peer API --------------------------------------------------------------------------

    async def _on_message(self, request: web.Request) -> web.Response:
        host = request.remote or ""
        if not self._rate.allow(host, self.monotonic()):
            self.stats["rate_limited"] += 1
            return self._refuse(429, "rate_limited", f"more than "
                                f"{self.settings.max_requests_per_minute} calls a minute from "
                                f"{host}")
        stated = _port(request.headers.get(PORT_HEADER, ""))
        cap = self.settings.max_body_bytes
        declared = request.content_length
        if declared is not None and declared > cap:
            return self._oversized(host, stated, declared)
        body = await _read_capped(request.content, cap)
        if len(body) > cap:
            return self._oversized(host, stated, len(body))
        self.stats["bytes_in"] += len(body)
        try:
            envelope = decode(body)
        except MessageError as error:
            return self._malformed(host, stated, str(error))
        self.stats["received"] += 1
        sender = (host, envelope.port)
        self.node.receive(self.clock.now(), sender, envelope.body)
        sends = self.node.take()
        reply = _take_reply(sends, sender)
        self._driver.flush(sends)
        if reply is not None and self.withhold is not None and self.withhold(reply):
            self.stats["withheld"] = self.stats.get("withheld", 0) + 1
            reply = None
        if reply is None:
            return web.Response(status=204)
        data = encode(reply, self.port)
        self.stats["bytes_out"] += len(data)
        return web.Response(body=data, content_type=CONTENT_TYPE)

    def _oversized(self, host: str, port: int | None, size: int) -> web.Response:
        self.stats["oversized"] += 1
        why = (f"a {size}-byte body is over the {self.settings.max_body_bytes}-byte cap of a "
               "FeedEx call")
        if port is not None:
            self._malformed_sender(host, port, why)
        return self._refuse(413, "too_large", why)

    def _malformed(self, host: str, port: int | None, why: str) -> web.Response:
        self.stats["malformed"] += 1
        if port is not None:
            self._malformed_sender(host, port, why)
        return self._refuse(400, "malformed", why)

    def _malformed_sender(self, host: str, port: int, why: str) -> None:
        """Tell the node; its error to the sender is not sent (the refusal says it)."""
        self.node.malformed(self.clock.now(), (host, port), why)
        self._driver.flush([o for o in self.node.take() if not _is_error_to(o, (host, port))])

    def _refuse(self, status: int, code: str, detail: str) -> web.Response:
        return web.Response(status=status, body=encode(Error(code, detail[:500]), self.port),
                            content_type=CONTENT_TYPE)

    async def _on_entries(self, request: web.Request) -> web.Response:
        host = request.remote or ""
        if not self._rate.allow(host, self.monotonic()):
            self.stats["rate_limited"] += 1
            return self._refuse(429, "rate_limited", f"too many calls from {host}")
        if self.archive is None:
            return self._refuse(404, "no_archive", "this node serves no archive")
        query = request.query
        feed = query.get("feed", "")
        try:
            since = float(query["since"]) if query.get("since") else None
            until = float(query["until"]) if query.get("until") else None
        except ValueError:
            return self._refuse(400, "malformed", "since and until must be Unix seconds")
        if not feed or len(feed) > 2048:
            return self._refuse(400, "malformed", "feed= must name a feed URL (<= 2048 chars)")
        entries = await self.archive(feed, since, until, self.settings.max_archive_entries)
        self.stats["archive_served"] += 1
        return web.Response(body=_encoder.encode(Archived(feed, entries)),
                            content_type=CONTENT_TYPE)

    async def download(self, holder: Address, feed: str, since: float | None = None,
                       until: float | None = None) -> list[Entry]:
        """The entries of ``feed`` in [since, until] that ``holder`` keeps (3.6: the requester
        downloads from the chosen holder directly). Raises :class:`ConnectionError` saying why
        when the holder cannot be reached or answers nonsense."""
        params = {"feed": feed}
        if since is not None:
            params["since"] = repr(since)
        if until is not None:
            params["until"] = repr(until)
        url = f"http://{holder[0]}:{holder[1]}{ENTRIES_PATH}"
        assert self._session is not None
        try:
            async with self._session.get(url, params=params) as response:
                body = await _read_capped(response.content, self.settings.max_body_bytes)
                status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise ConnectionError(f"archive download of {feed} from {holder[0]}:{holder[1]} "
                                  f"failed: {error!r}") from error
        if status != 200 or len(body) > self.settings.max_body_bytes:
            raise ConnectionError(f"archive download of {feed} from {holder[0]}:{holder[1]}: "
                                  f"HTTP {status}, {len(body)} bytes")
        try:
            archived = _archived_decoder.decode(body)
        except (msgspec.ValidationError, msgspec.DecodeError) as error:
            raise ConnectionError(f"archive download of {feed} from {holder[0]}:{holder[1]}: "
                                  f"not an archive answer: {error}") from error
        if archived.feed != feed:
            raise ConnectionError(f"archive download of {feed} from {holder[0]}:{holder[1]}: "
                                  f"it answered for another feed, {archived.feed[:200]}")
        return archived.entries


async def _read_capped(stream: aiohttp.StreamReader, cap: int) -> bytes:
    """The whole body, or its first ``cap + 1`` bytes if it is longer (the caller refuses it).
    One ``read(n)`` returns what has arrived so far, which for a large body is only a part;
    reading to the end also lets a client connection go back to the pool for the next call."""
    body = bytearray()
    while len(body) <= cap:
        chunk = await stream.read(cap + 1 - len(body))
        if not chunk:
            break
        body += chunk
    return bytes(body)


def _port(value: str) -> int | None:
    try:
        port = int(value)
    except ValueError:
        return None
    return port if 1 <= port <= 65535 else None


def _is_error_to(output: Send, address: Address) -> bool:
    return output.to == address and isinstance(output.message, Error)


def _take_reply(sends: list[Send], sender: Address) -> Message | None:
    """Remove and return the first message the node addressed to ``sender``: it travels back
    as the response body instead of a call of its own."""
    for i, output in enumerate(sends):
        if output.to == sender:
            del sends[i]
            return output.message
    return None
