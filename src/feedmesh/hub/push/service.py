"""Push: the WebSub hub of every private feed, and webhooks, on one delivery worker.

1. **Subscribing** (WebSub section 5): the web tier validates a request
   (:mod:`feedmesh.websub.hub_requests`) and checks that its topic is one of our private feeds (only
   who holds the feed's URL can name it); :meth:`PushService.request` then verifies intent in the
   background: a GET to the callback with a challenge, which must come back verbatim; only then is
   the subscription saved (or, for ``unsubscribe``, deleted). Subscribing again updates the lease
   and secret of the same topic+callback.
2. **Matching**: the reflector calls :meth:`PushService.matched` with each batch it committed; the
   entries of subscriptions that have push targets join each target's queue
   (:class:`feedmesh.websub.delivery.DeliveryQueues`).
3. **Delivering**: :meth:`PushService.run` starts the sends that are due, at most one in flight per
   target (so each target sees its deliveries in order) and ``max_in_flight`` in all. A WebSub
   target gets the updated feed in its topic's format (a fat ping), with ``X-Hub-Signature`` when
   it gave a secret; a webhook gets the new entries as JSON, signed in ``X-Feedmesh-Signature``.
   Failures retry with backoff; a WebSub subscriber that keeps failing (or answers 410 Gone) is
   dropped, as is one whose lease ran out; a webhook that keeps failing loses the entries that
   waited (its delivery log shows the failures) but stays.

4. **Resuming**: each target has a durable mark in the store (``delivered_before``: every entry
   its reflector stored before that time was delivered or given up on), moved forward in batches
   as deliveries succeed. At start (:meth:`PushService.load`) every target gets again what its
   subscription's feed holds here from its mark on: a worker killed with SIGKILL loses nothing
   its feed still holds, and may repeat the deliveries made between its last written mark and
   the kill (at least once; marks only move forward, so writing one twice does no harm).
5. **Shared targets**: where web processes of their own take the requests (a distributed
   deployment), every process holds a :class:`PushService`: a web process's verifies and saves
   targets and sends webhooks' test deliveries, but delivers no entry (``feeds`` None);
   the delivery worker beside each reflector takes the targets from the shared store every
   ``sync_interval_s`` (:meth:`PushService.sync`) and delivers its reflector's matches.

Every address is judged by the crawler's address guard (:mod:`.http`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import secrets
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Protocol

import msgspec
import numpy as np
from aiohttp.abc import AbstractResolver

from feedmesh.clock import Clock
from feedmesh.fetch.settings import FetchSettings
from feedmesh.hub.errors import PushRefusedError
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.push.http import CallbackClient, CallbackError
from feedmesh.hub.push.messages import webhook_message, websub_message
from feedmesh.logs import Throttled
from feedmesh.store import (
    HubState,
    PushAttempt,
    PushTarget,
    ReflectedItem,
    StoreError,
    StoreThread,
    Subscription,
)
from feedmesh.tokenbucket import TokenBucket
from feedmesh.websub.delivery import DeliveryQueues, Outcome, RetryPolicy, Send
from feedmesh.websub.hub_requests import (
    HubRequest,
    HubRequestError,
    LeaseBounds,
    challenge_echoed,
    check_push_url,
    denial_url,
    verification_url,
)
from feedmesh.websub.signature import METHODS

__all__ = ["WEBHOOK", "WEBSUB", "PushService", "PushSettings"]

log = logging.getLogger("feedmesh.hub.push")
_failures = Throttled(log)

WEBSUB = "websub"
WEBHOOK = "webhook"
_TEST = "test"


class PushSettings(msgspec.Struct, frozen=True, kw_only=True):
    lease: LeaseBounds = LeaseBounds()
    retry: RetryPolicy = RetryPolicy()
    timeout_s: float = 10.0
    """Per verification or delivery, connection included."""
    max_in_flight: int = 256
    max_deliveries_per_s: float = 400.0
    """The worker's budget, all targets together: it shares the event loop with the crawler
    and the reflectors, which must keep up with the articles however many subscribers there
    are. Beyond it deliveries wait, and the entries for one target coalesce into its next
    delivery (a fat ping carries the whole feed)."""
    max_verifications: int = 1000
    """Intent verifications waiting or running; beyond, requests are refused (429)."""
    max_subscribers_per_feed: int = 100
    max_webhooks_per_subscription: int = 5
    log_keep: int = 20
    """Attempts kept per webhook in its delivery log."""
    recent_items: int = 20_000
    """Entries kept in memory to build pushed documents from (see ``recent_items``)."""
    sweep_interval_s: float = 60.0
    """How often leases that ran out are looked for (they are also checked at each send)."""
    sync_interval_s: float = 0.0
    """How often the targets are read again from the store, where other processes (web
    processes of their own) save them; 0: this process saves every target itself."""
    websub_signature: str = "sha256"
    """The ``X-Hub-Signature`` method a new WebSub subscriber's deliveries are signed with
    (one of :data:`feedmesh.websub.signature.METHODS`; its feed's owner may choose another
    per subscriber). sha256, as WebSub recommends: an HMAC with SHA-1 is not broken, but
    SHA-1 is deprecated; sha1 only for the older PubSubHubbub 0.4 subscribers that check
    nothing else (docs/websub-hub.md)."""

    def __post_init__(self) -> None:
        if self.websub_signature not in METHODS:
            raise ValueError(f"PushSettings.websub_signature {self.websub_signature!r} is not "
                             f"one of {', '.join(METHODS)}")


class PrivateFeeds(Protocol):
    """The private feeds of the reflectors beside a delivering worker (the embedded hub's, a
    reflector process's): what push renders and resends from."""

    async def document(self, sub_id: int, sub: Subscription | None, fmt: str, topic: str,
                       known: Mapping[int, ReflectedItem]) -> tuple[bytes, str]:
        """The feed as the topic serves it now, and the ``Link`` header it is served with
        (WebSub discovery: its hub and itself); ``known``: entries push already holds, not
        read from the log again."""
        ...

    async def held(self, sub_id: int,
                   known: Mapping[int, ReflectedItem]) -> list[ReflectedItem]:
        """The entries the feed holds here, newest first ([]: not held here)."""
        ...


class TopicKeys(Protocol):
    """The keys of private feed URLs, as a delivering process checks its topics with them
    (:class:`feedmesh.hub.front.tokens.FeedTokens`)."""

    changes: int
    """Bumped whenever the keys held change."""

    @property
    def has_keys(self) -> bool: ...

    def refresh(self) -> None:
        """Read the keys again if they are due to be."""
        ...

    def reads_url(self, url: str) -> bool:
        """Whether ``url`` is a private feed URL one of the keys signed."""
        ...


class PushService:
    def __init__(self, state: HubState, settings: PushSettings, fetch: FetchSettings,
                 clock: Clock, metrics: HubMetrics, *, feeds: PrivateFeeds | None,
                 resolver: AbstractResolver | None = None,
                 tokens: TopicKeys | None = None) -> None:
        self.state = state
        self.tokens = tokens
        """The keys of private feed URLs, in a process that delivers: when one is retired,
        the WebSub subscriptions whose topic it signed end (checked at each sweep)."""
        self._topics_checked = -1  # the first sweep checks the targets loaded at start
        self.settings = settings
        self.clock = clock
        self.metrics = metrics
        self.feeds = feeds
        """None: this process takes requests and saves targets but delivers nothing."""
        self._subs: dict[int, Subscription | None] = {}
        self.client = CallbackClient(fetch, resolver=resolver, timeout_s=settings.timeout_s)
        self.queues = DeliveryQueues(settings.retry)
        self.targets: dict[int, PushTarget] = {}
        self._by_sub: dict[int, set[int]] = {}
        self._watched = np.zeros(1024, dtype=bool)
        self._io = StoreThread()
        self._waiter: asyncio.Future[None] | None = None
        self._woken = False
        self._sending: set[asyncio.Task[None]] = set()
        self._verifying: set[asyncio.Task[bool]] = set()
        # (topic, callback) of each subscribe being verified, by subscription
        self._pending: dict[int, set[tuple[str, str]]] = {}
        self._denying: set[asyncio.Task[None]] = set()
        self._unlogged: list[PushAttempt] = []
        self._unmarked: dict[int, float] = {}
        """Marks (``delivered_before``) moved forward but not yet written."""
        self._logging: asyncio.Task[None] | None = None
        self._tests = 0
        self.recent_items: OrderedDict[int, ReflectedItem] = OrderedDict()
        """Entries recently queued for some target, newest last: the documents pushed are
        mostly made of them, and need not read them back from the reflector's log."""

    # -- the targets held in memory ---------------------------------------------------------

    async def load(self) -> int:
        """Read the saved targets (at start-up; leases that ran out meanwhile are dropped) and
        queue for each what its feed holds here from its mark on."""
        now = self.clock.now()
        for target in await self._io.call(self.state.push_targets):
            if _expired(target, now):
                await self._io.call(self.state.delete_push_target, target.id)
            else:
                self._hold(target)
        await self.resume(list(self.targets.values()))
        return len(self.targets)

    async def sync(self) -> None:
        """Take the targets as the store has them now (other processes save and delete
        them): new ones are held, with what their feed holds here since their mark queued;
        changed ones (lease, secret) updated; deleted ones released."""
        saved = {t.id: t for t in await self._io.call(self.state.push_targets)}
        for target_id in [t for t in self.targets if t not in saved]:
            self._release(target_id)
        now, fresh = self.clock.now(), []
        for target in saved.values():
            if target.id in self.targets:
                self.targets[target.id] = target
            elif not _expired(target, now):
                self._hold(target)
                fresh.append(target)
        await self.resume(fresh)

    async def resume(self, targets: Sequence[PushTarget]) -> int:
        """Queue for each of ``targets`` the entries its subscription's feed holds here that
        were stored at or after its mark, oldest first; how many."""
        if self.feeds is None:
            return 0
        queued = 0
        for target in targets:
            items = [i for i in await self.feeds.held(target.sub_id, self.recent_items)
                     if i.stored_at >= target.delivered_before]
            for item in reversed(items):
                self.queues.add(target.id, item.entry_id, item)
                self.recent_items[item.entry_id] = item
                queued += 1
        while len(self.recent_items) > self.settings.recent_items:
            self.recent_items.popitem(last=False)
        if queued:
            log.info("push_resumed targets=%d entries=%d", len(targets), queued)
            self._wake()
        return queued

    def _hold(self, target: PushTarget) -> None:
        self.targets[target.id] = target
        self._by_sub.setdefault(target.sub_id, set()).add(target.id)
        if target.sub_id >= len(self._watched):
            grown = np.zeros(max(target.sub_id + 1, 2 * len(self._watched)), dtype=bool)
            grown[: len(self._watched)] = self._watched
            self._watched = grown
        self._watched[target.sub_id] = True
        self.metrics.push_targets.labels(target.kind).set(self._count(target.kind))

    def _count(self, kind: str) -> int:
        return sum(1 for t in self.targets.values() if t.kind == kind)

    def _release(self, target_id: int) -> PushTarget | None:
        target = self.targets.pop(target_id, None)
        self.queues.remove(target_id)
        if target is not None:
            held = self._by_sub.get(target.sub_id, set())
            held.discard(target_id)
            if not held:
                self._by_sub.pop(target.sub_id, None)
                self._watched[target.sub_id] = False
            self.metrics.push_targets.labels(target.kind).set(self._count(target.kind))
        return target

    async def _drop(self, target: PushTarget, reason: str, *, deny: bool = False) -> None:
        """Forget ``target``; ``deny``: the hub cancels a WebSub subscription it had granted,
        and tells the callback so (section 5.2)."""
        self._release(target.id)
        try:
            await self._io.call(self.state.delete_push_target, target.id)
        except StoreError as exc:  # held no more; the next start drops it again if expired
            log.error("push_target_not_deleted target=%d error=%s", target.id, exc)
        log.info("push_target_dropped target=%d kind=%s sub=%d reason=%s", target.id,
                 target.kind, target.sub_id, reason)
        if deny:
            self._deny(target, reason)

    def _deny(self, target: PushTarget, reason: str) -> None:
        """Send ``hub.mode=denied`` to a WebSub callback whose subscription ends against its
        will, once, in the background (a callback that is down may never hear it)."""
        if target.kind != WEBSUB:
            return
        task = asyncio.create_task(self._send_denial(target, reason))
        self._denying.add(task)
        task.add_done_callback(self._denying.discard)

    async def _send_denial(self, target: PushTarget, reason: str) -> None:
        try:
            answer = await self.client.get(denial_url(target.url, target.topic, reason))
        except CallbackError as exc:
            log.info("websub_denial_not_heard target=%d sub=%d error=%s", target.id,
                     target.sub_id, exc)
            return
        log.info("websub_denied target=%d sub=%d status=%d reason=%s", target.id,
                 target.sub_id, answer.status, reason)

    def of_subscription(self, sub_id: int) -> list[PushTarget]:
        return [self.targets[t] for t in sorted(self._by_sub.get(sub_id, ()))]

    async def subscription(self, sub_id: int) -> Subscription | None:
        """The subscription as pushed documents and webhooks name it (kept until it changes)."""
        if sub_id not in self._subs:
            if len(self._subs) > 100_000:
                self._subs.clear()
            self._subs[sub_id] = await self._io.call(self.state.subscription, sub_id)
        return self._subs[sub_id]

    def subscription_removed(self, sub_id: int) -> None:
        """Its targets went with it (the store deletes them in the same transaction); its
        WebSub subscribers are told their topic is gone."""
        self._subs.pop(sub_id, None)
        for target_id in list(self._by_sub.get(sub_id, ())):
            target = self._release(target_id)
            if target is not None:
                self._deny(target, "the feed was deleted by its owner")

    async def subscription_changed(self, sub_id: int, new_url: bool) -> None:
        """Its name or query changed (documents name them), or its feed got a new URL: then
        the old topics no longer exist, nor do their WebSub subscriptions."""
        self._subs.pop(sub_id, None)
        if new_url:
            for target in self.of_subscription(sub_id):
                if target.kind == WEBSUB:
                    await self._drop(target, "the feed's URL was replaced by its owner",
                                     deny=True)

    async def check_topics(self) -> int:
        """When the keys of private feed URLs changed since the last look (``feedmesh url-key
        retire``), end the WebSub subscriptions whose topic no key reads any more, telling
        their callbacks (a leaked URL's subscriber must not go on getting the feed); how many.
        """
        if self.tokens is None:
            return 0
        self.tokens.refresh()
        if not self.tokens.has_keys or self.tokens.changes == self._topics_checked:
            return 0  # (no key yet: the hub has made no URL, so no topic to look at)
        self._topics_checked = self.tokens.changes
        ended = [t for t in self.targets.values() if t.kind == WEBSUB
                 and not self.tokens.reads_url(t.topic)]
        for target in ended:
            await self._drop(target, "the key that signed the topic URL was retired by the "
                             "hub's operator: the owner has the feed's new URL", deny=True)
        return len(ended)

    # -- WebSub subscriptions ----------------------------------------------------------------

    def check_callback(self, url: str, field: str) -> None:
        """Raise :class:`PushRefusedError` for a URL no delivery may go to."""
        try:
            check_push_url(url, field)
        except HubRequestError as exc:
            raise PushRefusedError(400, "invalid_callback", str(exc)) from exc
        refused = self.client.refusal(url)
        if refused is not None:
            raise PushRefusedError(400, "callback_refused", f"{field}: {refused}; this hub "
                                   "does not send to such addresses")

    def request(self, request: HubRequest, sub_id: int, fmt: str) -> asyncio.Task[bool]:
        """Start verifying ``request`` (its topic is ``sub_id``'s feed in ``fmt``); the task
        says whether the callback confirmed. Raises :class:`PushRefusedError` when too many
        verifications wait or the feed has as many subscribers as it may."""
        self.check_callback(request.callback, "hub.callback")
        if len(self._verifying) >= self.settings.max_verifications:
            raise PushRefusedError(429, "rate_limited", "too many subscription requests are "
                                   "being verified; retry in a minute", retry_after_s=60)
        pair = (request.topic, request.callback)
        if request.mode == "subscribe":
            # those being verified count: twenty requests at once must not all pass the check
            # before the first is saved
            held = {(t.topic, t.url) for t in self.of_subscription(sub_id) if t.kind == WEBSUB}
            held |= self._pending.get(sub_id, set())
            if len(held) >= self.settings.max_subscribers_per_feed and pair not in held:
                raise PushRefusedError(403, "limit_reached", f"this feed has "
                                       f"{len(held)} WebSub subscribers (with those being "
                                       "verified), the most it may have")
            self._pending.setdefault(sub_id, set()).add(pair)
        task = asyncio.create_task(self._verify(request, sub_id, fmt))
        self._verifying.add(task)
        task.add_done_callback(self._verifying.discard)
        if request.mode == "subscribe":
            task.add_done_callback(lambda _task: self._verified(sub_id, pair))
        return task

    def _verified(self, sub_id: int, pair: tuple[str, str]) -> None:
        pending = self._pending.get(sub_id)
        if pending is not None:
            pending.discard(pair)
            if not pending:
                del self._pending[sub_id]

    async def _verify(self, request: HubRequest, sub_id: int, fmt: str) -> bool:
        challenge = secrets.token_urlsafe(24)
        try:
            answer = await self.client.get(verification_url(request, challenge))
        except CallbackError as exc:
            log.info("websub_not_verified mode=%s sub=%d error=%s", request.mode, sub_id, exc)
            return False
        if not challenge_echoed(answer.status, answer.body, challenge):
            log.info("websub_not_verified mode=%s sub=%d status=%d reason=challenge not echoed",
                     request.mode, sub_id, answer.status)
            return False
        if request.mode == "unsubscribe":
            for target in self.of_subscription(sub_id):
                if (target.kind, target.topic, target.url) == (WEBSUB, request.topic,
                                                                request.callback):
                    await self._drop(target, "unsubscribed")
            return True
        now = self.clock.now()
        try:
            saved = await self._io.call(self.state.save_push_target, PushTarget(
                sub_id=sub_id, kind=WEBSUB, url=request.callback, topic=request.topic,
                format=fmt, secret=request.secret, lease_seconds=request.lease_seconds,
                expires_at=now + request.lease_seconds, created_at=now,
                delivered_before=now, signature=self.settings.websub_signature))
        except StoreError as exc:  # e.g. the subscription was deleted meanwhile
            log.warning("websub_not_saved sub=%d error=%s", sub_id, exc)
            return False
        self._hold(saved)
        log.info("websub_subscribed target=%d sub=%d lease_s=%d", saved.id, sub_id,
                 request.lease_seconds)
        return True

    async def set_signature(self, target: PushTarget, method: object) -> PushTarget:
        """Sign the WebSub subscriber ``target``'s deliveries with ``method`` from now on (its
        next subscription keeps it). Raises :class:`PushRefusedError` for an unknown method."""
        if target.kind != WEBSUB:
            raise PushRefusedError(400, "invalid_signature", "only WebSub subscribers choose "
                                   "a signature method; webhooks sign X-Feedmesh-Signature "
                                   "with sha256")
        if not isinstance(method, str) or method.strip().lower() not in METHODS:
            given = ("is required" if method is None
                     else f"{json.dumps(method)[:40]} is not an X-Hub-Signature method")
            raise PushRefusedError(400, "invalid_signature", f"signature {given}: give one "
                                   f"of {', '.join(METHODS)}", field="signature",
                                   allowed=list(METHODS))
        saved = await self._io.call(self.state.set_push_signature, target.id,
                                    method.strip().lower())
        if saved is None:
            raise PushRefusedError(404, "not_found", f"WebSub subscriber {target.id} is gone "
                                   "(unsubscribed or its lease ran out)")
        if saved.id in self.targets:
            self.targets[saved.id] = saved
        log.info("websub_signature target=%d sub=%d method=%s", saved.id, saved.sub_id,
                 saved.signature)
        return saved

    # -- webhooks ----------------------------------------------------------------------------

    async def add_webhook(self, sub_id: int, url: str) -> PushTarget:
        self.check_callback(url, "url")
        held = [t for t in self.of_subscription(sub_id) if t.kind == WEBHOOK]
        if len(held) >= self.settings.max_webhooks_per_subscription and url not in {
                t.url for t in held}:
            raise PushRefusedError(403, "limit_reached", f"a subscription may have at most "
                                   f"{self.settings.max_webhooks_per_subscription} webhooks")
        existing = next((t for t in held if t.url == url), None)
        if existing is not None:
            return existing
        saved = await self._io.call(self.state.save_push_target, PushTarget(
            sub_id=sub_id, kind=WEBHOOK, url=url, secret=secrets.token_urlsafe(32),
            created_at=self.clock.now(), delivered_before=self.clock.now()))
        self._hold(saved)
        return saved

    async def remove(self, target: PushTarget) -> None:
        await self._drop(target, "removed by its owner")

    async def attempts(self, target_id: int, limit: int = 20) -> list[PushAttempt]:
        """A target's delivery log, newest first (those still being written included)."""
        await self.flush_log()
        return await self._io.call(self.state.push_attempts, target_id, limit)

    def test(self, target: PushTarget) -> None:
        """Queue a test delivery (no entries) behind what waits for the webhook. A process
        that delivers nothing (a web process of its own: the workers beside the reflectors
        deliver entries) sends it itself, once, and logs it in the same delivery log."""
        if self.feeds is None:
            task = asyncio.create_task(self._send_test(target))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
            return
        self._tests += 1
        self.queues.add(target.id, (_TEST, self._tests), _TEST)
        self._wake()

    # -- matching and delivering ------------------------------------------------------------

    def matched(self, batch: Sequence[tuple[ReflectedItem, np.ndarray, int]]) -> None:
        """Entries a reflector committed, with the subscriptions they joined (shard < 0: the
        stored entries a new subscription starts with, which are not news)."""
        watched = self._watched
        added = 0
        for item, ids, shard in batch:
            if shard < 0 or not self.targets:
                continue
            ids = ids[ids < len(watched)]
            hits = ids[watched[ids]]
            if len(hits):
                self.recent_items[item.entry_id] = item
            for sub_id in hits.tolist():
                for target_id in self._by_sub.get(sub_id, ()):
                    self.queues.add(target_id, item.entry_id, item)
                    added += 1
        while len(self.recent_items) > self.settings.recent_items:
            self.recent_items.popitem(last=False)
        if added:
            self.metrics.push_entries.inc(added)
            self._wake()

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        next_sweep = loop.time() + self.settings.sweep_interval_s
        syncing = self.settings.sync_interval_s
        next_sync = loop.time() + syncing
        # The delivery budget, on the injected clock (an accelerated clock runs it faster too,
        # as it does every other rate of the hub).
        budget = TokenBucket(self.settings.max_deliveries_per_s,
                             max(1.0, self.settings.max_deliveries_per_s / 10), self.clock.now())
        while not stop.is_set():
            self._woken = False
            now = self.clock.now()
            free = min(self.settings.max_in_flight - len(self._sending), int(budget.level(now)))
            if free > 0:
                for send in self.queues.due(now, free):
                    budget.take(now)
                    task = asyncio.create_task(self._deliver(send))
                    self._sending.add(task)
                    task.add_done_callback(self._sent)
            if loop.time() > next_sweep:
                next_sweep = loop.time() + self.settings.sweep_interval_s
                now = self.clock.now()
                for target in [t for t in self.targets.values() if _expired(t, now)]:
                    await self._drop(target, "lease expired")
                await self.check_topics()
            if syncing and loop.time() > next_sync:
                next_sync = loop.time() + syncing
                try:
                    await self.sync()
                except StoreError as exc:  # the store is away: the held targets go on
                    _failures.log(logging.WARNING, "push:sync", "push_sync_failed error=%s",
                                  exc)
            due = self.queues.next_due()
            wait = min(self.settings.sweep_interval_s, syncing or math.inf)
            if due is not None and len(self._sending) < self.settings.max_in_flight:
                now = self.clock.now()
                wait = min(wait, max(0.0, due - now, budget.wait_s(now)))
            # A bare future and a timer: this loop turns once per delivery at full load, and
            # asyncio.wait's tasks would cost more than the delivery's own bookkeeping.
            if not self._woken:
                self._waiter = waiter = loop.create_future()
                timer = loop.call_later(wait, _resolve, waiter)
                try:
                    await waiter
                finally:
                    timer.cancel()
                    self._waiter = None

    def _wake(self) -> None:
        """Have :meth:`run` look at the queues again (something was added or finished)."""
        self._woken = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        self._wake()
        if not task.cancelled() and task.exception() is not None:
            log.error("push_delivery_failed error=%r", task.exception())

    async def _deliver(self, send: Send) -> None:
        target = self.targets.get(send.target)
        now = self.clock.now()
        if target is None:
            self.queues.finished(send, True, now)
            return
        if _expired(target, now):
            self.queues.finished(send, True, now)
            await self._drop(target, "lease expired")
            return
        status, error, elapsed = 0, "", 0.0
        try:
            body, headers = await self._message(target, send)
            answer = await self.client.post(target.url, body, headers)
            status, elapsed = answer.status, answer.elapsed_ms
            if not 200 <= status < 300:
                error = f"answered HTTP {status}"
        except CallbackError as exc:
            error = str(exc)
        except StoreError as exc:  # the feed could not be read: try again later
            error = f"the feed could not be read: {exc}"
        delivered = 200 <= status < 300
        now = self.clock.now()
        outcome = self.queues.finished(send, delivered, now, give_up=status == 410)
        self.metrics.push_deliveries.labels(target.kind, "ok" if delivered else "failed").inc()
        if delivered:
            seen = [p.first_seen_at for p in send.payloads if isinstance(p, ReflectedItem)]
            if seen:
                self.metrics.push_latency.observe(max(0.0, now - min(seen)))
        if outcome in (Outcome.DELIVERED, Outcome.DROPPED):
            self._advance(target.id, send)
        else:
            _failures.log(logging.WARNING, f"push:{target.id}",
                          "push_failed target=%d kind=%s attempt=%d outcome=%s error=%s",
                          target.id, target.kind, send.attempt, outcome.value, error)
        # Both kinds keep a delivery log; a fat ping's entries are the new ones it carries.
        entries = sum(1 for p in send.payloads if not isinstance(p, str))
        self._log(PushAttempt(target_id=target.id, at=now, attempt=send.attempt, status=status,
                              error=error[:500], entries=entries,
                              elapsed_ms=round(elapsed, 1)))
        if outcome is Outcome.DROPPED and target.kind == WEBSUB:
            # A callback that answered 410 Gone asked for the end; one that kept failing is
            # told (if it can hear it) why its deliveries stopped.
            await self._drop(target, "gone (HTTP 410)" if status == 410 else
                             f"{send.attempt} failed deliveries in a row; last: {error}",
                             deny=status != 410)
        elif outcome is Outcome.DROPPED:
            # A webhook is its owner's: what waited is dropped (the log shows why), the
            # webhook stays, and the next entries are tried afresh.
            log.warning("webhook_entries_dropped target=%d sub=%d entries=%d error=%s",
                        target.id, target.sub_id, len(send.keys), error)

    async def _send_test(self, target: PushTarget) -> None:
        """One test delivery, not queued: it carries no entry, so it cannot overtake one."""
        status, error, elapsed = 0, "", 0.0
        try:
            body, headers = webhook_message(target, await self.subscription(target.sub_id), [])
            answer = await self.client.post(target.url, body, headers)
            status, elapsed = answer.status, answer.elapsed_ms
            if not 200 <= status < 300:
                error = f"answered HTTP {status}"
        except CallbackError as exc:
            error = str(exc)
        except StoreError as exc:
            error = f"the subscription could not be read: {exc}"
        delivered = 200 <= status < 300
        self.metrics.push_deliveries.labels(target.kind, "ok" if delivered else "failed").inc()
        if not delivered:
            log.warning("push_test_failed target=%d error=%s", target.id, error)
        self._log(PushAttempt(target_id=target.id, at=self.clock.now(), attempt=1,
                              status=status, error=error[:500], entries=0,
                              elapsed_ms=round(elapsed, 1)))

    def _advance(self, target_id: int, send: Send) -> None:
        """Move the target's mark past what ``send`` carried (delivered, or given up on),
        but not past an older entry still waiting."""
        stored = [p.stored_at for p in send.payloads if isinstance(p, ReflectedItem)]
        if not stored:
            return
        mark = math.nextafter(max(stored), math.inf)
        waiting = self.queues.first_pending(target_id)
        if isinstance(waiting, ReflectedItem):
            mark = min(mark, waiting.stored_at)
        if mark > self._unmarked.get(target_id, 0.0):
            self._unmarked[target_id] = mark
            self._write_soon()

    def _log(self, attempt: PushAttempt) -> None:
        """Add ``attempt`` to its target's delivery log: written in batches, by one task, so
        thousands of deliveries a second cost a few writes, not one each."""
        self._unlogged.append(attempt)
        self._write_soon()

    def _write_soon(self) -> None:
        if self._logging is None or self._logging.done():
            self._logging = asyncio.create_task(self._write_log())

    async def _write_log(self) -> None:
        """Write the delivery logs and the marks, in one transaction each, until none wait."""
        while self._unlogged or self._unmarked:
            batch, self._unlogged = self._unlogged, []
            marks, self._unmarked = self._unmarked, {}
            try:
                await self._io.call(self._write, batch, marks)
            except StoreError as exc:
                log.error("push_log_not_written attempts=%d marks=%d error=%s", len(batch),
                          len(marks), exc)

    def _write(self, attempts: list[PushAttempt], marks: dict[int, float]) -> None:
        self.state.record_push_attempts(attempts, self.settings.log_keep)
        self.state.mark_push_targets(marks)

    async def flush_log(self) -> None:
        """Wait until every attempt so far is in the delivery logs."""
        while self._logging is not None and not self._logging.done():
            await asyncio.shield(self._logging)

    async def _message(self, target: PushTarget, send: Send) -> tuple[bytes, dict[str, str]]:
        assert self.feeds is not None  # only a delivering process has sends
        if target.kind == WEBSUB:
            body, link = await self.feeds.document(target.sub_id,
                                                   await self.subscription(target.sub_id),
                                                   target.format, target.topic,
                                                   self.recent_items)
            return websub_message(target, body, link)
        return webhook_message(target, await self.subscription(target.sub_id),
                               [p for p in send.payloads if isinstance(p, ReflectedItem)])

    async def close(self) -> None:
        tasks = (*self._sending, *self._verifying, *self._denying)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.flush_log()
        await self.client.close()
        self._io.close()


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _expired(target: PushTarget, now: float) -> bool:
    return target.expires_at is not None and target.expires_at <= now
