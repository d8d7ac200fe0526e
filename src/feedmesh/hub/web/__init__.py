"""The hub's web layer: JSON API (:mod:`.api`), private feeds (:mod:`.feeds`), HTML interface
(``static/``), OpenAPI description (:mod:`.openapi`), assembled by :mod:`.server`."""

from feedmesh.hub.web.limits import WebLimits
from feedmesh.hub.web.server import build_app, web_routes

__all__ = ["WebLimits", "build_app", "web_routes"]
