"""Kept-alive HTTP/1.1 calls from one node to its peers: one connection per peer, calls pipelined.

A FeedEx node calls the same few neighbours all the time (check_did, put_entries, update_subset),
each call a small POST. aiohttp's ``ClientSession`` spends about 150-180 microseconds of CPU on
each such call (measured on loopback: URL and header handling, a task and timers per request,
cookies, tracing hooks), which made the outgoing side half of a peer's CPU when many peers share
a machine (``benchmarks/mesh_feedex.py``). :class:`Channels` does the one thing needed, about
40 microseconds a call: for each peer address a single TCP connection made from the node's own
address, requests written back to back (HTTP/1.1 pipelining), answers read in order by
``httptools`` (the llhttp parser, as uvicorn uses). The peer's side is still aiohttp's server.

* A connect that fails fails its calls with :class:`ConnectionError` ("cannot connect"), or
  :class:`TimeoutError` when it got no answer within ``connect_timeout_s``.
* A call that gets no answer within ``call_timeout_s`` fails with :class:`TimeoutError`, and the
  connection is closed (pipelined answers after it could no longer be matched to their calls):
  the calls queued behind it fail with :class:`ConnectionError`.
* A connection the peer closed, or that breaks, fails the calls still waiting on it with
  :class:`ConnectionError`; a call that was written on a connection used before and got no byte
  of answer is sent once more on a new connection (the peer may have closed an idle connection
  just as the call went out: the race every kept-alive client has).
* An answer whose body is over ``max_body_bytes`` fails its call with :class:`ConnectionError`
  and closes the connection.
* A connection idle for ``idle_s`` is closed by this side, before the peer's server would
  (aiohttp closes after 75 s).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping

import httptools

__all__ = ["Channels"]

Address = tuple[str, int]


class _Call:
    __slots__ = ("body", "future", "timer")

    def __init__(self, future: asyncio.Future[tuple[int, bytes]]) -> None:
        self.future = future
        self.body: list[bytes] = []
        self.timer: asyncio.TimerHandle | None = None


class _Retry(ConnectionError):
    """The call went out on a reused connection that closed before any answer came."""


class _Connection(asyncio.Protocol):
    def __init__(self, owner: Channels, address: Address) -> None:
        self.owner = owner
        self.address = address
        self.transport: asyncio.WriteTransport | None = None
        self.waiting: deque[_Call] = deque()
        self.parser = httptools.HttpResponseParser(self)
        self.answered = 0
        self.answering = False  # bytes of the current answer have come
        self.size = 0
        self.closed = False
        self.last_used = 0.0

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.answering = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(ConnectionError(f"{self._name()} answered what is not HTTP: {error}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionError(f"{self._name()} closed the connection"
                                   + (f": {exc!r}" if exc else "")))

    # -- httptools callbacks -------------------------------------------------------------------

    def on_body(self, body: bytes) -> None:
        if not self.waiting:
            return
        self.size += len(body)
        if self.size > self.owner.max_body_bytes:
            self._fail(ConnectionError(f"{self._name()} answered with a body over "
                                       f"{self.owner.max_body_bytes} bytes"))
            return
        self.waiting[0].body.append(body)

    def on_message_complete(self) -> None:
        if not self.waiting:
            self._fail(ConnectionError(f"{self._name()} answered a call that was not made"))
            return
        call = self.waiting.popleft()
        self.answered += 1
        self.answering = False
        self.size = 0
        if call.timer is not None:
            call.timer.cancel()
        if not call.future.done():
            call.future.set_result((self.parser.get_status_code(), b"".join(call.body)))
        if not self.parser.should_keep_alive():
            self._fail(ConnectionError(f"{self._name()} closed the connection after an answer"))

    # -- calls ---------------------------------------------------------------------------------

    def call(self, request: bytes, loop: asyncio.AbstractEventLoop) -> _Call:
        call = _Call(loop.create_future())
        call.timer = loop.call_later(self.owner.call_timeout_s, self._timed_out, call)
        self.waiting.append(call)
        self.last_used = loop.time()
        if self.transport is None or self.transport.is_closing():
            self._fail(ConnectionError(f"{self._name()}: the connection is closing"))
        else:
            self.transport.write(request)
        return call

    def _timed_out(self, call: _Call) -> None:
        if not call.future.done():
            call.future.set_exception(TimeoutError(
                f"{self._name()} did not answer within {self.owner.call_timeout_s} s"))
        self._fail(ConnectionError(f"{self._name()}: an earlier call on this connection timed "
                                   "out"))

    def _fail(self, error: ConnectionError) -> None:
        """Close the connection; every call still waiting fails (retried once if it went out on
        a reused connection and no byte of its answer came)."""
        if not self.closed:
            self.closed = True
            self.owner._forget(self)
            if self.transport is not None:
                self.transport.close()
        reused = self.answered > 0
        first = True
        while self.waiting:
            call = self.waiting.popleft()
            if call.timer is not None:
                call.timer.cancel()
            if not call.future.done():
                fresh = not (first and self.answering)
                call.future.set_exception(_Retry(str(error)) if reused and fresh else error)
            first = False

    def close_if_idle(self, now: float) -> bool:
        if not self.waiting and now - self.last_used >= self.owner.idle_s:
            self._fail(ConnectionError("idle"))
            return True
        return False

    def _name(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"


class Channels:
    """POSTs from ``local_host`` to any peer: ``await post(address, path, body, headers)`` ->
    (status, body). ``await close()`` closes every connection."""

    def __init__(self, local_host: str, *, connect_timeout_s: float, call_timeout_s: float,
                 max_body_bytes: int, idle_s: float = 30.0) -> None:
        self.local_host = local_host
        self.connect_timeout_s = connect_timeout_s
        self.call_timeout_s = call_timeout_s
        self.max_body_bytes = max_body_bytes
        self.idle_s = idle_s
        self.connections_made = 0
        self._open: dict[Address, _Connection] = {}
        self._connecting: dict[Address, asyncio.Future[_Connection]] = {}
        self._heads: dict[tuple[Address, str], bytes] = {}
        self._sweeper: asyncio.TimerHandle | None = None
        self._closed = False

    async def post(self, to: Address, path: str, body: bytes,
                   headers: Mapping[str, str]) -> tuple[int, bytes]:
        loop = asyncio.get_running_loop()
        request = self._head(to, path, headers) + str(len(body)).encode() + b"\r\n\r\n" + body
        for attempt in (1, 2):
            connection = self._open.get(to)
            if connection is None or connection.closed:
                connection = await self._connect(to)
            call = connection.call(request, loop)
            try:
                return await call.future
            except _Retry:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _head(self, to: Address, path: str, headers: Mapping[str, str]) -> bytes:
        """The request up to the Content-Length value (headers are the same for every call of a
        node, so the bytes are made once per peer)."""
        head = self._heads.get((to, path))
        if head is None:
            if len(self._heads) > 4096:
                self._heads.clear()
            lines = [f"POST {path} HTTP/1.1", f"Host: {to[0]}:{to[1]}"]
            lines += [f"{name}: {value}" for name, value in headers.items()]
            head = self._heads[(to, path)] = ("\r\n".join(lines) + "\r\nContent-Length: ").encode()
        return head

    async def _connect(self, to: Address) -> _Connection:
        if self._closed:
            raise ConnectionError("the node's channels are closed")
        pending = self._connecting.get(to)
        if pending is not None:  # another call is connecting to the same peer: share it
            return await asyncio.shield(pending)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_Connection] = loop.create_future()
        self._connecting[to] = future
        try:
            _, connection = await asyncio.wait_for(loop.create_connection(
                lambda: _Connection(self, to), to[0], to[1], local_addr=(self.local_host, 0)),
                self.connect_timeout_s)
        except (OSError, TimeoutError) as error:
            # a connect that timed out is not a refusal: the peer may be alive and slow
            failure: OSError = (
                TimeoutError(f"cannot connect to {to[0]}:{to[1]}: no answer within "
                             f"{self.connect_timeout_s} s") if isinstance(error, TimeoutError)
                else ConnectionError(f"cannot connect to {to[0]}:{to[1]}: {error!r}"))
            future.set_exception(failure)
            future.exception()  # retrieved: callers sharing it get it through shield
            raise failure from error
        finally:
            self._connecting.pop(to, None)
        self.connections_made += 1
        self._open[to] = connection
        future.set_result(connection)
        if self._sweeper is None:
            self._sweeper = loop.call_later(self.idle_s, self._sweep)
        return connection

    def _forget(self, connection: _Connection) -> None:
        if self._open.get(connection.address) is connection:
            del self._open[connection.address]

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for connection in list(self._open.values()):
            connection.close_if_idle(now)
        self._sweeper = loop.call_later(self.idle_s, self._sweep) if self._open else None

    async def close(self) -> None:
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for connection in list(self._open.values()):
            connection._fail(ConnectionError("the node's channels are closed"))
