"""The WebSub hub of the private feeds, through websub.rocks' hub test plan (tests 100-106,
https://websub.rocks/hub), reproduced on loopback: a subscriber of our own on 127.0.0.2 subscribes
to a personalized feed over ``POST /hub`` and receives the feed when the farm posts a matching
entry. Plus what the issue adds: private topics only, the address guard on callbacks, leases,
retries and the drop after repeated failures."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from typing import Any

import pytest

from feedmesh import cli
from feedmesh.feeds.parser import parse_feed
from feedmesh.hub.entry_ids import entry_id_in
from feedmesh.hub.push.service import PushSettings
from feedmesh.websub.delivery import RetryPolicy
from feedmesh.websub.hub_requests import LeaseBounds
from feedmesh.websub.signature import verify
from tests.eventually import eventually
from tests.hub.web.conftest import assert_error, filled_subscription
from tests.websub.subscriber import loopback_subscriber

LEASE = LeaseBounds(default_s=600, min_s=2, max_s=3600)


@pytest.fixture
def hub_overrides() -> dict[str, Any]:
    return {"push": PushSettings(lease=LEASE, timeout_s=3.0,
                                 retry=RetryPolicy(first_delay_s=0.05, max_delay_s=0.2,
                                                   max_failures=3))}


async def hub_request(env, **fields: str) -> tuple[int, Any]:
    form = {k.replace("_", ".", 1): v for k, v in fields.items()}
    async with env.session.post(env.base + "/hub", data=form) as response:
        text = await response.text()
        return response.status, (await response.json() if "json" in response.content_type
                                 else text)


async def subscribed(env, subscriber, topic: str, path: str = "/cb", **extra: str) -> None:
    """Subscribe ``path`` of ``subscriber`` to ``topic`` and wait until the hub holds it."""
    subscriber.want("subscribe", topic, path)
    status, body = await hub_request(env, hub_mode="subscribe", hub_topic=topic,
                                     hub_callback=subscriber.callback(path), **extra)
    assert status == 202, body
    await eventually(lambda: any(t.topic == topic and t.url == subscriber.callback(path)
                                 for t in env.hub.push.targets.values()))


async def test_100_typical_subscriber_request_then_the_updated_feed_is_pushed(hub_env, ann):
    sub = await filled_subscription(hub_env, ann)
    topic = sub["feed_urls"]["atom"]
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, topic)
        (verification,) = subscriber.verifications
        assert verification.params["hub.mode"] == "subscribe"
        assert verification.params["hub.topic"] == topic
        assert verification.params["hub.lease_seconds"] == "600"
        await eventually(lambda: subscriber.to("/cb"), timeout=60.0)
        delivery = subscriber.to("/cb")[0]
        assert delivery.headers["Content-Type"].startswith("application/atom+xml")
        assert "X-Hub-Signature" not in delivery.headers
        assert f'<{topic}>; rel="self"' in delivery.headers["Link"]
        parsed = parse_feed(delivery.body, url=topic)
        assert parsed.feed.self_link == topic
        assert parsed.feed.hub_links == (f"{hub_env.base}/hub",)
        pushed = {e.guid for e in parsed.entries}
        held = {entry_id_in(await hub_env.hub.front.subscription(sub["id"]), i.entry_id)
                for i in await hub_env.hub.front.feed_items(sub["id"])}
        assert pushed & held  # the feed as it is now, newest entries included


async def test_101_a_subscriber_with_a_secret_gets_signed_deliveries(hub_env, ann):
    sub = await filled_subscription(hub_env, ann)
    topic = sub["feed_urls"]["rss"]
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, topic, hub_secret="a secret of mine")
        await eventually(lambda: subscriber.to("/cb"), timeout=60.0)
        delivery = subscriber.to("/cb")[0]
        assert verify("a secret of mine", delivery.body,
                      delivery.headers["X-Hub-Signature"]) == "sha256"
        assert delivery.headers["Content-Type"].startswith("application/rss+xml")


async def test_102_unknown_parameters_are_ignored(hub_env, ann):
    sub = await filled_subscription(hub_env, ann)
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, sub["feed_urls"]["rss"], foo="bar",
                         hub_extension="1")
        assert "foo" not in subscriber.verifications[0].params


async def test_103_subscribing_again_updates_the_same_subscription(hub_env, ann):
    sub = await filled_subscription(hub_env, ann)
    topic = sub["feed_urls"]["atom"]
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, topic, hub_lease_seconds="100")
        (first,) = hub_env.hub.front.push_targets(sub["id"])
        await subscribed(hub_env, subscriber, topic, hub_lease_seconds="999999",
                         hub_secret="now signed")
        await eventually(
            lambda: hub_env.hub.front.push_targets(sub["id"])[0].secret == "now signed")
        (again,) = hub_env.hub.front.push_targets(sub["id"])
        assert again.id == first.id and again.lease_seconds == LEASE.max_s
        assert subscriber.verifications[-1].params["hub.lease_seconds"] == str(LEASE.max_s)
        saved = await hub_env.hub.io.call(hub_env.hub.state.push_targets, sub["id"])
        assert saved == [again]


async def test_104_unsubscribe_stops_deliveries(hub_env, ann):
    sub = await filled_subscription(hub_env, ann)
    topic = sub["feed_urls"]["rss"]
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, topic)
        await eventually(lambda: subscriber.to("/cb"), timeout=60.0)
        # An unsubscription the subscriber did not ask for is not acted on.
        status, _ = await hub_request(hub_env, hub_mode="unsubscribe", hub_topic=topic,
                                      hub_callback=subscriber.callback())
        assert status == 202
        await eventually(lambda: subscriber.verifications[-1].params["hub.mode"] ==
                         "unsubscribe")
        assert hub_env.hub.front.push_targets(sub["id"])
        subscriber.want("unsubscribe", topic)
        status, _ = await hub_request(hub_env, hub_mode="unsubscribe", hub_topic=topic,
                                      hub_callback=subscriber.callback())
        assert status == 202
        await eventually(lambda: not hub_env.hub.front.push_targets(sub["id"]))
        await eventually(lambda: _saved_targets_gone(hub_env, sub["id"]))


@pytest.mark.parametrize(("case", "ext", "media"), [
    ("105 a document that is not JSON, delivered verbatim", "rss", "application/rss+xml"),
    ("106 a JSON topic", "json", "application/feed+json"),
])
async def test_105_106_the_delivery_is_what_the_topic_serves(hub_env, ann, case, ext, media):
    sub = await filled_subscription(hub_env, ann)
    topic = sub["feed_urls"][ext]
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, topic)
        await eventually(lambda: subscriber.to("/cb"), timeout=60.0)
        delivery = subscriber.to("/cb")[-1]
        assert delivery.headers["Content-Type"].startswith(media), case
        # The body is the topic's document: fetch the topic until it shows the same version.
        async def served() -> bool:
            async with hub_env.session.get(topic) as response:
                assert response.headers["Content-Type"].startswith(media)
                body = await response.read()
            return body == subscriber.to("/cb")[-1].body
        await eventually(served, timeout=30.0)


async def test_private_feeds_advertise_the_hub_in_the_document_and_the_link_header(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=1)
    for ext, url in sub["feed_urls"].items():
        async with hub_env.session.get(url) as response:
            body = await response.read()
            link = response.headers["Link"]
        assert f'<{hub_env.base}/hub>; rel="hub"' in link and f'<{url}>; rel="self"' in link
        parsed = parse_feed(body, url=url)
        assert parsed.feed.hub_links == (f"{hub_env.base}/hub",), ext
        assert parsed.feed.self_link == url, ext


async def test_only_a_holder_of_the_feed_url_can_subscribe(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=1)
    real = sub["feed_urls"]["atom"]
    token = real.rsplit("/", 1)[1].split(".")[0]
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    async with loopback_subscriber() as subscriber:
        for topic in (f"{hub_env.base}/f/{forged}.atom", f"{hub_env.base}/f/{token}.xml",
                      "http://elsewhere.test/feed", f"{hub_env.base}/f/"):
            status, body = await hub_request(hub_env, hub_mode="subscribe", hub_topic=topic,
                                             hub_callback=subscriber.callback())
            assert_error(status, body, 404, "unknown_topic")
        assert subscriber.verifications == []  # nothing was sent anywhere


async def test_bad_requests_get_clear_errors(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=1)
    topic = sub["feed_urls"]["rss"]
    status, body = await hub_request(hub_env, hub_mode="subscribe", hub_topic=topic)
    assert "hub.callback" in assert_error(status, body, 400, "invalid_hub_request")["message"]
    status, body = await hub_request(hub_env, hub_mode="publish", hub_topic=topic,
                                     hub_callback="http://127.0.0.2:9/cb")
    assert assert_error(status, body, 400, "invalid_hub_request")["field"] == "hub.mode"
    async with hub_env.session.post(hub_env.base + "/hub", json={"hub.mode": "subscribe"}) as r:
        assert_error(r.status, await r.json(), 415)
    async with hub_env.session.post(hub_env.base + "/hub", data={"x": "y" * 20_000}) as r:
        assert_error(r.status, await r.json(), 413)


async def test_callbacks_pass_the_address_guard(hub_env, ann):
    """Loopback is allowed in these tests (as for the farm); private, link-local and metadata
    addresses are refused before anything is sent."""
    sub = await filled_subscription(hub_env, ann, entries=1)
    for callback in ("http://10.0.0.1/cb", "http://169.254.169.254/latest/meta-data",
                     "http://[::ffff:192.168.1.1]/cb", "http://0.0.0.0/cb"):
        status, body = await hub_request(hub_env, hub_mode="subscribe",
                                         hub_topic=sub["feed_urls"]["rss"],
                                         hub_callback=callback)
        error = assert_error(status, body, 400, "callback_refused")
        assert "address" in error["message"]
    assert not hub_env.hub.front.push_targets(sub["id"])


async def test_a_callback_that_keeps_failing_is_retried_then_dropped(hub_env, ann):
    sub = await filled_subscription(hub_env, ann)
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, sub["feed_urls"]["rss"])
        subscriber.status = 500
        await eventually(lambda: not hub_env.hub.front.push_targets(sub["id"]), timeout=60.0)
        assert len(subscriber.to("/cb")) >= 3  # the first try and its retries
        await eventually(lambda: _saved_targets_gone(hub_env, sub["id"]))
        # The hub cancelled a subscription it had granted: it says so (WebSub 5.2).
        denial = await eventually(lambda: _denial(subscriber), timeout=10.0)
        assert denial.params["hub.topic"] == sub["feed_urls"]["rss"]
        assert "failed deliveries in a row" in denial.params["hub.reason"]
        assert "HTTP 500" in denial.params["hub.reason"]


async def _saved_targets_gone(hub_env, sub_id: int) -> bool:
    """The store no longer holds the subscription's targets. A dropped target leaves memory
    first (so no second failure drops it twice) and the store a moment later: a test that
    saw it leave memory waits for the store too."""
    return await hub_env.hub.io.call(hub_env.hub.state.push_targets, sub_id) == []


def _denial(subscriber):
    return next((v for v in subscriber.verifications if v.params.get("hub.mode") == "denied"),
                None)


async def test_deleting_the_feed_or_replacing_its_url_denies_its_subscribers(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=1)
    async with loopback_subscriber() as subscriber, loopback_subscriber("127.0.0.3") as other:
        await subscribed(hub_env, subscriber, sub["feed_urls"]["atom"])
        await subscribed(hub_env, other, sub["feed_urls"]["rss"])
        assert _denial(subscriber) is None and _denial(other) is None
        status, body = await ann.call("PATCH", f"/api/subscriptions/{sub['id']}",
                                      {"new_url": True})
        assert status == 200, body
        denial = await eventually(lambda: _denial(subscriber), timeout=10.0)
        assert denial.params["hub.topic"] == sub["feed_urls"]["atom"]
        assert "URL was replaced" in denial.params["hub.reason"]
        await eventually(lambda: _denial(other), timeout=10.0)
        assert not hub_env.hub.front.push_targets(sub["id"])

    fresh = await filled_subscription(hub_env, ann, entries=1)
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, fresh["feed_urls"]["json"])
        status, _ = await ann.call("DELETE", f"/api/subscriptions/{fresh['id']}")
        assert status == 204
        denial = await eventually(lambda: _denial(subscriber), timeout=10.0)
        assert denial.params["hub.topic"] == fresh["feed_urls"]["json"]
        assert "deleted" in denial.params["hub.reason"]


async def test_a_lease_runs_out(hub_env, ann):
    sub = await filled_subscription(hub_env, ann, entries=1)
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, sub["feed_urls"]["rss"], hub_lease_seconds="2")
        (target,) = hub_env.hub.front.push_targets(sub["id"])
        assert target.lease_seconds == 2
        await eventually(lambda: hub_env.hub.clock.now() > target.expires_at, timeout=10.0)
        # The next delivery finds it expired and drops it instead of sending.
        await eventually(lambda: not hub_env.hub.front.push_targets(sub["id"]), timeout=60.0)
        assert all(d.at <= target.expires_at + 0.5 for d in subscriber.to("/cb"))


async def test_each_subscription_has_a_delivery_log_for_its_topic_holder_and_owner(
        hub_env, ann, tmp_path, capsys):
    sub = await filled_subscription(hub_env, ann)
    topic = sub["feed_urls"]["atom"]
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, topic)
        callback = subscriber.callback()

        async def log() -> list[dict]:
            async with hub_env.session.get(hub_env.base + "/hub/deliveries", params={
                    "hub.topic": topic, "hub.callback": callback}) as response:
                assert response.status == 200, await response.text()
                body = await response.json()
            assert body["topic"] == topic and body["subscriber"]["callback"] == callback
            return body["subscriber"]["deliveries"]

        # A failing delivery, then (after a retry) a good one: both in the log, newest first.
        subscriber.status = 503
        failed = await eventually(lambda: _with_status(log, 503), timeout=60.0)
        assert failed["ok"] is False and "HTTP 503" in failed["error"]
        subscriber.status = 200
        good = await eventually(lambda: _with_status(log, 200), timeout=60.0)
        assert good["ok"] is True and good["entries"] >= 1 and good["error"] == ""
        entries = await log()
        assert [e["at"] for e in entries] == sorted((e["at"] for e in entries), reverse=True)
        assert len(entries) <= len(subscriber.to("/cb"))  # one row per attempt made

        # The feed's owner sees the same log through the API.
        status, body = await ann.call("GET", f"/api/subscriptions/{sub['id']}/websub")
        assert status == 200
        (listed,) = body["subscribers"]
        assert listed["deliveries"] and listed["callback"] == callback
        status, body = await ann.call(
            "GET", f"/api/subscriptions/{sub['id']}/websub/{listed['id']}/deliveries")
        assert status == 200 and any(d["status"] == 503 for d in body["deliveries"])
        status, body = await ann.call(
            "GET", f"/api/subscriptions/{sub['id']}/websub/{listed['id'] + 999}/deliveries")
        assert_error(status, body, 404, "not_found")

        # The operator reads every log from the state store, the hub running or not.
        await hub_env.hub.push.flush_log()
        capsys.readouterr()
        assert cli.main(["deliveries", "--state", str(tmp_path / "hub.db"), "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)["targets"]
        assert (row["kind"], row["url"], row["subscription"]) == ("websub", callback, sub["id"])
        assert {d["status"] for d in row["deliveries"]} >= {503, 200}
        assert cli.main(["deliveries", "--state", str(tmp_path / "hub.db"), "--failing",
                         "--json"]) == 0
        failing = json.loads(capsys.readouterr().out)["targets"]
        assert failing == ([row] if row["deliveries"][0]["status"] != 200 else [])
        assert cli.main(["deliveries", "--state", str(tmp_path / "nothing.db")]) == 2
        assert "no hub database" in capsys.readouterr().err

        # Without the callback, or with a topic not of this hub, nothing is shown.
        for params, code in (({"hub.topic": topic, "hub.callback": callback + "x"},
                              "not_subscribed"),
                             ({"hub.topic": topic + "x", "hub.callback": callback},
                              "unknown_topic")):
            async with hub_env.session.get(hub_env.base + "/hub/deliveries",
                                           params=params) as response:
                assert_error(response.status, await response.json(), 404, code)
        async with hub_env.session.get(hub_env.base + "/hub/deliveries",
                                       params={"hub.topic": topic}) as response:
            error = assert_error(response.status, await response.json(), 400)
            assert error["field"] == "hub.callback"


async def _with_status(log, status: int) -> dict | None:
    return next((e for e in await log() if e["status"] == status), None)


@pytest.mark.parametrize("hub_overrides", [{"push": PushSettings(
    lease=LEASE, timeout_s=3.0, max_subscribers_per_feed=3)}])
async def test_the_subscriber_limit_counts_verifications_in_flight(hub_env, ann):
    """Twenty requests at once for a feed that may have three subscribers: three pass (before,
    every one passed the check before the first was verified, and twenty were held)."""
    sub = await filled_subscription(hub_env, ann, entries=1)
    topic = sub["feed_urls"]["atom"]
    async with loopback_subscriber() as subscriber:
        paths = [f"/cb{n}" for n in range(20)]
        for path in paths:
            subscriber.want("subscribe", topic, path)
        answers = await asyncio.gather(*(
            hub_request(hub_env, hub_mode="subscribe", hub_topic=topic,
                        hub_callback=subscriber.callback(path)) for path in paths))
        statuses = sorted(status for status, _ in answers)
        assert statuses == [202] * 3 + [403] * 17, statuses
        await eventually(lambda: len([t for t in hub_env.hub.push.targets.values()
                                      if t.topic == topic]) == 3)
        assert len(subscriber.verifications) == 3


async def test_a_failed_verification_logs_no_private_feed_url(hub_env, ann, caplog):
    """The verification's query holds ``hub.topic``, the private feed's URL with its token: a
    callback that cannot be reached is logged by its origin and path only."""
    sub = await filled_subscription(hub_env, ann, entries=1)
    topic = sub["feed_urls"]["atom"]
    token = topic.rsplit("/", 1)[1].split(".")[0]
    with caplog.at_level(logging.DEBUG):
        status, _ = await hub_request(hub_env, hub_mode="subscribe", hub_topic=topic,
                                      hub_callback="http://127.0.0.2:9/cb?mine=1")
        assert status == 202
        await eventually(lambda: "websub_not_verified" in caplog.text)
    assert "127.0.0.2:9/cb" in caplog.text
    assert token not in caplog.text and "hub.topic" not in caplog.text


def sha1_only_accepts(secret: str, delivery) -> bool:
    """What an older PubSubHubbub 0.4 subscriber checks: ``sha1=`` and nothing else (any other
    method, or none, it answers 200 and drops the body)."""
    method, _, digest = delivery.headers.get("X-Hub-Signature", "").partition("=")
    return method == "sha1" and hmac.compare_digest(
        digest, hmac.new(secret.encode(), delivery.body, hashlib.sha1).hexdigest())


async def test_a_sha1_only_subscriber_gets_verifiable_pushes_once_its_owner_chooses_sha1(
        hub_env, ann):
    sub = await filled_subscription(hub_env, ann)
    topic, secret = sub["feed_urls"]["atom"], "a pubsubhubbub 0.4 secret"
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, topic, hub_secret=secret)
        await eventually(lambda: subscriber.to("/cb"), timeout=60.0)
        # Signed sha256 by default: such a subscriber drops every push (the issue).
        first = subscriber.to("/cb")[0]
        assert first.headers["X-Hub-Signature"].startswith("sha256=")
        assert not sha1_only_accepts(secret, first)
        status, body = await ann.call("GET", f"/api/subscriptions/{sub['id']}/websub")
        (listed,) = body["subscribers"]
        assert (listed["signed"], listed["signature"]) == (True, "sha256")

        status, body = await ann.call(
            "PATCH", f"/api/subscriptions/{sub['id']}/websub/{listed['id']}",
            {"signature": "sha1"})
        assert status == 200, body
        assert (body["subscriber"]["id"], body["subscriber"]["signature"]) == (listed["id"],
                                                                              "sha1")
        status, body = await ann.call("GET", f"/api/subscriptions/{sub['id']}/websub")
        assert body["subscribers"][0]["signature"] == "sha1"
        saved = await hub_env.hub.io.call(hub_env.hub.state.push_targets, sub["id"])
        assert [t.signature for t in saved] == ["sha1"]

        # The farm keeps posting: the next pushes pass the sha1-only check.
        seen = len(subscriber.to("/cb"))
        await eventually(lambda: any(sha1_only_accepts(secret, d)
                                     for d in subscriber.to("/cb")[seen:]), timeout=60.0)
        accepted = next(n for n, d in enumerate(subscriber.to("/cb")) if n >= seen
                        and sha1_only_accepts(secret, d))

        # Subscribing again (as leases are renewed) keeps the owner's choice.
        await subscribed(hub_env, subscriber, topic, hub_secret=secret, hub_lease_seconds="100")
        await eventually(lambda: hub_env.hub.front.push_targets(sub["id"])[0].lease_seconds
                         == 100)
        (again,) = hub_env.hub.front.push_targets(sub["id"])
        assert (again.id, again.signature) == (listed["id"], "sha1")
        saved = await hub_env.hub.io.call(hub_env.hub.state.push_targets, sub["id"])
        assert [(t.lease_seconds, t.signature) for t in saved] == [(100, "sha1")]
        await eventually(lambda: len(subscriber.to("/cb")) > accepted + 1, timeout=60.0)
        later = subscriber.to("/cb")[accepted:]
        assert all(sha1_only_accepts(secret, d) for d in later), [
            d.headers.get("X-Hub-Signature", "")[:8] for d in later]


async def test_choosing_a_signature_method_is_checked_and_only_for_the_owner(hub_env, ann, bob):
    sub = await filled_subscription(hub_env, ann, entries=1)
    topic = sub["feed_urls"]["rss"]
    async with loopback_subscriber() as subscriber:
        await subscribed(hub_env, subscriber, topic, hub_secret="s")
        (target,) = hub_env.hub.front.push_targets(sub["id"])
        path = f"/api/subscriptions/{sub['id']}/websub/{target.id}"
        for body, says in (({"signature": "md5"}, '"md5" is not an X-Hub-Signature method'),
                           ({"signature": 1}, "1 is not an X-Hub-Signature method"),
                           ({}, "signature is required")):
            status, answer = await ann.call("PATCH", path, body)
            error = assert_error(status, answer, 400, "invalid_signature")
            assert says in error["message"] and "sha1, sha256, sha384, sha512" in error["message"]
            assert error["field"] == "signature"
        # Another account's subscriber, or one that is not there, is not found (and unchanged).
        status, answer = await bob.call("PATCH", path, {"signature": "sha1"})
        assert_error(status, answer, 404, "not_found")
        status, answer = await ann.call(
            "PATCH", f"/api/subscriptions/{sub['id']}/websub/{target.id + 999}",
            {"signature": "sha1"})
        assert_error(status, answer, 404, "not_found")
        # A webhook is not a WebSub subscriber: its X-Feedmesh-Signature stays sha256.
        status, made = await ann.call("POST", f"/api/subscriptions/{sub['id']}/webhooks",
                                      {"url": subscriber.callback("/hook")})
        assert status == 201, made
        status, answer = await ann.call(
            "PATCH", f"/api/subscriptions/{sub['id']}/websub/{made['webhook']['id']}",
            {"signature": "sha1"})
        assert_error(status, answer, 404, "not_found")
        assert {t.signature for t in hub_env.hub.front.push_targets(sub["id"])} == {"sha256"}
        # Case and spaces are forgiven; the method is stored as WebSub names it.
        status, answer = await ann.call("PATCH", path, {"signature": " SHA512 "})
        assert status == 200 and answer["subscriber"]["signature"] == "sha512"
