"""A running hub (every tier and the web server) crawling a real farm, both on loopback."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from feedmesh.compose.embedded import EmbeddedHub as Hub
from feedmesh.compose.embedded import running_hub
from feedmesh.compose.settings import HubSettings
from feedmesh.crawl import CrawlSettings
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.fetch import FetchSettings, StaticResolver
from feedmesh.hub.web import WebLimits
from tests.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures

ORIGIN = 1_760_000_000.0


class Client:
    """The JSON API as a person's program uses it."""

    def __init__(self, session: aiohttp.ClientSession, base: str, token: str = "") -> None:
        self.session = session
        self.base = base
        self.token = token

    async def call(self, method: str, path: str, json: Any = None, *, data: bytes | None = None,
                   headers: dict[str, str] | None = None) -> tuple[int, Any]:
        headers = dict(headers or {})
        if self.token:
            headers.setdefault("Authorization", f"Bearer {self.token}")
        async with self.session.request(method, self.base + path, json=json, data=data,
                                        headers=headers) as response:
            if response.status == 204:
                return 204, None
            if "json" in response.content_type:
                return response.status, await response.json()
            return response.status, await response.text()

    async def sign_up(self, name: str = "ann") -> Client:
        status, body = await self.call("POST", "/api/accounts", {"name": name})
        assert status == 201, body
        return Client(self.session, self.base, body["token"])


class HubEnv:
    def __init__(self, hub: Hub, base: str, farm: FarmServer,
                 session: aiohttp.ClientSession) -> None:
        self.hub = hub
        self.base = base
        self.farm = farm
        self.session = session
        self.anonymous = Client(session, base)

    async def add_farm_sources(self, client: Client) -> int:
        async with self.session.get(self.farm.opml_url) as response:
            opml = await response.read()
        status, body = await client.call("POST", "/api/opml", data=opml,
                                         headers={"Content-Type": "text/xml"})
        assert status == 200, body
        return body["added"]


def hub_settings(data_dir: str, **overrides: Any) -> HubSettings:
    fields: dict[str, Any] = {
        "data_dir": data_dir, "crawl_interval_s": 0.5, "schedule": None,
        "fetch": FetchSettings(allow_networks=("127.0.0.0/8",), per_host_connections=8,
                               total_timeout_s=3.0),
        "crawl": CrawlSettings(batch_interval_s=0.01)}
    fields.update(overrides)
    return HubSettings(**fields)


@pytest.fixture
def farm_config() -> FarmConfig:
    # Accelerated: an hour of posting per second, healthy feeds.
    return FarmConfig(feeds=40, seed=11, faults="none", speed=3600.0, origin=ORIGIN)


@pytest.fixture
def web_limits() -> WebLimits:
    return WebLimits()


@pytest.fixture
def hub_overrides() -> dict[str, Any]:
    """Settings a test module gives its hub beside hub_settings' (e.g. the learned schedule)."""
    return {}


@pytest.fixture
def hub_bus(request) -> tuple[str, str]:
    """The bus the hub's tiers meet on, as (URL, namespace): in-process unless a test asks for
    ``"jetstream"`` (``@pytest.mark.parametrize("hub_bus", [...], indirect=True)``), then a real
    NATS server's, in a namespace of the test's own."""
    if getattr(request, "param", "memory") == "memory":
        return "memory", "feedmesh"
    return request.getfixturevalue("nats_url"), f"t{uuid.uuid4().hex[:12]}"


BUSES = pytest.mark.parametrize("hub_bus", ["memory", "jetstream"], indirect=True)
"""Run a hub test on both buses."""


@pytest.fixture
async def hub_env(tmp_path, farm_config, web_limits, hub_overrides,
                  hub_bus) -> AsyncIterator[HubEnv]:
    async with (
        FarmServer(farm_config) as farm,
        aiohttp.ClientSession() as session,
        # Names resolve from a fixed table (none): no test can send a DNS query off the machine.
        running_hub(hub_settings(str(tmp_path), **hub_overrides), "127.0.0.1", 0,
                    limits=web_limits, resolver=StaticResolver({}), bus=hub_bus[0],
                    bus_namespace=hub_bus[1]) as (hub, base),
    ):
        yield HubEnv(hub, base, farm, session)
