"""The fetch transport port: one HTTP exchange, and nothing else (as httpx's ``BaseTransport``).

:class:`~.client.Fetcher` decides everything a polite fetch involves (validators, redirects hop
by hop, caps on bytes, decoding, the address guard on IP literals, what a status means) and hands
each hop to a :class:`Transport`:

* :class:`AiohttpTransport` (the default): real sockets through aiohttp, every resolved address
  passing the :class:`~.guard.AddressGuard`, so neither a DNS name pointing inward nor a redirect
  to one gets through;
* :class:`HandlerTransport`: a function answers each request in-process, without a socket, for
  tests and for a peer that serves feeds from its own archive.

A transport raises :class:`FetchFailure` (an outcome and a message saying what, where and why)
when there is no response; a response's body may raise it too (cut short, malformed).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import NamedTuple, Protocol

import aiohttp
from aiohttp.abc import AbstractResolver
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from feedmesh.fetch.guard import AddressGuard, BlockedAddressError, GuardedResolver
from feedmesh.model import FetchOutcome

__all__ = [
    "AiohttpTransport",
    "FetchFailure",
    "HandlerResponse",
    "HandlerTransport",
    "Timeouts",
    "Transport",
    "TransportRequest",
    "TransportResponse",
]


class FetchFailure(Exception):
    """A fetch failed: how (the outcome a result will carry) and a message naming the URL."""

    def __init__(self, outcome: FetchOutcome, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message
        self.status = status


class Timeouts(NamedTuple):
    total_s: float
    """Until the response's head has arrived."""
    connect_s: float


class TransportRequest(NamedTuple):
    """A GET as a transport sends it."""

    url: URL
    headers: Mapping[str, str]


class TransportResponse(Protocol):
    @property
    def status(self) -> int: ...

    @property
    def reason(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]:
        """Case-insensitive."""
        ...

    @property
    def content_length(self) -> int | None: ...

    def chunks(self, size: int) -> AsyncIterator[bytes]:
        """The body as it arrives, ``size`` bytes at most at a time (still encoded: gzip etc.).
        Raises :class:`FetchFailure` when it is cut short or malformed."""
        ...

    async def release(self) -> None:
        """Done with the response: its connection may serve another request."""
        ...

    def abort(self) -> None:
        """Drop the connection (a body not worth reading to its end)."""
        ...


class Transport(Protocol):
    async def send(self, request: TransportRequest, timeouts: Timeouts) -> TransportResponse:
        """One GET, no redirect followed, no body decoded. Raises :class:`FetchFailure`."""
        ...

    async def close(self) -> None: ...


# -- real sockets ------------------------------------------------------------------------------

class _AiohttpResponse:
    __slots__ = ("_response", "_url")

    def __init__(self, response: aiohttp.ClientResponse, url: URL) -> None:
        self._response = response
        self._url = url

    @property
    def status(self) -> int:
        return self._response.status

    @property
    def reason(self) -> str:
        return self._response.reason or ""

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._response.headers

    @property
    def content_length(self) -> int | None:
        return self._response.content_length

    async def chunks(self, size: int) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_chunked(size):
                yield chunk
        except aiohttp.ClientPayloadError as exc:
            raise FetchFailure(FetchOutcome.PROTOCOL_ERROR,
                               f"{self._url}: body cut short or malformed: {exc}",
                               self.status) from exc
        except aiohttp.ClientError as exc:
            raise FetchFailure(FetchOutcome.CONNECTION_ERROR,
                               f"{self._url}: connection failed while reading the body: {exc}",
                               self.status) from exc

    async def release(self) -> None:
        self._response.release()

    def abort(self) -> None:
        self._response.close()


class AiohttpTransport:
    """HTTP over real sockets, every resolved address checked by ``guard``; connections are made
    from ``source_address`` when given (an emulated host's own loopback address)."""

    def __init__(self, guard: AddressGuard, *, max_connections: int = 256,
                 resolver: AbstractResolver | None = None, source_address: str = "") -> None:
        self.guard = guard
        self.max_connections = max_connections
        self.source_address = source_address
        self._resolver = resolver
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            inner = self._resolver or aiohttp.ThreadedResolver()
            connector = aiohttp.TCPConnector(
                limit=self.max_connections, limit_per_host=0,
                resolver=GuardedResolver(inner, self.guard), ttl_dns_cache=300,
                local_addr=(self.source_address, 0) if self.source_address else None,
            )
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=("Accept-Encoding",),
            )
        return self._session

    async def send(self, request: TransportRequest, timeouts: Timeouts) -> TransportResponse:
        url = request.url
        timeout = aiohttp.ClientTimeout(total=timeouts.total_s, connect=timeouts.connect_s)
        try:
            response = await self._open().get(url, headers=dict(request.headers),
                                              allow_redirects=False, timeout=timeout)
        except TimeoutError as exc:
            raise FetchFailure(FetchOutcome.TIMEOUT,
                               f"{url}: no response within {timeouts.total_s:.3g} s") from exc
        except aiohttp.ClientConnectorDNSError as exc:
            cause = exc.os_error
            if isinstance(cause, BlockedAddressError):
                raise FetchFailure(FetchOutcome.BLOCKED, f"{url}: {cause}") from exc
            raise FetchFailure(FetchOutcome.DNS_ERROR,
                               f"{url}: cannot resolve host {url.host!r}: "
                               f"{cause.strerror or cause}") from exc
        except aiohttp.ClientConnectorError as exc:
            raise FetchFailure(FetchOutcome.CONNECTION_ERROR,
                               f"{url}: cannot connect to {exc.host}:{exc.port}: "
                               f"{exc.os_error.strerror or exc.os_error}") from exc
        except aiohttp.InvalidURL as exc:
            raise FetchFailure(FetchOutcome.INVALID_URL, f"{url}: invalid URL: {exc}") from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise FetchFailure(FetchOutcome.PROTOCOL_ERROR,
                               f"{url}: server closed the connection before answering") from exc
        except aiohttp.ClientResponseError as exc:
            raise FetchFailure(FetchOutcome.PROTOCOL_ERROR,
                               f"{url}: malformed HTTP response: {exc.message}") from exc
        except aiohttp.ClientError as exc:
            raise FetchFailure(FetchOutcome.CONNECTION_ERROR,
                               f"{url}: {type(exc).__name__}: {exc}") from exc
        return _AiohttpResponse(response, url)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


# -- no sockets ---------------------------------------------------------------------------------

class HandlerResponse:
    """A whole response, as a handler gives it to :class:`HandlerTransport`."""

    def __init__(self, status: int = 200, body: bytes = b"",
                 headers: Mapping[str, str] | None = None, reason: str = "") -> None:
        self.status = status
        self.body = body
        self.reason = reason
        self.headers: CIMultiDict[str] = CIMultiDict(headers or {})
        self.content_length: int | None = len(body)

    async def chunks(self, size: int) -> AsyncIterator[bytes]:
        for start in range(0, len(self.body), size):
            yield self.body[start:start + size]

    async def release(self) -> None:
        return None

    def abort(self) -> None:
        return None


Handler = Callable[[TransportRequest], HandlerResponse | Awaitable[HandlerResponse]]


class HandlerTransport:
    """Each request answered by ``handler`` in this process: no socket, no address.

    The handler may raise :class:`FetchFailure` to play a network failure."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    async def send(self, request: TransportRequest, timeouts: Timeouts) -> TransportResponse:
        answer = self.handler(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    async def close(self) -> None:
        return None
