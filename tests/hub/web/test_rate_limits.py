"""Rate limits: per API token, per client address for sign-up, and per personalized feed (a reader
polling every 100 ms gets 429 with Retry-After after its burst, and nobody else's feed notices).
Real time on a real server: the limits are token buckets on the hub's clock."""

from __future__ import annotations

import asyncio
import re

import pytest

from feedmesh.hub.web import WebLimits
from tests.eventually import eventually
from tests.hub.web.conftest import ROOMY_LIMITS, assert_error, subscribe

TIGHT = WebLimits(**{**{f: getattr(ROOMY_LIMITS, f) for f in ROOMY_LIMITS.__struct_fields__},
                     "api_rate_per_s": 2.0, "api_burst": 6, "signup_rate_per_s": 0.1,
                     "signup_burst": 3, "feed_rate_per_s": 0.2, "feed_burst": 10})


@pytest.fixture
def web_limits() -> WebLimits:
    return TIGHT


def _metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


async def test_api_rate_limit_per_token(hub_env, ann, bob):
    statuses = []
    for _ in range(TIGHT.api_burst + 3):
        status, body = await ann.call("GET", "/api/subscriptions")
        statuses.append(status)
        if status == 429:
            break
    # A token or two may refill while the burst is spent on a slow machine; never more.
    assert statuses[-1] == 429 and TIGHT.api_burst <= statuses.count(200) <= TIGHT.api_burst + 2
    error = assert_error(429, body, 429, "rate_limited")
    assert 0 < error["retry_after_s"] <= 1 / TIGHT.api_rate_per_s
    async with hub_env.session.get(hub_env.base + "/api/subscriptions",
                                   headers={"Authorization": f"Bearer {ann.token}"}) as r:
        assert r.status == 429
        assert int(r.headers["Retry-After"]) >= 1
    status, _ = await bob.call("GET", "/api/subscriptions")  # another token: unaffected
    assert status == 200

    async def allowed_again() -> bool:
        return (await ann.call("GET", "/api/accounts/me"))[0] == 200

    await eventually(allowed_again, timeout=10.0)


async def test_sign_up_rate_limit_per_address(hub_env, ann, bob):
    # ann and bob took two of the three sign-ups this address may make at once.
    status, body = await hub_env.anonymous.call("POST", "/api/accounts", {"name": "carol"})
    assert status == 201, body
    status, body = await hub_env.anonymous.call("POST", "/api/accounts", {"name": "dave"})
    error = assert_error(status, body, 429, "rate_limited")
    assert "sign-ups" in error["message"] and error["retry_after_s"] > 0


async def test_a_reader_polling_every_100_ms(hub_env, ann):
    polled = await subscribe(ann, "law")
    other = await subscribe(ann, "privacy")
    url, other_url = polled["feed_urls"]["rss"], other["feed_urls"]["rss"]
    async with hub_env.session.get(hub_env.base + "/metrics") as response:
        refused_before = _metric(await response.text(),
                                 'feedmesh_feed_requests_total{status="429"}')

    statuses, retry_after, etag = [], None, None
    began = asyncio.get_running_loop().time()
    for poll in range(TIGHT.feed_burst + 5):
        headers = {"If-None-Match": etag} if etag else {}
        async with hub_env.session.get(url, headers=headers) as response:
            statuses.append(response.status)
            etag = response.headers.get("ETag", etag)
            if response.status == 429:
                retry_after = response.headers["Retry-After"]
                assert_error(429, await response.json(), 429, "rate_limited")
        if poll % 5 == 4:  # another feed, polled by its reader a few times: unaffected
            async with hub_env.session.get(other_url) as response:
                assert response.status == 200
        await asyncio.sleep(0.1)

    assert statuses[0] == 200 and set(statuses[1:TIGHT.feed_burst]) == {304}
    assert statuses[-1] == 429
    first_refusal = statuses.index(429)
    # The burst, plus what refilled at 0.2/s while polling (~2 s; longer on a loaded machine).
    elapsed = asyncio.get_running_loop().time() - began
    refilled = elapsed * TIGHT.feed_rate_per_s
    assert TIGHT.feed_burst <= first_refusal <= TIGHT.feed_burst + 1 + refilled
    assert int(retry_after) >= 1 and int(retry_after) <= 1 / TIGHT.feed_rate_per_s
    async with hub_env.session.get(hub_env.base + "/metrics") as response:
        refused = _metric(await response.text(), 'feedmesh_feed_requests_total{status="429"}')
    assert refused - refused_before == statuses.count(429)
