"""The hub's web layer as routes: the JSON API, private feeds, the HTML interface and its OpenAPI
description, served by whichever process runs the web role (beside the process's one
``/metrics``, :mod:`feedmesh.compose.lifecycle`)."""

from __future__ import annotations

import json
from importlib.resources import files

from aiohttp import web

from feedmesh.hub.front.facade import HubFacade
from feedmesh.hub.web.api import Api
from feedmesh.hub.web.errors import error_middleware
from feedmesh.hub.web.feeds import FeedServer
from feedmesh.hub.web.limits import WebLimits
from feedmesh.hub.web.openapi import openapi
from feedmesh.hub.web.websub import HubEndpoint
from feedmesh.hub.web.websub_callback import WebSubCallback

__all__ = ["build_app", "web_routes"]

_STATIC = files("feedmesh.hub.web") / "static"
_STATIC_TYPES = {"html": "text/html", "css": "text/css", "js": "text/javascript"}


@web.middleware
async def security_headers(request: web.Request, handler):  # type: ignore[no-untyped-def]
    response = await handler(request)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    if request.path == "/" or request.path.startswith("/static/"):
        response.headers.setdefault(
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            "connect-src 'self'; frame-ancestors 'none'")
    return response


def web_routes(hub: HubFacade, *, base_url: str, limits: WebLimits | None = None,
               operator_token: bytes | None = None) -> tuple[list[web.RouteDef], list, int]:
    """The web layer's routes over ``hub``, the middlewares they need (outermost first) and the
    largest request body they read: what a process's one HTTP server serves of it.
    ``operator_token``: who may see the names of paused hosts in ``/api/stats``."""
    limits = limits or WebLimits()
    max_request_bytes = max(limits.max_body_bytes, limits.max_opml_bytes)
    feeds = FeedServer(hub, limits, base_url)
    api = Api(hub, feeds, limits, operator_token=operator_token)
    routes = [*api.routes(), *HubEndpoint(hub, limits, base_url).routes(),
              *WebSubCallback(hub, limits.max_push_bytes).routes()]
    spec = json.dumps(openapi(base_url))

    async def openapi_json(request: web.Request) -> web.Response:
        return web.Response(text=spec, content_type="application/json")

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=(_STATIC / "index.html").read_text("utf-8"),
                            content_type="text/html")

    # The interface's few files, served from memory: a name that is not one of them raises
    # HTTPNotFound, which the error middleware answers in the JSON shape (aiohttp's static
    # handler answers a missing file with an empty 404 the middleware never sees).
    static_files = {item.name: (item.read_bytes(), _STATIC_TYPES[item.name.rpartition(".")[2]])
                    for item in _STATIC.iterdir()
                    if item.is_file() and item.name.rpartition(".")[2] in _STATIC_TYPES}

    async def static_file(request: web.Request) -> web.Response:
        found = static_files.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound()
        return web.Response(body=found[0], content_type=found[1], charset="utf-8")

    routes += [
        web.get("/api/openapi.json", openapi_json),
        web.get("/f/{token}", feeds.handle),
        web.get("/f/{token}/archive/{page}", feeds.archive),
        web.get("/", index),
        web.get("/static/{name}", static_file),
    ]
    # security_headers outermost, so the error answers error_middleware makes get them too.
    return routes, [security_headers, error_middleware(max_request_bytes)], max_request_bytes


def build_app(hub: HubFacade, *, base_url: str, limits: WebLimits | None = None) -> web.Application:
    """The web layer as an application of its own (tests; a process serves :func:`web_routes`
    beside its other roles' routes and one ``/metrics``)."""
    routes, middlewares, max_body = web_routes(hub, base_url=base_url, limits=limits)
    app = web.Application(middlewares=middlewares, client_max_size=max_body)
    app.add_routes(routes)
    return app
