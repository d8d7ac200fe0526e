"""The HTTP client of push: verification GETs and deliveries (POSTs) to addresses people gave us.

A WebSub hub that POSTs to any URL it is given is an SSRF engine, so every callback and webhook
passes the same :class:`~feedmesh.fetch.AddressGuard` as the crawler's fetches (settings from
:class:`~feedmesh.fetch.FetchSettings`: no loopback, private, link-local or metadata address unless
allow-listed): names are checked as they resolve (:class:`~feedmesh.fetch.guard.GuardedResolver`),
IP literals before connecting (aiohttp does not resolve them). Redirects are not followed (a
redirect could point anywhere); answers are read up to a small cap; every call has a timeout.
"""

from __future__ import annotations

import ipaddress
import time

import aiohttp
from aiohttp.abc import AbstractResolver
from yarl import URL

from feedmesh.errors import FeedmeshError
from feedmesh.fetch.guard import AddressGuard, BlockedAddressError, GuardedResolver
from feedmesh.fetch.redact import redact_credentials
from feedmesh.fetch.settings import FetchSettings

__all__ = ["CallbackClient", "CallbackError", "Exchange", "shown_url"]


def shown_url(url: str) -> str:
    """``url`` as a log line or a delivery log may show it: no password, no query (a
    verification's query holds ``hub.topic``, a private feed's URL with its token) and no
    fragment."""
    try:
        parsed = URL(url, encoded=True)
    except ValueError:
        return "(an invalid URL)"
    if not parsed.is_absolute():
        return "(an invalid URL)"
    return redact_credentials(str(parsed.with_query(None).with_fragment(None)))

MAX_ANSWER_BYTES = 64 * 1024


class CallbackError(FeedmeshError):
    """No answer from a callback: refused by the guard, unreachable, or too slow."""


class Exchange:
    __slots__ = ("body", "elapsed_ms", "status")

    def __init__(self, status: int, body: bytes, elapsed_ms: float) -> None:
        self.status = status
        self.body = body
        self.elapsed_ms = elapsed_ms


class CallbackClient:
    def __init__(self, fetch: FetchSettings, *, resolver: AbstractResolver | None = None,
                 timeout_s: float = 10.0, max_connections: int = 256,
                 per_host: int = 32) -> None:
        self.guard = AddressGuard(allow_all=fetch.allow_private,
                                  allow_networks=fetch.allow_networks)
        self.timeout = aiohttp.ClientTimeout(total=timeout_s, connect=min(5.0, timeout_s))
        self.user_agent = "feedmesh-websub-hub/1 (+https://www.w3.org/TR/websub/)"
        self._resolver = resolver
        self._limits = (max_connections, per_host)
        self._source = fetch.source_address
        self._session: aiohttp.ClientSession | None = None

    def refusal(self, url: str) -> str | None:
        """Why the guard refuses ``url`` before any connection (an IP literal it forbids), or
        None (a name is judged when it resolves)."""
        host = (URL(url).raw_host or "").strip("[]")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return None
        reason = self.guard.refusal(host)
        return f"{host} is a {reason} address" if reason else None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._limits[0], limit_per_host=self._limits[1],
                resolver=GuardedResolver(self._resolver or aiohttp.ThreadedResolver(),
                                         self.guard),
                local_addr=(self._source, 0) if self._source else None)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self.timeout, cookie_jar=aiohttp.DummyCookieJar(),
                headers={"User-Agent": self.user_agent})
        return self._session

    async def get(self, url: str) -> Exchange:
        return await self._exchange("GET", url, None, {})

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> Exchange:
        return await self._exchange("POST", url, body, headers)

    async def _exchange(self, method: str, url: str, body: bytes | None,
                        headers: dict[str, str]) -> Exchange:
        shown = shown_url(url)
        refused = self.refusal(url)
        if refused is not None:
            raise CallbackError(f"{shown}: refused: {refused} (not allowed by the address guard)")
        started = time.perf_counter()
        try:
            async with self._open().request(method, URL(url, encoded=True), data=body,
                                            headers=headers,
                                            allow_redirects=False) as response:
                answer = await response.content.read(MAX_ANSWER_BYTES)
                return Exchange(response.status, answer,
                                (time.perf_counter() - started) * 1000.0)
        except TimeoutError as exc:
            raise CallbackError(f"{shown}: no answer within {self.timeout.total:g} s") from exc
        except aiohttp.ClientConnectorDNSError as exc:
            if isinstance(exc.os_error, BlockedAddressError):
                # not the address: the owner of a callback must not learn from the hub what a
                # name resolves to inside the hub's network (a DNS oracle)
                raise CallbackError(f"{shown}: refused by the address guard (its name "
                                    "resolves to an address this hub does not send to)") from exc
            raise CallbackError(f"{shown}: cannot resolve its host") from exc
        except aiohttp.ClientConnectorError as exc:
            raise CallbackError(f"{shown}: cannot connect: "
                                f"{exc.os_error.strerror or exc.os_error}") from exc
        except (aiohttp.ClientError, ValueError) as exc:
            raise CallbackError(f"{shown}: {type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
