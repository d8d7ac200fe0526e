"""Webhooks: a subscription's new entries POSTed as signed JSON to URLs its owner set through the
API, in order, with a delivery log and a test button; the same address guard and retries as the
WebSub hub (tests/hub/web/test_websub_hub.py). The receiver is a loopback server of the test's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from feedmesh.hub.push.service import PushSettings
from feedmesh.websub.delivery import RetryPolicy
from feedmesh.websub.signature import verify
from tests.eventually import eventually
from tests.hub.web.conftest import assert_error, filled_subscription
from tests.websub.subscriber import loopback_subscriber


def _number(entry_id: str) -> int:
    """n of ``tag:feedmesh,2026:entry-<n>.<mark>``."""
    return int(entry_id.rsplit("-", 1)[1].split(".")[0])


@pytest.fixture
def hub_overrides() -> dict[str, Any]:
    return {"push": PushSettings(timeout_s=3.0, retry=RetryPolicy(
        first_delay_s=0.05, max_delay_s=0.2, max_failures=3))}


async def test_new_entries_arrive_signed_in_order_and_the_log_shows_them(hub_env, ann):
    sub = await filled_subscription(hub_env, ann)
    path = f"/api/subscriptions/{sub['id']}/webhooks"
    async with loopback_subscriber() as receiver:
        status, body = await ann.call("POST", path, {"url": receiver.callback("/hook")})
        assert status == 201, body
        hook = body["webhook"]
        assert len(hook["secret"]) >= 32
        await eventually(lambda: len(receiver.to("/hook")) >= 2, timeout=90.0)
        seen: list[int] = []
        for delivery in receiver.to("/hook"):
            assert verify(hook["secret"], delivery.body,
                          delivery.headers["X-Feedmesh-Signature"]) == "sha256"
            message = json.loads(delivery.body)
            assert message["event"] == "entries" and message["entries"]
            assert message["subscription"] == {"id": sub["id"], "name": sub["name"],
                                               "query": sub["query"]}
            seen += [_number(e["id"]) for e in message["entries"]]
            assert all(e["title"] and e["source"]["feed_url"] for e in message["entries"])
        assert seen == sorted(set(seen))  # in order, none twice
        status, body = await ann.call("GET", path)
        (listed,) = body["webhooks"]
        assert "secret" not in listed and listed["deliveries"][0]["status"] == 200
        status, log = await ann.call("GET", f"{path}/{hook['id']}/deliveries")
        assert status == 200 and all(d["ok"] and d["entries"] >= 1 for d in log["deliveries"])


async def test_the_test_button_sends_a_delivery_without_entries(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=1)
    path = f"/api/subscriptions/{sub['id']}/webhooks"
    async with loopback_subscriber() as receiver:
        status, body = await ann.call("POST", path, {"url": receiver.callback("/t")})
        hook = body["webhook"]
        status, body = await ann.call("POST", f"{path}/{hook['id']}/test")
        assert status == 202 and body["queued"] is True

        def tested() -> list:
            return [d for d in receiver.to("/t") if json.loads(d.body)["event"] == "test"]

        await eventually(tested)
        assert tested()[0].headers["X-Feedmesh-Event"] == "test"

        async def logged() -> bool:
            _, log = await ann.call("GET", f"{path}/{hook['id']}/deliveries")
            return any(d["entries"] == 0 and d["ok"] for d in log["deliveries"])

        await eventually(logged)


async def test_a_failing_webhook_shows_its_failures_and_stays(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=1)
    path = f"/api/subscriptions/{sub['id']}/webhooks"
    async with loopback_subscriber() as receiver:
        receiver.status = 503
        _, body = await ann.call("POST", path, {"url": receiver.callback("/down")})
        hook = body["webhook"]
        await ann.call("POST", f"{path}/{hook['id']}/test")

        async def failed_thrice() -> list:
            _, log = await ann.call("GET", f"{path}/{hook['id']}/deliveries")
            return [d for d in log["deliveries"] if d["status"] == 503]

        failures = await eventually(lambda: failed_thrice(), timeout=30.0)
        await eventually(lambda: len(receiver.to("/down")) >= 3)
        assert not failures[0]["ok"] and "503" in failures[0]["error"]
        _, body = await ann.call("GET", path)
        assert [h["id"] for h in body["webhooks"]] == [hook["id"]]  # still there
        attempts = {d["attempt"] for d in (await ann.call(
            "GET", f"{path}/{hook['id']}/deliveries"))[1]["deliveries"]}
        assert {1, 2}.issubset(attempts)  # retried


async def test_webhook_urls_pass_the_address_guard_and_belong_to_their_owner(hub_env, ann, bob):
    sub = await filled_subscription(hub_env, ann, entries=1)
    path = f"/api/subscriptions/{sub['id']}/webhooks"
    for url, code in (("http://10.1.2.3/hook", "callback_refused"),
                      ("http://169.254.169.254/", "callback_refused"),
                      ("ftp://example.org/", "invalid_callback"),
                      ("http://user:pw@127.0.0.2/", "invalid_callback")):
        status, body = await ann.call("POST", path, {"url": url})
        assert_error(status, body, 400, code)
    status, body = await ann.call("POST", path, {})
    assert_error(status, body, 400, "invalid_url")
    status, body = await ann.call("POST", path, {"url": "http://127.0.0.2:9/hook"})
    assert status == 201
    hook_id = body["webhook"]["id"]
    for method, suffix in (("GET", ""), ("POST", ""), ("DELETE", f"/{hook_id}"),
                           ("POST", f"/{hook_id}/test"), ("GET", f"/{hook_id}/deliveries")):
        status, body = await bob.call(method, path + suffix, {"url": "http://127.0.0.2:9/"}
                                      if method == "POST" else None)
        assert_error(status, body, 404)
    status, _ = await ann.call("DELETE", f"{path}/{hook_id}")
    assert status == 204
    assert_error(*await ann.call("DELETE", f"{path}/{hook_id}"), 404)
    assert (await ann.call("GET", path))[1] == {"webhooks": []}


async def test_the_owner_sees_the_websub_subscribers_of_a_feed(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=1)
    topic = sub["feed_urls"]["json"]
    async with loopback_subscriber() as subscriber:
        subscriber.want("subscribe", topic)
        async with hub_env.session.post(hub_env.base + "/hub", data={
                "hub.mode": "subscribe", "hub.topic": topic,
                "hub.callback": subscriber.callback(), "hub.secret": "x"}) as response:
            assert response.status == 202

        async def listed() -> list:
            _, body = await ann.call("GET", f"/api/subscriptions/{sub['id']}/websub")
            return body["subscribers"]

        (found,) = await eventually(listed)
        assert found["callback"] == subscriber.callback() and found["format"] == "json1.1"
        assert found["signed"] is True
        # A new feed URL ends the old topic's subscriptions.
        status, _ = await ann.call("PATCH", f"/api/subscriptions/{sub['id']}", {"new_url": True})
        assert status == 200
        assert await listed() == []


async def test_entries_that_waited_at_a_restart_are_delivered_after_it(tmp_path, farm_config):
    """The embedded hub stops while its webhook's receiver fails: the entries that waited are
    nowhere but in the feed. The restarted hub sends them again, from the durable mark."""
    from feedmesh.compose.embedded import running_hub
    from feedmesh.farm import FarmServer
    from feedmesh.fetch import StaticResolver
    from tests.hub.conftest import hub_settings

    settings = hub_settings(str(tmp_path), push=PushSettings(timeout_s=3.0, retry=RetryPolicy(
        first_delay_s=0.05, max_delay_s=0.2, max_failures=1000)))

    def ids(deliveries, status: int) -> set[int]:
        return {_number(e["id"]) for d in deliveries if d.status == status
                for e in json.loads(d.body)["entries"]}

    async with FarmServer(farm_config) as farm, loopback_subscriber() as receiver:
        async with running_hub(settings, "127.0.0.1", 0, resolver=StaticResolver({})) as (
                hub, _):
            account, _ = await hub.front.create_account("ann")
            sub = await hub.front.add_subscription(account.id, name="", query="government OR music "
                                             "OR water", keep=100)
            await hub.front.add_webhook(sub.id, receiver.callback("/hook"))
            receiver.status = 503
            await hub.add_feeds([farm.feed_url(i) for i in range(farm_config.feeds)])
            await eventually(lambda: len(receiver.to("/hook")) >= 3, timeout=90.0)
            await eventually(lambda: ids(receiver.to("/hook"), 503), timeout=90.0)
        waited = ids(receiver.to("/hook"), 503)
        assert waited and not ids(receiver.to("/hook"), 200)
        receiver.status = 200
        async with running_hub(settings, "127.0.0.1", 0, resolver=StaticResolver({})):
            await eventually(lambda: waited <= ids(receiver.to("/hook"), 200), timeout=90.0)
