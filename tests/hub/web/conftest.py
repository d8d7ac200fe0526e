"""Helpers for the web layer's tests: the one error shape, and a hub whose rate limits stay out
of the way unless a module asks for them (tests/hub/conftest.py starts the hub and the farm)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from feedmesh.hub.web import WebLimits
from tests.eventually import eventually
from tests.hub.conftest import Client, HubEnv

T = TypeVar("T")

# Generous limits: the tests that are not about rate limiting make many requests quickly.
ROOMY_LIMITS = WebLimits(api_rate_per_s=1000.0, api_burst=1000, signup_rate_per_s=1000.0,
                         signup_burst=1000, feed_rate_per_s=1000.0, feed_burst=1000)


@pytest.fixture
def web_limits() -> WebLimits:
    return ROOMY_LIMITS


def assert_error(status: int, body: Any, expected_status: int, code: str | None = None) -> dict:
    """The one error shape: ``{"error": {"status", "code", "message", ...}}``, nothing else."""
    assert status == expected_status, (status, body)
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert error["status"] == expected_status, body
    assert isinstance(error["code"], str) and error["code"], body
    assert isinstance(error["message"], str) and len(error["message"]) > 10, body
    if code is not None:
        assert error["code"] == code, body
    return error


async def subscribe(client: Client, query: str, **fields: Any) -> dict:
    status, body = await client.call("POST", "/api/subscriptions", {"query": query, **fields})
    assert status == 201, body
    return body["subscription"]


async def feed_entry_count(env: HubEnv, sub_id: int) -> int:
    return len(await env.hub.front.feed_items(sub_id))


@pytest.fixture
async def ann(hub_env: HubEnv) -> Client:
    return await hub_env.anonymous.sign_up("ann")


@pytest.fixture
async def bob(hub_env: HubEnv) -> Client:
    return await hub_env.anonymous.sign_up("bob")


FARM_QUERY = "government OR music OR water"
"""Matches about one synthetic article in eight: the first crawl's backlog fills a feed at once,
and later posts change it every few seconds (often enough to wait for, rarely enough to read
three formats of one version)."""


async def filled_subscription(env: HubEnv, client: Client, entries: int = 3,
                              query: str = FARM_QUERY, **fields: Any) -> dict:
    """A subscription over the farm's feeds whose private feed holds at least ``entries``."""
    if not await env.hub.front.sources(int(client.token.split("_")[1])):
        await env.add_farm_sources(client)
    sub = await subscribe(client, query, **fields)
    await settle(env)

    async def enough() -> bool:
        return await feed_entry_count(env, sub["id"]) >= entries

    await eventually(enough, timeout=90.0)
    return sub


async def settle(env: HubEnv) -> None:
    """Wait until the first crawl's backlog (every entry already in the farm's feeds, all new
    to the hub) has gone through the tiers: from then on feeds change only as the farm posts."""
    states = env.hub.crawler.crawler.states
    await eventually(lambda: states and all(s.last_fetched_at for s in states.values()),
                     timeout=90.0)
    for _ in range(2):  # the cycle that fetched the last one may still be committing
        cycle = env.hub.crawler.last_cycle
        await eventually(lambda cycle=cycle: env.hub.crawler.last_cycle is not cycle, timeout=90.0)
    assert await env.hub.drain(timeout=60.0)


async def feed_version(env: HubEnv, sub_id: int) -> tuple:
    """What entries the feed holds (not its validators: a rename changes those on purpose)."""
    sub = await env.hub.front.subscription(sub_id)
    assert sub is not None
    return tuple(env.hub.reflectors[sub.reflector].topk.newest_ids(sub_id, 1000))


async def unchanged(env: HubEnv, sub_id: int, read: Callable[[], Awaitable[T]],
                    attempts: int = 20) -> T:
    """``read()`` done while the subscription's feed did not change (the farm keeps posting, so
    a read spanning several requests is retried until it saw one version throughout)."""
    for _ in range(attempts):
        before = await feed_version(env, sub_id)
        result = await read()
        if await feed_version(env, sub_id) == before:
            return result
    raise AssertionError(f"the feed changed during each of {attempts} reads")
