"""The farm as a WebSub publisher with its own hub (W3C WebSub; docs/websub.md).

Usage::

    async with FarmServer(config) as farm, FarmHub(farm) as hub:
        farm.feed_url(3)   # now answered with Link: <hub.url>; rel="hub", <feed>; rel="self"

While a :class:`FarmHub` runs, every feed the farm serves advertises it in ``Link:`` headers (all
formats: RSS 0.91 has no element for it). The hub (aiohttp, on the farm's first address, a port
of its own: the farm's bare HTTP server takes no request bodies):

* ``POST /hub`` with ``hub.mode=subscribe|unsubscribe``: 202, then it verifies the subscriber's
  intent by GET to the callback (a random challenge that must come back verbatim with 200); only
  topics the farm serves are accepted (400 otherwise); leases are granted as asked within
  ``[min_lease_s, max_lease_s]`` and expire on the farm's clock;
* on each new post of a subscribed feed (its posting process says when, on the farm clock), the
  feed's document at that instant is POSTed to every callback (a fat ping), signed
  ``X-Hub-Signature: sha256=...`` when a secret was given. A 410 answer ends the subscription.

Signing is written here with :mod:`hmac`, not borrowed from feedmesh's subscriber, so that a
subscriber test against this hub checks one implementation against another.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from feedmesh.farm.server import FarmServer

__all__ = ["FarmHub"]

log = logging.getLogger(__name__)


@dataclass
class _Callback:
    secret: str
    expires_at: float


class FarmHub:
    def __init__(self, farm: FarmServer, *, min_lease_s: int = 3600,
                 max_lease_s: int = 30 * 86400, verify_timeout_s: float = 5.0) -> None:
        self.farm = farm
        self.min_lease_s = min_lease_s
        self.max_lease_s = max_lease_s
        self.verify_timeout_s = verify_timeout_s
        self.subscriptions: dict[int, dict[str, _Callback]] = {}
        """Feed id -> callback URL -> its secret and lease."""
        self.received: list[tuple[str, str]] = []
        """(mode, topic) of every request made to the hub, in order."""
        self.pushes = 0
        self.push_failures = 0
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task] = set()
        self._publisher: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._pushed_until: dict[int, float] = {}

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> FarmHub:
        app = web.Application(client_max_size=64 * 1024)
        app.add_routes([web.post("/hub", self._request)])
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        address = self.farm.addresses[0]
        site = web.TCPSite(self._runner, address, 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://{address}:{port}/hub"
        self.farm.hub_url = self.url
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        self._publisher = asyncio.create_task(self._publish_loop())
        return self

    async def stop(self) -> None:
        self.farm.hub_url = ""
        tasks = [*self._tasks, *([self._publisher] if self._publisher else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FarmHub:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _spawn(self, coroutine) -> None:  # type: ignore[no-untyped-def]
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("farm hub: task failed", exc_info=task.exception())

    # -- subscription requests -------------------------------------------------------------------

    def _feed_of(self, topic: str) -> int | None:
        head, _, tail = topic.rpartition("/feeds/")
        if not head or not tail.isdigit():
            return None
        feed_id = int(tail)
        if not 0 <= feed_id < self.farm.config.feeds or self.farm.feed_url(feed_id) != topic:
            return None
        return feed_id

    async def _request(self, request: web.Request) -> web.Response:
        form = await request.post()
        mode, topic = str(form.get("hub.mode", "")), str(form.get("hub.topic", ""))
        callback = str(form.get("hub.callback", ""))
        self.received.append((mode, topic))
        if mode not in ("subscribe", "unsubscribe"):
            return web.Response(status=400, text=f"hub.mode {mode[:40]!r} is not supported\n")
        feed_id = self._feed_of(topic)
        if feed_id is None:
            return web.Response(status=400, text=f"topic {topic[:200]!r} is not a feed of "
                                                 "this farm\n")
        if not callback.startswith(("http://", "https://")):
            return web.Response(status=400, text="hub.callback must be an http(s) URL\n")
        secret = str(form.get("hub.secret", ""))
        if len(secret.encode()) >= 200:
            return web.Response(status=400, text="hub.secret must be shorter than 200 bytes\n")
        asked = str(form.get("hub.lease_seconds", ""))
        lease = int(asked) if asked.isdigit() else 10 * 86400
        lease = max(self.min_lease_s, min(self.max_lease_s, lease))
        self._spawn(self._verify(mode, feed_id, topic, callback, secret, lease))
        return web.Response(status=202, text="accepted\n")

    async def _verify(self, mode: str, feed_id: int, topic: str, callback: str, secret: str,
                      lease: int) -> None:
        challenge = secrets.token_urlsafe(16)
        params = {"hub.mode": mode, "hub.topic": topic, "hub.challenge": challenge}
        if mode == "subscribe":
            params["hub.lease_seconds"] = str(lease)
        try:
            async with self._session.get(callback, params=params) as reply:
                body = await reply.text()
                ok = reply.status == 200 and body == challenge
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("farm hub: cannot verify %s for %s: %s", mode, callback, exc)
            return
        if not ok:
            return
        callbacks = self.subscriptions.setdefault(feed_id, {})
        if mode == "subscribe":
            callbacks[callback] = _Callback(secret, self.farm.clock.now() + lease)
            self._pushed_until.setdefault(feed_id, self.farm.clock.now())
        else:
            callbacks.pop(callback, None)
        self._changed.set()

    # -- content distribution --------------------------------------------------------------------

    def _next_post(self, feed_id: int) -> float:
        since = self._pushed_until.get(feed_id, self.farm.clock.now())
        return self.farm.model.process(feed_id).next_post_after(since, 86400.0)

    async def _publish_loop(self) -> None:
        clock = self.farm.clock
        while True:
            self._changed.clear()
            live = [f for f, callbacks in self.subscriptions.items() if callbacks]
            due = {feed_id: self._next_post(feed_id) for feed_id in live}
            now = clock.now()
            ready = [feed_id for feed_id, at in due.items() if at <= now]
            for feed_id in ready:
                self._pushed_until[feed_id] = now
                self._spawn(self._push(feed_id, now))
            if ready:
                continue
            wait = min(due.values(), default=now + 60.0) - now
            sleeper = asyncio.ensure_future(clock.sleep(min(wait, 3600.0)))
            changed = asyncio.ensure_future(self._changed.wait())
            await asyncio.wait({sleeper, changed}, return_when=asyncio.FIRST_COMPLETED)
            sleeper.cancel()
            changed.cancel()

    async def _push(self, feed_id: int, at: float) -> None:
        doc = self.farm.model.document(feed_id, at)
        topic = self.farm.feed_url(feed_id)
        now = self.farm.clock.now()
        callbacks = self.subscriptions.get(feed_id, {})
        for callback, subscription in list(callbacks.items()):
            if subscription.expires_at <= now:
                callbacks.pop(callback, None)
                continue
            headers = {"Content-Type": doc.content_type,
                       "Link": f'<{self.url}>; rel="hub", <{topic}>; rel="self"'}
            if subscription.secret:
                digest = hmac.new(subscription.secret.encode(), doc.body, hashlib.sha256)
                headers["X-Hub-Signature"] = f"sha256={digest.hexdigest()}"
            try:
                async with self._session.post(callback, data=doc.body, headers=headers) as reply:
                    self.pushes += 1
                    if reply.status == 410:
                        callbacks.pop(callback, None)
                    elif not 200 <= reply.status < 300:
                        self.push_failures += 1
            except (aiohttp.ClientError, TimeoutError) as exc:
                self.push_failures += 1
                log.warning("farm hub: push of feed %d to %s failed: %s", feed_id, callback, exc)
