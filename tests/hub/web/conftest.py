"""Helpers for the web layer's tests: the one error shape, and a hub whose rate limits stay out
of the way unless a module asks for them (tests/hub/conftest.py starts the hub and the farm)."""

from __future__ import annotations

from typing import Any

import pytest

from feedmesh.hub.web import WebLimits
from tests.hub.conftest import Client, HubEnv

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
    sub = env.hub.db.subscription(sub_id)
    assert sub is not None
    return len(await env.hub.reflectors[sub.reflector].items(sub_id))


@pytest.fixture
async def ann(hub_env: HubEnv) -> Client:
    return await hub_env.anonymous.sign_up("ann")


@pytest.fixture
async def bob(hub_env: HubEnv) -> Client:
    return await hub_env.anonymous.sign_up("bob")
