"""``feedmesh serve`` and ``feedmesh crawler`` as processes: the crawling hub of
:mod:`.embedded`, with the web layer (serve) or only ``/metrics`` and ``/api/stats`` (a crawler,
whose people are served by ``feedmesh web`` processes), and the republisher when asked.

Inputs are checked before anything starts: the HTTP port is bound (a busy port fails at once),
the OPML list read and the republisher's key folder opened before the data folder is created or
a feed fetched.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from feedmesh.compose.embedded import embedded_hub
from feedmesh.compose.engines import operator_token
from feedmesh.compose.lifecycle import bind, run_roles
from feedmesh.compose.opml import load_opml
from feedmesh.compose.settings import ServeSettings
from feedmesh.compose.web import StatsRole, WebRole
from feedmesh.memory import release_memory

__all__ = ["serve"]


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _address(text: str, flag: str) -> tuple[str, int]:
    host, colon, port = text.strip().rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{flag} must be HOST:PORT (e.g. 127.0.0.1:7000), got {text!r}")
    return host.strip("[]"), int(port)


async def serve(settings: ServeSettings, *, say: Callable[[str], None] = _say) -> int:
    """Run the crawling hub until SIGINT or SIGTERM; its exit status."""
    s, name = settings, "serve" if settings.web else "crawler"
    sock = bind(s.listen.host, s.listen.port)
    endpoint = None
    try:
        urls = ([o.url for o in (await load_opml(s.opml, s.hub.fetch)).outlines]
                if s.opml else [])
        if s.republish:  # (imported here: a hub that does not republish loads no mesh code)
            from feedmesh.compose.republish import open_republisher
            endpoint, keys = await open_republisher(
                s.republish, _address(s.republish_listen, "--republish-listen"),
                _address(s.republish_bootstrap, "--republish-bootstrap")
                if s.republish_bootstrap else None)
        hub = embedded_hub(s.hub, bus=s.bus.url, bus_namespace=s.bus.namespace,
                           bus_credentials=s.bus.credentials, store_url=s.store)
    except BaseException:
        sock.close()
        if endpoint is not None:
            endpoint.close()
        raise
    port = sock.getsockname()[1]
    base = s.base_url or f"http://{s.listen.host}:{port}"
    roles = list(hub.roles)
    republisher = None
    if endpoint is not None:
        from feedmesh.compose.republish import RepublishRole
        republisher = RepublishRole(endpoint, keys, hub.crawler, hub.bus, hub.metrics,
                                    group=f"republish-{hub.desk.group}",
                                    operator_feeds=lambda: hub.desk.operator_feeds)
        roles.insert(roles.index(hub.crawler_role), republisher)  # joined before it publishes
    token = operator_token(s.hub.data_dir)
    roles.append(WebRole(hub.front, base_url=base, limits=s.limits, operator_token=token)
                 if s.web else StatsRole(hub.front, operator_token=token))

    async def announce() -> None:
        if urls:
            await hub.add_feeds(urls)
            urls.clear()
            release_memory()
        if s.web:
            say(f"feedmesh hub on {base}/ (API: {base}/api/openapi.json, metrics: "
                f"{base}/metrics)")
        else:
            say(f"feedmesh {name}: {hub.crawler.feed_count()} feeds, metrics at {base}/metrics")
        if republisher is not None:
            say(f"republishing on the mesh: overlay node {republisher.bootstrap}, key "
                f"{republisher.republisher.identity}, feeds at {base}/mesh/opml")

    status = await run_roles(roles, http=sock, closers=hub.closers(), announce=announce)
    say("stopped: in-flight work finished")
    return status
