"""The hub as a WebSub *subscriber*: publishers' hubs push new documents to us (docs/websub.md).

The decisions are :class:`feedmesh.websub.subscriber.Subscriptions`' (pure); this module carries
them over sockets and into the crawl:

1. each document the crawler parses is searched for hubs (``Link:`` headers first, then the
   document's links); a feed that advertises one gets a subscription with a random callback id,
   a random secret and a lease;
2. requests go to the hub by POST through the address guard (every hop, the hub's 307/308
   redirects followed; a 308 moves the subscription to the new hub URL);
3. the hub's GET to ``PUBLIC_URL/websub/<callback id>`` is answered from the lease alone (the
   challenge, or 404); a verified subscription makes the feed *live*: the scheduler then polls it
   only as a daily safety net;
4. each POST is checked (size, the hub's rate, ``X-Hub-Signature``) and its body goes through
   parse -> dedup -> store -> filters like a fetched document, stamped with its arrival time;
5. leases are renewed before they end, resubscribed with backoff after a denial or failure, and
   unsubscribed when the feed leaves the crawl. Every change is saved in the hub's state.

Without a public URL (``--public-url``) there is no callback a hub could reach: nothing is
subscribed, and the log says so once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping

import aiohttp
from aiohttp.abc import AbstractResolver
from prometheus_client import CollectorRegistry, Counter
from yarl import URL

from feedmesh.clock import Clock
from feedmesh.fetch.guard import AddressGuard, BlockedAddressError, GuardedResolver
from feedmesh.fetch.redact import redact_credentials
from feedmesh.model import FetchResult, ParsedFeed
from feedmesh.store import HubState, StoreThread
from feedmesh.websub.discovery import discover
from feedmesh.websub.lease import HubRequest, SubscriberSettings, Verdict
from feedmesh.websub.subscriber import Delivery, Subscriptions

__all__ = ["CALLBACK_PATH", "WebSubSubscriber"]

log = logging.getLogger("feedmesh.hub.websub")

CALLBACK_PATH = "/websub/"
_MAX_HOPS = 5
IngestPush = Callable[[int, bytes, str, float], Awaitable[object]]


class WebSubSubscriber:
    def __init__(self, settings: SubscriberSettings, *, public_url: str, state: HubState,
                 clock: Clock, guard: AddressGuard, ingest: IngestPush,
                 set_live: Callable[[int, bool], None], registry: CollectorRegistry,
                 resolver: AbstractResolver | None = None, user_agent: str = "feedmesh",
                 request_timeout_s: float = 10.0) -> None:
        self.settings = settings
        self.public_url = public_url.rstrip("/")
        self.state = state
        self.clock = clock
        self.guard = guard
        self.ingest = ingest
        self.set_live = set_live
        self.resolver = resolver
        self.user_agent = user_agent
        self.request_timeout_s = request_timeout_s
        self.core = Subscriptions(settings, lambda: secrets.token_urlsafe(24))
        self._io = StoreThread()
        self._wake = asyncio.Event()
        self._live: set[int] = set()
        self._sending: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None
        self._warned = False
        self.deliveries = Counter("feedmesh_websub_deliveries", "Pushed documents received, by "
                                  "what became of them", ["kind"], registry=registry)
        self.requests = Counter("feedmesh_websub_requests", "Subscription requests sent to "
                                "hubs, by mode and outcome", ["mode", "outcome"],
                                registry=registry)

    @property
    def enabled(self) -> bool:
        return bool(self.public_url)

    def callback_url(self, callback_id: str) -> str:
        return f"{self.public_url}{CALLBACK_PATH}{callback_id}"

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the saved leases and make their feeds live again where the lease holds."""
        self.core.load(await self._io.call(self.state.websub_leases))
        self._refresh_live()
        if not self.enabled and self.core.leases:
            log.warning("websub_disabled leases=%d reason=no public URL is configured "
                        "(--public-url): the saved subscriptions are neither renewed nor "
                        "removed", len(self.core.leases))
            self._warned = True

    async def run(self, stop: asyncio.Event) -> None:
        """Send what is due, save what changed, follow liveness; until ``stop``."""
        while not stop.is_set():
            now = self.clock.now()
            if self.enabled:
                for request in self.core.due(now):
                    task = asyncio.create_task(self._send(request))
                    self._sending.add(task)
                    task.add_done_callback(self._sending.discard)
            await self._save()
            self._refresh_live()
            self._wake.clear()
            now = self.clock.now()
            # awake for the next request due and the next lease that lapses (its feed goes back
            # on the poll schedule then, not up to a minute later)
            times = [t for t in (self.core.next_at() if self.enabled else None,
                                 self.core.next_lapse(now)) if t is not None]
            wait = min(60.0, max(0.05, min(times) - now)) if times else 60.0
            waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait()),
                       asyncio.ensure_future(self.clock.sleep(wait))]
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for waiter in waiters:
                waiter.cancel()

    async def close(self) -> None:
        if self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)
        await self._save()
        if self._session is not None:
            await self._session.close()
        self._io.close()

    async def _save(self) -> None:
        changed, deleted = self.core.take_changes()
        if changed or deleted:
            await self._io.call(self.state.save_websub_leases, changed, deleted)

    def _refresh_live(self) -> None:
        live = self.core.live_feeds(self.clock.now())
        for feed_id in live - self._live:
            self.set_live(feed_id, True)
        for feed_id in self._live - live:
            self.set_live(feed_id, False)
        self._live = live

    # -- what the crawl tells ---------------------------------------------------------------------

    def discovered(self, feed_id: int, result: FetchResult, parsed: ParsedFeed) -> None:
        """A fetched document of ``feed_id``: subscribe to the hubs it advertises."""
        found = discover(result.final_url or result.url, link_header=result.links,
                         info=parsed.feed)
        if not found.hubs and not self.core.of_feed(feed_id):
            return
        if not self.enabled:
            if not self._warned:
                log.warning("websub_disabled feed=%s hub=%s reason=feeds advertise WebSub hubs "
                            "but no public URL is configured (--public-url), so no hub could "
                            "call us back: they are polled", feed_id,
                            redact_credentials(found.hubs[0]) if found.hubs else "")
                self._warned = True
            return
        self.core.discovered(feed_id, found, self.clock.now())
        self._wake.set()

    def feed_removed(self, feed_id: int) -> None:
        """The feed left the crawl (removed, or gone): unsubscribe from its hubs."""
        self.core.remove_feed(feed_id, self.clock.now())
        self._wake.set()

    # -- the hub's requests to the callback ----------------------------------------------------

    async def verification(self, callback_id: str, params: Mapping[str, str]) -> Verdict:
        """A hub's GET: intent verification (subscribe/unsubscribe) or a denial."""
        verdict = self.core.verification(callback_id, dict(params), self.clock.now())
        level = logging.INFO if verdict.status == 200 else logging.WARNING
        log.log(level, "websub_verification callback=%s mode=%s status=%d reason=%s",
                callback_id[:12], params.get("hub.mode", "")[:20], verdict.status,
                verdict.reason)
        await self._save()
        self._refresh_live()
        self._wake.set()
        return verdict

    async def content(self, callback_id: str, signature: str | None, content_type: str,
                      body: bytes) -> Delivery:
        """A hub's POST: a pushed document, ingested when it passes the checks."""
        now = self.clock.now()
        delivery = self.core.content(callback_id, signature, body, now)
        self.deliveries.labels(delivery.kind).inc()
        if not delivery.accept:
            log.warning("websub_delivery_dropped callback=%s feed=%s kind=%s status=%d "
                        "reason=%s", callback_id[:12], delivery.feed_id, delivery.kind,
                        delivery.status, delivery.reason)
            return delivery
        await self.ingest(delivery.feed_id, body, content_type, now)
        return delivery

    # -- requests to hubs -----------------------------------------------------------------------

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=64, resolver=GuardedResolver(self.resolver or aiohttp.ThreadedResolver(),
                                                   self.guard))
            self._session = aiohttp.ClientSession(connector=connector,
                                                  cookie_jar=aiohttp.DummyCookieJar())
        return self._session

    def _check(self, url: URL) -> None:
        if url.scheme not in ("http", "https") or not url.raw_host:
            raise ValueError(f"hub URL {url} is not http(s)")
        host = url.raw_host.strip("[]")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return  # a name: the guarded resolver checks what it resolves to
        self.guard.check(host, host)  # aiohttp skips the resolver for IP literals

    async def _send(self, request: HubRequest) -> None:
        form = {"hub.mode": request.mode, "hub.topic": request.topic,
                "hub.callback": self.callback_url(request.callback_id)}
        if request.secret:
            form["hub.secret"] = request.secret
        if request.lease_s:
            form["hub.lease_seconds"] = str(request.lease_s)
        status, error, moved = None, "", ""
        url = URL(request.hub)
        try:
            timeout = aiohttp.ClientTimeout(total=self.request_timeout_s)
            for _ in range(_MAX_HOPS):
                self._check(url)
                async with self._open().post(url, data=form, allow_redirects=False,
                                             timeout=timeout,
                                             headers={"User-Agent": self.user_agent}) as reply:
                    status = reply.status
                    location = reply.headers.get("Location", "")
                    if status in (307, 308) and location:
                        url = url.join(URL(location))
                        if "hub.secret" in form and url.scheme != "https" \
                                and not self.settings.secret_over_http:
                            error, status = (f"{request.hub} redirected to an http:// URL; "
                                             "hub.secret is sent over HTTPS only"), None
                            break
                        if status == 308:
                            moved = str(url)
                        continue
                    if not 200 <= status < 300:
                        text = (await reply.content.read(300)).decode("utf-8", "replace")
                        error = f"the hub answered HTTP {status}: {text.strip()[:200]}"
                    break
            else:
                error, status = f"more than {_MAX_HOPS} redirects from {request.hub}", None
        except BlockedAddressError as exc:
            error, status = f"refused: {exc}", None
        except aiohttp.ClientConnectorDNSError as exc:
            cause = exc.os_error
            error, status = (f"refused: {cause}" if isinstance(cause, BlockedAddressError)
                             else f"cannot resolve {url.host}: {cause}"), None
        except (aiohttp.ClientError, TimeoutError, ValueError, OSError) as exc:
            error, status = f"{type(exc).__name__}: {exc}", None
        outcome = "accepted" if status is not None and 200 <= status < 300 else "failed"
        self.requests.labels(request.mode, outcome).inc()
        level = logging.INFO if outcome == "accepted" else logging.WARNING
        log.log(level, "websub_request mode=%s hub=%s topic=%s status=%s error=%s",
                request.mode, redact_credentials(request.hub), redact_credentials(request.topic),
                status, error)
        now = self.clock.now()
        if moved and outcome == "accepted":
            self.core.hub_moved(request.callback_id, moved, now)
        self.core.response(request.callback_id, status, error, now)
        self._wake.set()
