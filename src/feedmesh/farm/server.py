"""The farm's HTTP server: one asyncio protocol on K loopback addresses, all on one port.

Usage, in-process (tests)::

    async with FarmServer(FarmConfig(feeds=50, faults="none")) as farm:
        farm.feed_url(3)          # http://127.0.0.1:<port>/feeds/3
        farm.requests(feed=3)     # what the client under test asked for

Only loopback addresses are ever bound (127.0.0.1, or 127.0.1.1..K with ``hosts=K``). Feed ``i``
lives on host ``i % K``; asking another host for it gets a 404 that says where it lives, as a
real site would not serve another site's feed. Times on the wire (Date, Last-Modified,
Retry-After dates) are farm times.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import random
import time
from email.utils import formatdate

from feedmesh.clock import AcceleratedClock, Clock
from feedmesh.farm.config import FarmConfig, host_address
from feedmesh.farm.control import control_reply, opml_document
from feedmesh.farm.documents import FarmModel, FeedDocument
from feedmesh.farm.faults import Fault
from feedmesh.farm.http import RequestError, parse_request, response_head
from feedmesh.farm.peerlist import RecentPeers
from feedmesh.farm.posting import Post
from feedmesh.farm.reply import Reply, text_reply
from feedmesh.farm.requestlog import (
    BODY_BYTES,
    BYTES_SENT,
    DURATION,
    FAULT,
    STATUS,
    FarmRequest,
    RequestLog,
)
from feedmesh.farm.routes import article_reply, feed_reply

__all__ = ["FarmServer"]

logger = logging.getLogger(__name__)

_INDEX = ("feedmesh farm\n\n/opml                      every feed\n"
          "/feeds/<id>                a feed\n"
          "/feeds/<id>/posts/<key>    an article (the link of an entry)\n"
          "/_farm/requests?since=N    request log (JSON)\n/_farm/truth/<id>          posts\n"
          "/_farm/spec/<id>           a feed's attributes\n/_farm/stats               counters\n")


_VARIANTS = ("", "moved", "loop")
# Faults whose feeds still serve their (cached) document.
_DOCUMENT_FAULTS = {Fault.SLOW, Fault.SLOW_BODY, Fault.MALFORMED, Fault.WRONG_CHARSET, Fault.UTF16,
                    Fault.DUPLICATE_GUIDS, Fault.MISSING_DATES, Fault.FUTURE_DATES,
                    Fault.REDIRECT_301, Fault.REDIRECT_302, Fault.REDIRECT_307, Fault.REDIRECT_308,
                    Fault.RATE_LIMIT, Fault.RATE_LIMIT_DATE}


class _Connection(asyncio.Protocol):
    """One client connection: parses requests in order and carries out their replies."""

    def __init__(self, farm: FarmServer) -> None:
        self.farm = farm
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.host = ""
        self.client = ""
        self.answered = 0
        self.busy = False
        self.closed = False
        self.task: asyncio.Task | None = None
        self._can_write = asyncio.Event()
        self._can_write.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.host = transport.get_extra_info("sockname")[0]
        self.client = transport.get_extra_info("peername")[0]
        self.farm._connections.add(self)
        self.farm._opened(self.host)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._can_write.set()
        if self in self.farm._connections:
            self.farm._connections.discard(self)
            self.farm._open_by_host[self.host] -= 1
        if self.task is not None:
            self.task.cancel()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._serve_buffered()
        elif len(self.buffer) > 256 * 1024:
            self.transport.pause_reading()  # a client pipelining far ahead of a slow reply

    def _serve_buffered(self) -> None:
        while not self.busy and not self.closed:
            try:
                request = parse_request(self.buffer)
            except RequestError as error:
                self._write(response_head(error.status, [("Content-Length", "0"),
                                                         ("Connection", "close")]))
                self.transport.close()
                return
            if request is None:
                return
            try:
                reply, record = self.farm._dispatch(request, self.host, self.client)
            except Exception as error:  # a farm bug must not look like a network fault
                logger.exception("farm failed on %s %s", request.method, request.target)
                reply, record = text_reply(500, f"farm error: {error!r}\n"), None
            round_trip = (self.farm.round_trip_s(self.client, self.host)
                          if not request.path.startswith("/_farm/") else None)
            new_connection = self.answered == 0
            self.answered += 1
            if (reply.delay_s or reply.hold or reply.trickle or reply.chunks is not None
                    or reply.pending is not None or round_trip is not None):
                self.busy = True
                self.task = asyncio.ensure_future(self._deliver_later(
                    request, reply, record, round_trip, new_connection))
                return
            self._deliver(request, reply, record)

    def _headers(self, request, reply: Reply) -> bytes:
        headers = [("Date", self.farm.date_header()), ("Server", "feedmesh-farm")]
        headers.extend(reply.headers)
        if not request.keep_alive:
            headers.append(("Connection", "close"))
        return response_head(reply.status, headers)

    def _deliver(self, request, reply: Reply, record: list | None) -> None:
        head = self._headers(request, reply)
        body = b"" if request.method == "HEAD" or reply.status == 304 else reply.body
        self._write(head + body if body else head)
        if record is not None:
            record[STATUS] = reply.status
            record[BODY_BYTES] = len(body)
            record[BYTES_SENT] = len(head) + len(body)
            record[FAULT] = reply.fault.value if reply.fault.value != "none" else ""
            record[DURATION] = time.time() - record[2]
        if not request.keep_alive:
            self.transport.close()

    def _write(self, data: bytes) -> None:
        if not self.closed:
            self.transport.write(data)

    async def _deliver_later(self, request, reply: Reply, record: list | None,
                             round_trip: float | None = None, new_connection: bool = False) -> None:
        try:
            if reply.pending is not None:
                reply = await reply.pending
            if round_trip is not None:  # the emulated wide-area network, then the reply's own
                sent = 0 if request.method == "HEAD" or reply.status == 304 else len(reply.body)
                await asyncio.sleep(self.farm.geography_delay_s(round_trip, sent, new_connection))
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            if reply.hold:
                if record is not None:
                    record[FAULT] = reply.fault.value
                await asyncio.Event().wait()  # until the client gives up (cancelled on close)
            if reply.trickle is not None and request.method != "HEAD":
                await self._trickle(request, reply, record)
            elif reply.chunks is not None and request.method != "HEAD":
                await self._stream(request, reply, record)
            else:
                self._deliver(request, reply, record)
        except asyncio.CancelledError:
            pass
        finally:
            self.busy = False
            self.task = None
            if record is not None and not record[DURATION]:
                record[DURATION] = time.time() - record[2]
        if not self.closed:
            self.transport.resume_reading()
            self._serve_buffered()

    def _start(self, request, reply: Reply, record: list | None) -> int:
        head = self._headers(request, reply)
        self._write(head)
        if record is not None:
            record[STATUS] = reply.status
            record[FAULT] = reply.fault.value
            record[BYTES_SENT] = len(head)
        return len(head)

    async def _trickle(self, request, reply: Reply, record: list | None) -> None:
        size, interval = reply.trickle
        self._start(request, reply, record)
        body = reply.body
        for start in range(0, len(body), size):
            if self.closed:
                return
            self._write(body[start:start + size])
            if record is not None:
                record[BODY_BYTES] += len(body[start:start + size])
                record[BYTES_SENT] += len(body[start:start + size])
            await asyncio.sleep(interval)
        if not request.keep_alive:
            self.transport.close()

    async def _stream(self, request, reply: Reply, record: list | None) -> None:
        self._start(request, reply, record)
        for chunk in reply.chunks:
            if self.closed:
                return
            data = b"%x\r\n%s\r\n" % (len(chunk), chunk) if reply.chunked else chunk
            self._write(data)
            if record is not None:
                record[BODY_BYTES] += len(chunk)
                record[BYTES_SENT] += len(data)
            await self._can_write.wait()
            await asyncio.sleep(0)
        if reply.chunked:
            self._write(b"0\r\n\r\n")
        if not request.keep_alive:
            self.transport.close()


class FarmServer:
    """A running farm. ``await start()`` / ``await stop()``, or ``async with``."""

    def __init__(self, config: FarmConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or AcceleratedClock(speed=config.speed, origin=config.origin)
        self.origin = self.clock.now()
        self.log = RequestLog(config.log_capacity)
        self.addresses = [host_address(i, config.hosts) for i in range(config.hosts)]
        self.port = config.port
        self.model: FarmModel | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._connections: set[_Connection] = set()
        self._open_by_host: dict[str, int] = {}
        self.connections_opened = 0
        self.peak_connections: dict[str, int] = {}
        """The most connections each host address held open at once (a client's politeness,
        as the server sees it)."""
        self._gate: dict[int, float] = {}
        self._nonces: dict[int, int] = {}
        self._rendering: dict[int, asyncio.Future] = {}
        self._opml: bytes | None = None
        self._date_second = -1
        self._date_value = ""
        self._started_real = 0.0
        self._status_counts: dict[int, int] = {}
        self._host_index = {address: i for i, address in enumerate(self.addresses)}
        self._jitter = random.Random(f"farm-jitter:{config.seed}")
        self.peers = RecentPeers()
        """Recent FeedEx clients per feed, listed to each other (:mod:`~feedmesh.farm.peerlist`)."""
        self.hub_url = ""
        """A WebSub hub for the farm's feeds (set by :class:`~feedmesh.farm.websub.FarmHub`):
        every feed reply then advertises it, and the feed's own URL as the topic, in ``Link:``."""

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> FarmServer:
        loop = asyncio.get_running_loop()
        for attempt in range(50):
            port = self.config.port
            servers: list[asyncio.AbstractServer] = []
            try:
                for address in self.addresses:
                    server = await loop.create_server(lambda: _Connection(self), address, port,
                                                      reuse_address=True, backlog=4096)
                    servers.append(server)
                    port = server.sockets[0].getsockname()[1]
            except OSError as error:
                for server in servers:
                    server.close()
                if error.errno != errno.EADDRINUSE or self.config.port or attempt == 49:
                    raise
                continue
            self._servers = servers
            self.port = port
            break
        self.model = FarmModel(self.config, self.base_urls)
        if self.config.prerender:
            self.prerender()
        floods = [i for i, fault in enumerate(self.model.catalog.faults) if fault is Fault.FLOOD]
        if floods:
            # A flood document (10,000 entries, ~0.1 s) is rendered before serving, in a thread,
            # so that a crawler's first cycle does not wait on it; later ones render off the loop.
            await self._warm(floods)
        self._started_real = time.time()
        return self

    async def _warm(self, feed_ids: list[int]) -> None:
        for feed_id in feed_ids:
            now = self.clock.now()
            if self.model.cached(feed_id, now) is None:
                await self.render_off_loop(feed_id, now)

    def prerender(self) -> None:
        """Render every feed's current document and the compressed forms it will be asked for."""
        now = self.clock.now()
        model = self.model
        for feed_id in range(self.config.feeds):
            spec = model.spec(feed_id)
            if spec.fault is not Fault.NONE and spec.fault not in _DOCUMENT_FAULTS:
                continue
            doc = model.document(feed_id, now)
            for coding in ("gzip", "br"):
                if coding in spec.compression:
                    model.body(doc, coding)

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for connection in list(self._connections):
            if connection.transport is not None:
                connection.transport.abort()
        for server in self._servers:
            await server.wait_closed()
        self._servers = []

    async def __aenter__(self) -> FarmServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _opened(self, host: str) -> None:
        self.connections_opened += 1
        count = self._open_by_host[host] = self._open_by_host.get(host, 0) + 1
        if count > self.peak_connections.get(host, 0):
            self.peak_connections[host] = count

    # -- where things are ------------------------------------------------------------------------

    @property
    def base_urls(self) -> list[str]:
        return [f"http://{address}:{self.port}" for address in self.addresses]

    @property
    def base_url(self) -> str:
        return self.base_urls[0]

    @property
    def opml_url(self) -> str:
        return f"{self.base_url}/opml"

    def feed_url(self, feed_id: int) -> str:
        return self.model.feed_url(feed_id)

    # -- what happened ---------------------------------------------------------------------------

    def requests(self, since: int = 0, *, feed: int | None = None,
                 host: str | None = None) -> list[FarmRequest]:
        return self.log.since(since, feed=feed, host=host)

    def truth(self, feed_id: int, since: float | None = None,
              until: float | None = None) -> list[Post]:
        """Posts of the feed in ``(since, until]``, by default from the farm's start to now."""
        start = self.origin if since is None else since
        return self.model.posts(feed_id, start, self.clock.now() if until is None else until)

    def stats(self) -> dict:
        return {"feeds": self.config.feeds, "hosts": self.addresses, "port": self.port,
                "seed": self.config.seed, "speed": self.config.speed, "origin": self.origin,
                "farm_time": self.clock.now(), "uptime_s": time.time() - self._started_real,
                "requests": self.log.next_seq, "by_status": dict(self._status_counts),
                "connections": len(self._connections),
                "peak_connections": dict(self.peak_connections), "cache": self.model.cache_stats()}

    # -- serving ----------------------------------------------------------------------------------

    def date_header(self) -> str:
        now = self.clock.now()
        second = int(now)
        if second != self._date_second:
            self._date_second = second
            self._date_value = formatdate(second, usegmt=True)
        return self._date_value

    def rate_gate(self, feed_id: int, now: float) -> float:
        """Seconds the client must still wait (0: let it through and start a new window)."""
        allowed_at = self._gate.get(feed_id)
        if allowed_at is None:
            self._gate[feed_id] = now + self.config.retry_after_s
            return float(self.config.retry_after_s)
        if now < allowed_at:
            return allowed_at - now
        self._gate[feed_id] = now + self.config.retry_after_s
        return 0.0

    async def render_off_loop(self, feed_id: int, now: float) -> FeedDocument:
        """Render a (big) document in a worker thread, with its compressed forms; one at a time
        per feed, however many requests wait for it."""
        waiting = self._rendering.get(feed_id)
        if waiting is None:
            model = self.model

            def work() -> FeedDocument:
                doc = model.render(feed_id, now)
                for coding in ("gzip", "br"):
                    if coding in model.spec(feed_id).compression:
                        doc.encoded(coding)
                return doc

            waiting = self._rendering[feed_id] = asyncio.ensure_future(
                asyncio.get_running_loop().run_in_executor(None, work))
            try:
                doc = await waiting
            finally:
                del self._rendering[feed_id]
            self.model.remember(doc)
            return doc
        return await asyncio.shield(waiting)

    def round_trip_s(self, client: str, host: str) -> float | None:
        """Emulated round trip between a client address and a farm host (None: no delay)."""
        geography = self.config.geography
        if geography is None:
            return None
        return geography.round_trip_s(client, self._host_index[host], self.config.seed)

    def geography_delay_s(self, round_trip_s: float, body_bytes: int,
                          new_connection: bool) -> float:
        return self.config.geography.delay_s(round_trip_s, body_bytes, new_connection,
                                             self._jitter.random())

    def next_nonce(self, feed_id: int) -> int:
        nonce = self._nonces.get(feed_id, 0) + 1
        self._nonces[feed_id] = nonce
        return nonce

    def _dispatch(self, request, host: str, client: str = "") -> tuple[Reply, list | None]:
        now = self.clock.now()
        path = request.path
        if path.startswith("/_farm/"):
            return control_reply(path, request.params(), now, model=self.model, log=self.log,
                                 origin=self.origin, stats=self.stats), None
        feed_id, variant = _feed_path(path)
        record = self.log.open(now, time.time(), feed_id, host, request.target, request.method,
                               request.headers, client)
        if request.method not in ("GET", "HEAD"):
            reply = text_reply(405, f"{request.method} is not served here\n",
                               extra=[("Allow", "GET, HEAD")])
        elif (feed_id is not None and 0 <= feed_id < self.config.feeds
              and variant.startswith("posts/")):
            spec = self.model.spec(feed_id)
            post = self.model.post(feed_id, variant[6:], now) if spec.host == host else None
            reply = (article_reply(self.model, feed_id, post) if post is not None else
                     text_reply(404, f"feed {feed_id} has no post {variant[6:]}\n"))
        elif feed_id is not None and 0 <= feed_id < self.config.feeds and variant in _VARIANTS:
            spec = self.model.spec(feed_id)
            if spec.host != host:
                reply = text_reply(404, f"feed {feed_id} is served by {spec.host}, not {host}\n")
            else:
                reply = feed_reply(self.model, self, request, feed_id, variant, now)
                if self.hub_url and variant == "":
                    reply.headers.append(("Link", (f'<{self.hub_url}>; rel="hub", '
                                                   f'<{self.feed_url(feed_id)}>; rel="self"')))
                stated = request.headers.get("feedex-peer")
                if stated is not None and variant == "":
                    listed = self.peers.note(feed_id, client, stated, now)
                    if listed:
                        reply.headers.append(("Link", listed))
        elif path == "/opml":
            if self._opml is None:
                self._opml = opml_document(self.model)
            reply = Reply(200, [("Content-Type", "text/x-opml; charset=utf-8"),
                                ("Content-Length", str(len(self._opml)))], self._opml)
        elif path == "/":
            reply = text_reply(200, _INDEX)
        else:
            reply = text_reply(404, f"nothing at {path}\n")
        self._status_counts[reply.status] = self._status_counts.get(reply.status, 0) + 1
        return reply, record


def _feed_path(path: str) -> tuple[int | None, str]:
    """``/feeds/12`` -> (12, ""), ``/feeds/12/moved`` -> (12, "moved"); else (None, "")."""
    if not path.startswith("/feeds/"):
        return None, ""
    head, _, variant = path[7:].partition("/")
    return (int(head), variant) if head.isdigit() else (None, "")
