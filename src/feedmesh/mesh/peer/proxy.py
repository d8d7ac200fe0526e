"""The person's side of a peer, on loopback only: the local proxy and the local API.

The proxy (SCRIBE-RSS 4.3.2) serves each followed feed and one merged feed from the archive, as
RSS 2.0, Atom and JSON Feed, with an ETag (a reader's conditional GET gets a 304), so a reader
polls the peer as often as it likes and the publisher never sees it::

    GET /                      what is served here (JSON: each feed's URLs)
    GET /feeds/{id}.{rss,atom,json}
    GET /all.{rss,atom,json}   every followed feed, merged, newest first
    GET /feeds.opml            the proxy's feeds as OPML (``newsboat -i``)
    GET /api/status            neighbours, entries from each, deficits, fetches saved
    POST /api/feeds            {"url": ...}: follow one more feed
    POST /api/pull             {"url": ..., "since": T, "until": T}: pull its archive from peers

This listener is not the peer API (which neighbours call on the node's address); it refuses to
bind anything but a loopback address (:func:`check_loopback`).

Loopback is not enough: any web page the person opens can make their browser call it. So it
answers only its own origin:

* **Host**: a request whose ``Host`` is not ``localhost``, ``127.0.0.1``, ``[::1]`` or the bound
  address, with the bound port, gets 421 (a DNS-rebinding page reaches us under its own name);
* **state-changing calls** (every POST) need ``Content-Type: application/json``, which a page
  can only send after a CORS preflight this proxy never grants, and no ``Origin`` but our own
  (403 otherwise): a cross-origin ``text/plain`` form cannot make the peer follow a feed;
* feed URLs are checked as followable (:func:`feedmesh.feeds.urls.check_feed_url`): http(s), a
  valid host and port 1-65535, no spaces or credentials; a 400 says what is wrong.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Awaitable, Callable
from typing import Protocol

import msgspec
from aiohttp import web

from feedmesh.feeds.opml import OpmlOutline, render_opml
from feedmesh.feeds.render import CONTENT_TYPES, render_feed
from feedmesh.feeds.urls import check_feed_url
from feedmesh.model import FeedInfo

from .archive import Archive

__all__ = ["BadRequest", "LocalProxy", "PeerControl", "check_loopback"]

SUFFIXES = {"rss": "rss2.0", "atom": "atom1.0", "json": "json1.1"}
FEED_ENTRIES = 100
MERGED_ENTRIES = 200
_json = msgspec.json.Encoder()


class PeerControl(Protocol):
    """What the local API asks of the peer."""

    def status(self) -> dict[str, object]: ...

    async def add_feed(self, url: str) -> dict[str, object]: ...

    async def pull(self, url: str, since: float | None, until: float | None) -> dict[str, object]:
        ...


class BadRequest(Exception):
    """A local API call the peer cannot act on; the message says why (answered with 400)."""


def check_loopback(host: str) -> None:
    """ValueError unless ``host`` is a loopback address: the local API serves one person."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"the local API must listen on a loopback address (127.x.y.z or ::1), "
                         f"got {host!r}") from None
    if not address.is_loopback:
        raise ValueError(f"the local API must listen on a loopback address, not {host}: it "
                         "serves the person on this machine, not the network")


