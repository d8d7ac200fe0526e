"""A small publisher with its own WebSub hub, on one loopback address, written from the spec for
the subscriber tests (websub.rocks' subscriber test plan, played locally).

Publisher: ``GET /feeds/<name>`` serves an Atom feed whose hub and self links (in the document
and/or in ``Link:`` headers) each test chooses; ``/moved/<name>`` redirects to it (301 or 302).
Hub: ``POST /hub`` (and ``/hub-307``, ``/hub-308``, which redirect to ``/hub`` and ``/hub2``)
answers 202, then verifies intent by GET to the callback like a real hub, in the background;
:meth:`LoopbackHub.publish` POSTs a document to every verified callback of a topic, signed with
the subscriber's secret (or signed wrongly, or not at all, as the test says).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>{name}</title><id>urn:feed:{name}</id>
<updated>2025-01-01T00:00:00Z</updated>{links}
{entries}</feed>"""
ENTRY = ("<entry><id>urn:entry:{id}</id><title>{title}</title>"
         "<updated>2025-01-01T00:00:00Z</updated><summary>{title}</summary></entry>")


@dataclass
class Topic:
    name: str
    hub_path: str = "/hub"
    self_url: str = ""
    """rel=self to advertise ("": the feed's own URL)."""
    in_document: bool = True
    in_header: bool = False
    header_hub: str = ""
    """A hub advertised only in the Link header (priority test)."""
    entries: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Sub:
    topic: str
    callback: str
    secret: str
    lease_s: int


class LoopbackHub:
    def __init__(self, host: str = "127.0.3.1", grant_lease_s: int | None = None) -> None:
        self.host = host
        self.grant_lease_s = grant_lease_s
        self.unavailable = False
        """True: every hub request is answered 503 (the publisher's hub went away)."""
        self.topics: dict[str, Topic] = {}
        self.requests: list[dict[str, str]] = []
        """Every subscription request received (its form), in order, with ``path``."""
        self.verified: dict[tuple[str, str], Sub] = {}
        self.verifications: list[tuple[str, int, str]] = []
        """(mode, callback status, callback body) of each verification made."""
        self.deliveries: list[tuple[int, str]] = []
        self.feed_gets = 0
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task] = set()
        self.session: aiohttp.ClientSession | None = None
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def feed_url(self, name: str) -> str:
        return f"{self.base}/feeds/{name}"

    def add_topic(self, topic: Topic) -> str:
        self.topics[topic.name] = topic
        return self.feed_url(topic.name)

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> LoopbackHub:
        app = web.Application()
        app.add_routes([web.get("/feeds/{name}", self._feed),
                        web.get("/moved/{code}/{name}", self._moved),
                        web.post("/hub", self._hub), web.post("/hub2", self._hub),
                        web.post("/hub-307", self._redirect_hub),
                        web.post("/hub-308", self._redirect_hub)])
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.session.close()
        await self._runner.cleanup()

    # -- the publisher ---------------------------------------------------------------------------

    def document(self, name: str, entries: list[tuple[str, str]] | None = None) -> bytes:
        topic = self.topics[name]
        self_url = topic.self_url or self.feed_url(name)
        links = ""
        if topic.in_document:
            links = (f'<link rel="hub" href="{self.base}{topic.hub_path}"/>'
                     f'<link rel="self" href="{self_url}"/>')
        rows = entries if entries is not None else topic.entries
        body = "".join(ENTRY.format(id=i, title=t) for i, t in rows)
        return ATOM.format(name=name, links=links, entries=body).encode()

    async def _feed(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self.topics:
            raise web.HTTPNotFound()
        self.feed_gets += 1
        topic = self.topics[name]
        headers = {}
        if topic.in_header or topic.header_hub:
            hub = topic.header_hub or f"{self.base}{topic.hub_path}"
            headers["Link"] = (f'<{hub}>; rel="hub", <{topic.self_url or self.feed_url(name)}>; '
                               'rel="self"')
        return web.Response(body=self.document(name), headers=headers,
                            content_type="application/atom+xml")

    async def _moved(self, request: web.Request) -> web.Response:
        code = int(request.match_info["code"])
        raise {301: web.HTTPMovedPermanently, 302: web.HTTPFound}[code](
            self.feed_url(request.match_info["name"]))

    # -- the hub ---------------------------------------------------------------------------------

    async def _redirect_hub(self, request: web.Request) -> web.Response:
        self.requests.append({**dict(await request.post()), "path": request.path})
        if request.path == "/hub-307":
            raise web.HTTPTemporaryRedirect(f"{self.base}/hub")
        raise web.HTTPPermanentRedirect(f"{self.base}/hub2")

    async def _hub(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.requests.append({**form, "path": request.path})
        if self.unavailable:
            return web.Response(status=503, text="down for maintenance")
        if form.get("hub.mode") not in ("subscribe", "unsubscribe") or not form.get(
                "hub.callback") or not form.get("hub.topic"):
            return web.Response(status=400, text="bad request")
        task = asyncio.create_task(self._verify(form))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.Response(status=202, text="accepted")

    async def _verify(self, form: dict[str, str]) -> None:
        mode, topic, callback = form["hub.mode"], form["hub.topic"], form["hub.callback"]
        challenge = secrets.token_hex(8)
        lease = self.grant_lease_s or int(form.get("hub.lease_seconds") or 864000)
        params = {"hub.mode": mode, "hub.topic": topic, "hub.challenge": challenge}
        if mode == "subscribe":
            params["hub.lease_seconds"] = str(lease)
        async with self.session.get(callback, params=params) as reply:
            text = await reply.text()
            self.verifications.append((mode, reply.status, text))
            if reply.status != 200 or text != challenge:
                return
        if mode == "subscribe":
            self.verified[(topic, callback)] = Sub(topic, callback, form.get("hub.secret", ""),
                                                   lease)
        else:
            self.verified.pop((topic, callback), None)

    async def deny(self, topic: str, reason: str = "no more") -> list[int]:
        statuses = []
        for (t, callback) in list(self.verified):
            if t == topic:
                async with self.session.get(callback, params={
                        "hub.mode": "denied", "hub.topic": topic, "hub.reason": reason}) as reply:
                    statuses.append(reply.status)
                del self.verified[(t, callback)]
        return statuses

    async def publish(self, topic: str, body: bytes, *, signature: str = "good",
                      method: str = "sha256") -> list[int]:
        """POST ``body`` to every verified callback of ``topic``; the statuses answered.
        ``signature``: ``good``, ``wrong`` (another secret), ``none``, ``unknown`` (md5) or
        ``non_ascii`` (a digest of letters outside ASCII)."""
        statuses = []
        for sub in [s for (t, _), s in self.verified.items() if t == topic]:
            headers = {"Content-Type": "application/atom+xml"}
            if signature == "good":
                headers["X-Hub-Signature"] = f"{method}=" + hmac.new(
                    sub.secret.encode(), body, getattr(hashlib, method)).hexdigest()
            elif signature == "wrong":
                headers["X-Hub-Signature"] = "sha256=" + hmac.new(
                    b"not-the-secret", body, hashlib.sha256).hexdigest()
            elif signature == "unknown":
                digest = hashlib.md5(body, usedforsecurity=False).hexdigest()
                headers["X-Hub-Signature"] = "md5=" + digest
            elif signature == "non_ascii":
                headers["X-Hub-Signature"] = "sha256=" + "\u00e9" * 64
            async with self.session.post(sub.callback, data=body, headers=headers) as reply:
                statuses.append(reply.status)
                self.deliveries.append((reply.status, await reply.text()))
        return statuses
