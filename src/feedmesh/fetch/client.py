"""The polite fetcher: one conditional GET per call, with every safeguard a crawler of other
people's servers owes them and itself.

* Conditional GET: validators are echoed exactly as the server sent them; ``A-IM: feed`` asks for
  RFC 3229 deltas (226 IM Used); gzip, deflate and br are accepted.
* Bounded: connect and total deadlines, a cap on wire bytes (endless bodies) and on inflated bytes
  (bombs), a redirect limit with loop detection.
* Guarded: every hop's destination address passes :class:`AddressGuard` first.
* Polite: a cap on connections per host (:class:`HostConnections`; *when* to fetch from a host
  is the scheduler's decision), an honest User-Agent.
* Typed: every call returns a :class:`FetchResult`; failures carry a :class:`FetchError` whose
  message says what, where and why. Nothing raises out of :meth:`Fetcher.fetch` but cancellation.
* Transport-free: each hop goes through a :class:`~.transport.Transport` (real sockets by
  default; a function answering in-process for tests and peers), so all of the above holds
  whatever carries the bytes.

What to *do* about a result (back off, deactivate, adopt a permanent redirect) is decided by the
pure functions of :mod:`feedmesh.fetch.state`, not here.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Mapping
from types import TracebackType

import msgspec
from aiohttp.abc import AbstractResolver
from yarl import URL

from feedmesh.clock import Clock, SystemClock
from feedmesh.fetch.decode import DecodedTooLarge, DecodeError, make_decoder
from feedmesh.fetch.guard import AddressGuard, BlockedAddressError
from feedmesh.fetch.hints import max_age_seconds, retry_after_seconds
from feedmesh.fetch.hosts import HostConnections
from feedmesh.fetch.redact import redact_credentials
from feedmesh.fetch.settings import FetchSettings, user_agent
from feedmesh.fetch.transport import (
    AiohttpTransport,
    FetchFailure,
    Timeouts,
    Transport,
    TransportRequest,
    TransportResponse,
)
from feedmesh.model import FetchError, FetchOutcome, FetchResult

__all__ = ["FetchRequest", "Fetcher", "fetch_url"]

ACCEPT = ("application/atom+xml, application/rss+xml, application/rdf+xml;q=0.9, "
          "application/feed+json, application/json;q=0.9, application/xml;q=0.8, "
          "text/xml;q=0.8, */*;q=0.1")
_REDIRECTS = {301, 302, 303, 307, 308}
_PERMANENT = {301, 308}


class FetchRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    url: str
    etag: str = ""
    last_modified: str = ""
    subscribers: int | None = None


class Fetcher:
    """Fetches feeds politely. Use as ``async with Fetcher(settings) as fetcher``.

    ``transport`` carries each hop (default: :class:`~.transport.AiohttpTransport` on real
    sockets, whose DNS answers go through ``resolver`` when given, then the address guard)."""

    def __init__(self, settings: FetchSettings | None = None, *, clock: Clock | None = None,
                 resolver: AbstractResolver | None = None,
                 transport: Transport | None = None) -> None:
        self.settings = settings or FetchSettings()
        self.clock = clock or SystemClock()
        self.guard = AddressGuard(allow_all=self.settings.allow_private,
                                  allow_networks=self.settings.allow_networks)
        self.hosts = HostConnections(self.settings.per_host_connections)
        self.transport = transport or AiohttpTransport(
            self.guard, max_connections=self.settings.max_connections, resolver=resolver,
            source_address=self.settings.source_address)

    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await self.transport.close()

    async def fetch(self, request: FetchRequest | str) -> FetchResult:
        result = await self._fetch_reporting(request)
        if result.error is not None and "@" in result.error.message:
            # The URL may carry credentials; a message is shown and logged: never them.
            error = msgspec.structs.replace(
                result.error, message=redact_credentials(result.error.message))
            result = msgspec.structs.replace(result, error=error)
        return result

    async def _fetch_reporting(self, request: FetchRequest | str) -> FetchResult:
        if isinstance(request, str):
            request = FetchRequest(url=request)
        fetched_at = self.clock.now()
        started = time.perf_counter()
        progress = _Progress()
        try:
            return await self._fetch(request, fetched_at, started, progress)
        except FetchFailure as failure:
            return self._failed(request, fetched_at, started, progress, failure.outcome,
                                failure.message, failure.status)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug or an aiohttp surprise must not stop the crawl
            return self._failed(request, fetched_at, started, progress,
                                FetchOutcome.PROTOCOL_ERROR,
                                f"unexpected {type(exc).__name__} fetching {request.url}: {exc}",
                                None)

    def _failed(self, request: FetchRequest, fetched_at: float, started: float,
                progress: _Progress, outcome: FetchOutcome, message: str,
                status: int | None) -> FetchResult:
        if progress.final_url and not message.startswith(request.url):
            message = f"{request.url} redirected: {message}"  # name the feed, not only the hop
        return FetchResult(
            url=request.url, outcome=outcome, fetched_at=fetched_at,
            elapsed_s=time.perf_counter() - started, status=status,
            final_url=progress.final_url, wire_bytes=progress.wire_bytes,
            error=FetchError(outcome=outcome, message=message),
        )

    def _headers(self, request: FetchRequest) -> dict[str, str]:
        headers = {
            "User-Agent": self.settings.user_agent or user_agent(request.subscribers),
            "Accept": ACCEPT,
            "Accept-Encoding": "gzip, deflate, br",
        }
        if request.etag:
            headers["If-None-Match"] = request.etag
            if self.settings.accept_delta:
                headers["A-IM"] = "feed"
        if request.last_modified:
            headers["If-Modified-Since"] = request.last_modified
        headers.update(self.settings.headers)
        return headers

    def _check_url(self, url: URL) -> str:
        if url.scheme not in ("http", "https"):
            raise FetchFailure(FetchOutcome.INVALID_URL,
                               f"{url}: scheme {url.scheme or '(none)'!r} is not http or https")
        host = url.raw_host
        if not host:
            raise FetchFailure(FetchOutcome.INVALID_URL, f"{url}: no host name")
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return host.lower()
        # aiohttp skips the resolver for IP literals, so the guard checks them here.
        try:
            self.guard.check(host, host.strip("[]"))
        except BlockedAddressError as exc:
            raise FetchFailure(FetchOutcome.BLOCKED, f"{url}: {exc}") from exc
        return host

    async def _fetch(self, request: FetchRequest, fetched_at: float, started: float,
                     progress: _Progress) -> FetchResult:
        settings = self.settings
        headers = self._headers(request)
        try:
            url = URL(request.url, encoded=False)
        except (ValueError, TypeError) as exc:
            raise FetchFailure(FetchOutcome.INVALID_URL,
                               f"{request.url!r} is not a URL: {exc}") from exc
        visited = {str(url)}
        permanent = True
        deadline: float | None = None
        for hop in range(settings.max_redirects + 1):
            host = self._check_url(url)
            async with self.hosts.slot(host):
                if deadline is None:  # waiting for a connection does not eat the time budget
                    deadline = time.perf_counter() + settings.total_timeout_s
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    raise FetchFailure(FetchOutcome.TIMEOUT, f"{url}: total deadline of "
                                       f"{settings.total_timeout_s:g} s passed during redirects")
                timeouts = Timeouts(total_s=remaining,
                                    connect_s=min(settings.connect_timeout_s, remaining))
                response = await self.transport.send(TransportRequest(url, headers), timeouts)
                try:
                    status = response.status
                    if status in _REDIRECTS:
                        target = self._redirect_target(url, response, hop, visited)
                        permanent = permanent and status in _PERMANENT
                        progress.final_url = str(target)
                        if permanent:
                            progress.permanent = str(target)
                        url = target
                        continue
                    return await self._finish(request, response, url, fetched_at, started,
                                              progress, deadline)
                finally:
                    await response.release()
        raise FetchFailure(FetchOutcome.REDIRECT_ERROR,  # unreachable: _redirect_target raises
                           f"{request.url}: more than {settings.max_redirects} redirects")

    def _redirect_target(self, url: URL, response: TransportResponse, hop: int,
                         visited: set[str]) -> URL:
        location = response.headers.get("Location", "").strip()
        if not location:
            raise FetchFailure(FetchOutcome.PROTOCOL_ERROR,
                               f"{url}: {response.status} redirect without a Location header",
                               response.status)
        try:
            target = url.join(URL(location, encoded=False))
        except (ValueError, TypeError) as exc:
            raise FetchFailure(FetchOutcome.REDIRECT_ERROR,
                               f"{url}: redirect to an invalid URL {location!r}",
                               response.status) from exc
        if str(target) in visited:
            raise FetchFailure(FetchOutcome.REDIRECT_ERROR,
                               f"{url}: redirect loop back to {target} after {hop + 1} hop(s)",
                               response.status)
        if hop + 1 > self.settings.max_redirects:
            raise FetchFailure(FetchOutcome.REDIRECT_ERROR,
                               f"{url}: more than {self.settings.max_redirects} redirects "
                               f"(next: {target})", response.status)
        visited.add(str(target))
        return target

    async def _finish(self, request: FetchRequest, response: TransportResponse, url: URL,
                      fetched_at: float, started: float, progress: _Progress,
                      deadline: float) -> FetchResult:
        status = response.status
        now = self.clock.now()
        headers = response.headers
        retry_after = retry_after_seconds(headers.get("Retry-After"), now)
        outcome = _classify(status, retry_after, headers.get("IM", ""))
        body = b""
        if outcome in (FetchOutcome.OK, FetchOutcome.DELTA):
            body = await self._read_body(response, url, progress, deadline)
        else:
            await self._drain_small(response, progress)
        error = None
        if outcome not in (FetchOutcome.OK, FetchOutcome.DELTA, FetchOutcome.NOT_MODIFIED):
            wait = f"; retry after {retry_after:g} s" if retry_after is not None else ""
            error = FetchError(outcome=outcome,
                               message=f"{url}: HTTP {status} {response.reason or ''}".rstrip()
                               + wait)
        not_modified = outcome == FetchOutcome.NOT_MODIFIED
        return FetchResult(
            url=request.url, outcome=outcome, fetched_at=fetched_at,
            elapsed_s=time.perf_counter() - started, status=status,
            final_url=progress.final_url, permanent_redirect=progress.permanent,
            body=body, content_type=headers.get("Content-Type", ""),
            etag=headers.get("ETag", request.etag if not_modified else ""),
            last_modified=headers.get("Last-Modified",
                                      request.last_modified if not_modified else ""),
            wire_bytes=progress.wire_bytes, decoded_bytes=len(body),
            retry_after_s=retry_after, max_age_s=max_age_seconds(headers, now), error=error,
            links=_link_header(headers),
        )

    async def _read_body(self, response: TransportResponse, url: URL, progress: _Progress,
                         deadline: float) -> bytes:
        settings = self.settings
        declared = response.content_length
        if declared is not None and declared > settings.max_body_bytes:
            raise FetchFailure(FetchOutcome.TOO_LARGE,
                               f"{url}: Content-Length {declared} exceeds the "
                               f"{settings.max_body_bytes}-byte limit", response.status)
        try:
            decoder = make_decoder(response.headers.get("Content-Encoding", ""),
                                   settings.max_decoded_bytes)
        except DecodeError as exc:
            raise FetchFailure(FetchOutcome.PROTOCOL_ERROR, f"{url}: {exc}",
                               response.status) from exc
        parts: list[bytes] = []
        try:
            async with asyncio.timeout(max(0.0, deadline - time.perf_counter())):
                async for chunk in response.chunks(64 * 1024):
                    progress.wire_bytes += len(chunk)
                    if progress.wire_bytes > settings.max_body_bytes:
                        raise FetchFailure(FetchOutcome.TOO_LARGE,
                                           f"{url}: body exceeds the "
                                           f"{settings.max_body_bytes}-byte limit (stopped "
                                           "reading)", response.status)
                    parts.append(decoder.feed(chunk))
                parts.append(decoder.finish())
        except TimeoutError as exc:
            raise FetchFailure(FetchOutcome.TIMEOUT,
                               f"{url}: body not complete within {settings.total_timeout_s:g} s "
                               f"({progress.wire_bytes} bytes received)", response.status) from exc
        except DecodedTooLarge as exc:
            raise FetchFailure(FetchOutcome.TOO_LARGE,
                               f"{url}: {exc} after inflating {progress.wire_bytes} compressed "
                               "bytes (compression bomb?)", response.status) from exc
        except DecodeError as exc:
            raise FetchFailure(FetchOutcome.PROTOCOL_ERROR, f"{url}: {exc}",
                               response.status) from exc
        return b"".join(parts)

    async def _drain_small(self, response: TransportResponse, progress: _Progress) -> None:
        """Read a short error body so the connection can be reused; give up on long ones."""
        if response.content_length is not None and response.content_length <= 64 * 1024:
            try:
                async with asyncio.timeout(1.0):
                    async for chunk in response.chunks(64 * 1024):
                        progress.wire_bytes += len(chunk)
                return
            except (TimeoutError, FetchFailure):
                pass
        response.abort()


class _Progress:
    __slots__ = ("final_url", "permanent", "wire_bytes")

    def __init__(self) -> None:
        self.final_url = ""
        self.permanent = ""
        self.wire_bytes = 0


def _link_header(headers: Mapping[str, str]) -> str:
    """Every ``Link:`` header of the response, joined as one value (WebSub discovery), capped."""
    getall = getattr(headers, "getall", None)
    values = getall("Link", []) if getall is not None else [headers.get("Link", "")]
    return ", ".join(v for v in values if v)[:16384]


def _classify(status: int, retry_after: float | None, im: str) -> FetchOutcome:
    if status == 304:
        return FetchOutcome.NOT_MODIFIED
    if status == 226 and "feed" in im.lower():
        return FetchOutcome.DELTA
    if 200 <= status < 300:
        return FetchOutcome.OK
    if status == 410:
        return FetchOutcome.GONE
    if status == 404:
        return FetchOutcome.NOT_FOUND
    if status == 429 or (status in (503, 403) and retry_after is not None):
        # Reddit answers 403 where it means 429; Retry-After tells them apart.
        return FetchOutcome.RATE_LIMITED
    if status >= 500:
        return FetchOutcome.SERVER_ERROR
    if status >= 400:
        return FetchOutcome.CLIENT_ERROR
    return FetchOutcome.PROTOCOL_ERROR


async def fetch_url(url: str, settings: FetchSettings | None = None) -> FetchResult:
    """Fetch one URL with a throw-away :class:`Fetcher` (for ``feedmesh parse URL`` and scripts)."""
    async with Fetcher(settings) as fetcher:
        return await fetcher.fetch(url)