class LocalProxy:
    def __init__(self, host: str, port: int, archive: Archive, control: PeerControl) -> None:
        check_loopback(host)
        self.host = host
        self.port = port
        self.archive = archive
        self.control = control
        self.reader_requests = 0
        """Feed documents served to readers: each one a request the publisher did not get."""
        self.not_modified = 0
        self.refused: dict[str, int] = {"foreign_host": 0, "foreign_origin": 0,
                                        "simple_content_type": 0}
        """Requests refused as not from this machine's own pages (see the module docstring)."""
        self._runner: web.AppRunner | None = None

    def allowed_hosts(self) -> frozenset[str]:
        """The ``Host`` values this proxy answers (lower case, port included; the port alone may
        be left out only when it is 80)."""
        bound = f"[{self.host}]" if ":" in self.host else self.host
        names = {"localhost", "127.0.0.1", "[::1]", bound.lower()}
        hosts = {f"{name}:{self.port}" for name in names}
        if self.port == 80:
            hosts |= names
        return frozenset(hosts)

    @web.middleware
    async def _own_origin(self, request: web.Request,
                          handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                          ) -> web.StreamResponse:
        host = request.headers.get("Host", "").strip().lower()
        if host not in self.allowed_hosts():
            self.refused["foreign_host"] += 1
            return _json_response({"error": f"Host {host[:100]!r} is not this proxy's; ask "
                                            f"{self.url}"}, status=421)
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            origin = request.headers.get("Origin")
            if origin is not None and origin.lower().removeprefix("http://") not in \
                    self.allowed_hosts():
                self.refused["foreign_origin"] += 1
                return _json_response({"error": f"a page from {origin[:100]!r} may not change "
                                                "this peer"}, status=403)
            if request.content_type != "application/json":
                self.refused["simple_content_type"] += 1
                return _json_response({"error": "a call that changes the peer must be sent as "
                                                "Content-Type: application/json"}, status=403)
        return await handler(request)

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024, middlewares=[self._own_origin])
        app.router.add_get("/", self._index)
        app.router.add_get("/feeds.opml", self._opml)
        app.router.add_get(r"/feeds/{feed_id:\d+}.{suffix:rss|atom|json}", self._feed)
        app.router.add_get("/all.{suffix:rss|atom|json}", self._merged)
        app.router.add_get("/api/status", self._status)
        app.router.add_post("/api/feeds", self._add_feed)
        app.router.add_post("/api/pull", self._pull)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def feed_url(self, feed_id: int, suffix: str = "rss") -> str:
        return f"{self.url}/feeds/{feed_id}.{suffix}"

    # -- documents -----------------------------------------------------------------------------

    async def _index(self, request: web.Request) -> web.Response:
        rows = await self.archive.feeds()
        feeds = [{"id": row.id, "url": row.source_url, "title": row.title,
                  **{s: self.feed_url(row.id, s) for s in SUFFIXES}} for row in rows]
        merged = {s: f"{self.url}/all.{s}" for s in SUFFIXES}
        return _json_response({"feeds": feeds, "all": merged})

    async def _opml(self, request: web.Request) -> web.Response:
        rows = await self.archive.feeds()
        outlines = [OpmlOutline(url=self.feed_url(row.id), title=row.title or row.source_url)
                    for row in rows]
        body = render_opml("feedmesh peer", outlines)
        return web.Response(body=body, content_type="text/x-opml", charset="utf-8")

    async def _feed(self, request: web.Request) -> web.Response:
        feed_id = int(request.match_info["feed_id"])
        url = self.archive.url_of(feed_id)
        if url is None:
            raise web.HTTPNotFound(text=f"no feed {feed_id} here; GET / lists the feeds\n")
        info = await self.archive.info(feed_id) or FeedInfo(title=url)
        suffix = request.match_info["suffix"]
        info = msgspec.structs.replace(info, self_link=self.feed_url(feed_id, suffix),
                                       hub_links=())
        rows = await self.archive.entries(feed_id, FEED_ENTRIES)
        body = render_feed(info, [row.entry for row in rows], SUFFIXES[suffix])
        return self._document(request, body, SUFFIXES[suffix])

    async def _merged(self, request: web.Request) -> web.Response:
        suffix = request.match_info["suffix"]
        rows = await self.archive.recent(MERGED_ENTRIES)
        titles: dict[int, tuple[str, str]] = {}
        for row in await self.archive.feeds():
            titles[row.id] = (row.title or row.source_url, _origin(row.source_url, row.info))
        info = FeedInfo(title="feedmesh peer: every feed", link=self.url,
                        self_link=f"{self.url}/all.{suffix}")
        body = render_feed(info, [row.entry for row in rows], SUFFIXES[suffix],
                           source_titles=[titles.get(row.feed_id) for row in rows])
        return self._document(request, body, SUFFIXES[suffix])

    def _document(self, request: web.Request, body: bytes, fmt: str) -> web.Response:
        self.reader_requests += 1
        etag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
        if etag in request.headers.get("If-None-Match", ""):
            self.not_modified += 1
            return web.Response(status=304, headers={"ETag": etag})
        content_type = CONTENT_TYPES[fmt]
        return web.Response(body=body, headers={"ETag": etag,
                                                "Content-Type": f"{content_type}; charset=utf-8",
                                                "Cache-Control": "no-cache"})

    # -- the local API -------------------------------------------------------------------------

    async def _status(self, request: web.Request) -> web.Response:
        return _json_response(self.control.status())

    async def _add_feed(self, request: web.Request) -> web.Response:
        return await self._call(request, lambda body: self.control.add_feed(_url(body)))

    async def _pull(self, request: web.Request) -> web.Response:
        return await self._call(request, lambda body: self.control.pull(
            _url(body), _time(body, "since"), _time(body, "until")))

    async def _call(self, request: web.Request,
                    action: Callable[[dict], Awaitable[dict[str, object]]]) -> web.Response:
        try:
            body = msgspec.json.decode(await request.read())
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object")
            return _json_response(await action(body))
        except (msgspec.DecodeError, ValueError, BadRequest) as error:
            return _json_response({"error": str(error)}, status=400)


def _origin(url: str, info: FeedInfo | None) -> str:
    """The ``<source url>`` of a followed feed's entries: the feed itself, or for a republished
    one the legacy feed it republishes (its ``<subscribe>`` group), the channel they came from."""
    subscribe = info.subscribe if info is not None else None
    if (subscribe is not None and subscribe.republication
            and subscribe.group.startswith(("http://", "https://"))):
        return subscribe.group
    return url


def _url(body: dict) -> str:
    url = body.get("url")
    if not isinstance(url, str):
        raise BadRequest('"url" must be an http(s) feed URL')
    try:
        return check_feed_url(url)
    except ValueError as error:
        raise BadRequest(f'"url": {error}') from None


def _time(body: dict, name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int | float):
        raise BadRequest(f'"{name}" must be Unix seconds')
    return float(value)


def _json_response(value: object, status: int = 200) -> web.Response:
    return web.Response(body=_json.encode(value), status=status, content_type="application/json")
