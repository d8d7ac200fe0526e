"""The hub as a WebSub subscriber, end to end on loopback: a real feedmesh hub (every tier, its web
server with the callback route) against a publisher with its own hub written from the spec
(tests/websub/loopback_hub.py). Numbers in test names are websub.rocks' subscriber tests.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import msgspec
import pytest

from feedmesh.compose.embedded import EmbeddedHub as Hub
from feedmesh.compose.embedded import running_hub
from feedmesh.fetch import StaticResolver
from feedmesh.schedule import SchedulerSettings
from feedmesh.websub.lease import SubscriberSettings
from tests.eventually import eventually
from tests.hub.conftest import hub_settings
from tests.websub.loopback_hub import LoopbackHub, Topic

HOST = "127.0.3.2"
# The loopback hub is http://: these tests check signatures, so the secret goes to it anyway
# (by default it goes over HTTPS only: test_no_secret_is_sent_to_an_http_hub_by_default).
FAST = SubscriberSettings(lease_s=3600, verify_timeout_s=5.0, backoff_base_s=0.3,
                          backoff_max_s=2.0, min_renew_s=0.5, secret_over_http=True)


def free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@contextlib.asynccontextmanager
async def feedmesh_hub(data_dir: str, *, public: bool = True,
                       **overrides: Any) -> AsyncIterator[tuple[Hub, str]]:
    port = free_port(HOST)
    fields: dict[str, Any] = {
        "public_url": f"http://{HOST}:{port}" if public else "", "websub": FAST,
        "schedule": SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=96.0)}
    fields.update(overrides)
    async with running_hub(hub_settings(data_dir, **fields), HOST, port,
                           resolver=StaticResolver({})) as (hub, base):
        yield hub, base


def leases(hub: Hub, feed_id: int | None = None) -> list:
    return [lease for lease in hub.crawler.websub.core.leases.values()
            if feed_id is None or lease.feed_id == feed_id]


def live_in_scheduler(hub: Hub, feed_id: int) -> bool:
    scheduler = hub.crawler.scheduled.scheduler
    hints = scheduler.state.hints[scheduler.slot_of(str(feed_id))]
    return bool(hints and hints.websub_live)


def stored_ids(hub: Hub) -> set[str]:
    return {item.entry.guid for item in hub.store.recent_entries(100)}


async def subscribed(hub: Hub, pub: LoopbackHub, url: str) -> int:
    (feed_id,) = await hub.add_feeds([url])
    await eventually(lambda: pub.verified, what="a verified subscription at the hub")
    await eventually(lambda: live_in_scheduler(hub, feed_id), what="websub_live set")
    return feed_id


async def test_300_subscribes_with_secret_and_lease_and_a_push_is_stored(tmp_path):
    async with LoopbackHub() as pub, feedmesh_hub(str(tmp_path)) as (hub, base):
        url = pub.add_topic(Topic("news", entries=[("1", "old story")]))
        feed_id = await subscribed(hub, pub, url)
        (request,) = [r for r in pub.requests if r["hub.mode"] == "subscribe"]
        assert request["hub.topic"] == url and request["hub.lease_seconds"] == "3600"
        assert request["hub.callback"].startswith(f"{base}/websub/")
        assert 20 <= len(request["hub.secret"]) < 200
        (lease,) = leases(hub, feed_id)
        assert lease.state == "active" and lease.expires_at > hub.clock.now() + 3000
        scheduler = hub.crawler.scheduled.scheduler

        def polled_daily() -> bool:  # live: polled only as the daily safety net
            due = scheduler.due_at(str(feed_id))
            return due is not None and due - hub.clock.now() > 12 * 3600

        await eventually(polled_daily, what="the next poll a day away")
        gets = pub.feed_gets
        before = scheduler.status(str(feed_id)).last_fetch_at
        body = pub.document("news", [("2", "pushed story"), ("1", "old story")])
        assert await pub.publish(url, body) == [202]
        await eventually(lambda: "urn:entry:2" in stored_ids(hub), what="the pushed entry")
        assert pub.feed_gets == gets  # no fetch was needed to learn of it
        # the scheduler learned from the push as from a fetch made when it arrived (answered
        # once learned), and still polls the feed only daily
        assert scheduler.status(str(feed_id)).last_fetch_at > before
        assert polled_daily()
        # the lease is in the hub's state, and comes back after a restart
        assert [s.callback_id for s in hub.state.websub_leases()] == [lease.callback_id]


async def test_no_secret_is_sent_to_an_http_hub_by_default(tmp_path):
    """WebSub 5.1: hub.secret only over HTTPS (anyone on the path of an http:// request reads it
    and can sign forged pushes). The subscription is made without one, and its pushes are
    accepted on the callback's unguessable URL alone."""
    websub = msgspec.structs.replace(FAST, secret_over_http=False)
    async with LoopbackHub() as pub, feedmesh_hub(str(tmp_path), websub=websub) as (hub, _):
        url = pub.add_topic(Topic("news", entries=[("1", "old story")]))
        feed_id = await subscribed(hub, pub, url)
        (request,) = [r for r in pub.requests if r["hub.mode"] == "subscribe"]
        assert "hub.secret" not in request
        (lease,) = leases(hub, feed_id)
        assert lease.secret == ""
        body = pub.document("news", [("2", "unsigned push"), ("1", "old story")])
        assert await pub.publish(url, body, signature="none") == [202]
        await eventually(lambda: "urn:entry:2" in stored_ids(hub), what="the unsigned push")


async def test_301_302_unknown_methods_and_non_ascii_are_dropped_but_answered_2xx(tmp_path):
    async with LoopbackHub() as pub, feedmesh_hub(str(tmp_path)) as (hub, _base):
        url = pub.add_topic(Topic("news"))
        await subscribed(hub, pub, url)
        for n, kind in enumerate(("wrong", "none", "unknown", "non_ascii")):
            body = pub.document("news", [(f"bad{n}", f"forged {kind}")])
            assert await pub.publish(url, body, signature=kind) == [202]
        for method in ("sha1", "sha384", "sha512"):
            body = pub.document("news", [(f"ok-{method}", f"real {method}")])
            assert await pub.publish(url, body, method=method) == [202]
        await eventually(lambda: {"urn:entry:ok-sha1", "urn:entry:ok-sha384",
                                  "urn:entry:ok-sha512"} <= stored_ids(hub))
        assert not any(guid.startswith("urn:entry:bad") for guid in stored_ids(hub))
        dropped = hub.crawler.websub.deliveries.labels("bad_signature")._value.get()
        assert dropped == 4


async def test_205_verifications_not_asked_for_get_404(tmp_path):
    async with LoopbackHub() as pub, feedmesh_hub(str(tmp_path)) as (hub, base), \
            aiohttp.ClientSession() as session:
        url = pub.add_topic(Topic("news"))
        feed_id = await subscribed(hub, pub, url)
        (lease,) = leases(hub, feed_id)
        cases = [(lease.callback_id, {"hub.mode": "subscribe", "hub.topic": f"{url}/other",
                                      "hub.challenge": "x", "hub.lease_seconds": "60"}),
                 (lease.callback_id, {"hub.mode": "subscribe", "hub.topic": url,
                                      "hub.challenge": "x", "hub.lease_seconds": "60"}),
                 ("no-such-callback", {"hub.mode": "subscribe", "hub.topic": url,
                                       "hub.challenge": "x"})]
        for callback_id, params in cases:
            async with session.get(f"{base}/websub/{callback_id}", params=params) as reply:
                assert reply.status == 404
                assert "x" not in (await reply.json())["error"]["message"].split()


@pytest.mark.parametrize(("case", "path", "self_url", "topic"), [
    ("200 a different rel=self", "feeds/news", "{base}/feeds/canonical", "{base}/feeds/canonical"),
    ("201 topic 302", "moved/302/news", "", "{base}/feeds/news"),
    ("202 topic 301", "moved/301/news", "", "{base}/feeds/news"),
])
async def test_200_202_the_topic_is_self_or_where_redirects_end(tmp_path, case, path,
                                                                self_url, topic):
    async with LoopbackHub() as pub, feedmesh_hub(str(tmp_path)) as (hub, _base):
        pub.add_topic(Topic("news", self_url=self_url.format(base=pub.base), in_header=True,
                            in_document=False))
        await subscribed(hub, pub, f"{pub.base}/{path}")
        assert [r["hub.topic"] for r in pub.requests] == [topic.format(base=pub.base)], case


@pytest.mark.parametrize(("hub_path", "asked", "kept"), [
    ("/hub-307", ["/hub-307", "/hub"], "/hub-307"),  # 203: temporary: keep asking the old URL
    ("/hub-308", ["/hub-308", "/hub2"], "/hub2"),  # 204: permanent: move the subscription
])
async def test_203_204_hub_redirects_are_followed(tmp_path, hub_path, asked, kept):
    async with LoopbackHub() as pub, feedmesh_hub(str(tmp_path)) as (hub, _base):
        url = pub.add_topic(Topic("news", hub_path=hub_path))
        feed_id = await subscribed(hub, pub, url)
        assert [r["path"] for r in pub.requests] == asked
        (lease,) = leases(hub, feed_id)
        assert lease.hub == pub.base + kept


async def test_denial_stops_push_and_resubscribes_after_a_backoff(tmp_path):
    async with LoopbackHub() as pub, feedmesh_hub(str(tmp_path)) as (hub, _base):
        url = pub.add_topic(Topic("news"))
        feed_id = await subscribed(hub, pub, url)
        assert await pub.deny(url, "quota exceeded") == [200]
        (lease,) = leases(hub, feed_id)
        assert lease.state in ("denied", "subscribing") and "quota exceeded" in lease.last_error
        await eventually(lambda: len([r for r in pub.requests
                                      if r["hub.mode"] == "subscribe"]) == 2)
        await eventually(lambda: pub.verified and live_in_scheduler(hub, feed_id))


async def test_renewal_before_the_lease_ends_keeps_the_feed_live(tmp_path):
    async with LoopbackHub(grant_lease_s=2) as pub, feedmesh_hub(str(tmp_path)) as (hub, _base):
        url = pub.add_topic(Topic("news"))
        feed_id = await subscribed(hub, pub, url)
        first = leases(hub, feed_id)[0].expires_at
        await eventually(lambda: len(pub.verifications) >= 3, timeout=20.0,
                         what="two renewals verified")
        assert all(status == 200 for _, status, _ in pub.verifications)
        assert leases(hub, feed_id)[0].expires_at > first
        # the lease is stored before the scheduler hears of it
        await eventually(lambda: live_in_scheduler(hub, feed_id),
                         what="websub_live in the scheduler")


async def test_a_lease_that_lapses_puts_the_feed_back_on_the_poll_schedule(tmp_path):
    """Issue 33, item 1: the publisher's hub stops answering, renewals fail, the lease ends;
    the feed is polled again at once (before: not for a day, its next poll at the safety net)."""
    # a budget of a fetch a second (the test's seconds stand for the hours a real lapse takes
    # to earn the feed its next fetch)
    budget = SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=86400.0)
    async with LoopbackHub(grant_lease_s=4) as pub, \
            feedmesh_hub(str(tmp_path), schedule=budget) as (hub, _):
        url = pub.add_topic(Topic("news", entries=[("1", "old story")]))
        feed_id = await subscribed(hub, pub, url)
        scheduler = hub.crawler.scheduled.scheduler
        await eventually(lambda: scheduler.due_at(str(feed_id)) - hub.clock.now() > 12 * 3600,
                         what="the next poll a day away (live)")
        # a hub started empty has a budget of zero until its scheduler refits (at most once a
        # minute): refit now rather than wait for it
        scheduler.refit(hub.clock.now())
        pub.unavailable = True
        gets = pub.feed_gets
        (lease,) = leases(hub, feed_id)
        await eventually(lambda: not live_in_scheduler(hub, feed_id), timeout=20.0,
                         what="the lapsed lease leaves the scheduler")
        assert hub.clock.now() >= lease.expires_at - 0.5
        # (that its next_fetch_at is the lapse itself: test_scheduler.py; here it may already
        # have been fetched again)
        await eventually(lambda: pub.feed_gets > gets, timeout=20.0,
                         what="the feed polled again after the lapse")
        await eventually(lambda: scheduler.due_at(str(feed_id)) is not None)
        assert scheduler.due_at(str(feed_id)) - hub.clock.now() < 12 * 3600


async def test_removing_a_feed_unsubscribes_from_its_hub(tmp_path):
    async with LoopbackHub() as pub, feedmesh_hub(str(tmp_path)) as (hub, _base):
        url = pub.add_topic(Topic("news"))
        feed_id = await subscribed(hub, pub, url)
        callback = pub.requests[0]["hub.callback"]
        assert await hub.desk.remove_feeds([feed_id]) == 1
        await eventually(lambda: not pub.verified, what="the hub dropped the subscription")
        assert pub.requests[-1]["hub.mode"] == "unsubscribe"
        assert pub.requests[-1]["hub.callback"] == callback
        await eventually(lambda: hub.state.websub_leases() == [])
        # the hub's late deliveries are told the subscription is gone
        async with aiohttp.ClientSession() as session, session.post(
                callback, data=b"<feed/>") as reply:
            assert reply.status == 410


async def test_leases_survive_a_restart(tmp_path):
    async with LoopbackHub() as pub:
        url = pub.add_topic(Topic("news"))
        async with feedmesh_hub(str(tmp_path)) as (hub, _base):
            feed_id = await subscribed(hub, pub, url)
            (before,) = leases(hub, feed_id)
        async with feedmesh_hub(str(tmp_path)) as (hub, _base):
            assert leases(hub, feed_id) == [before]
            # the lease is stored before the scheduler hears of it
            await eventually(lambda: live_in_scheduler(hub, feed_id),
                             what="websub_live in the scheduler")


async def test_without_a_public_url_nothing_is_subscribed_and_the_log_says_so(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="feedmesh.hub.websub")
    async with LoopbackHub("127.0.3.1") as one, LoopbackHub("127.0.3.3") as two, \
            feedmesh_hub(str(tmp_path), public=False, schedule=None) as (hub, _base):
        ids = await hub.add_feeds([one.add_topic(Topic("a")), two.add_topic(Topic("b"))])
        await eventually(lambda: all(hub.crawler.fetch_state(i).last_fetched_at for i in ids),
                         what="both feeds fetched")
        assert one.feed_gets and two.feed_gets
        assert one.requests == two.requests == [] and leases(hub) == []
        warnings = [r for r in caplog.records if "websub_disabled" in r.getMessage()]
        assert len(warnings) == 1 and "--public-url" in warnings[0].getMessage()


async def test_a_hub_behind_the_address_guard_is_never_contacted(tmp_path):
    async with LoopbackHub() as pub, feedmesh_hub(str(tmp_path)) as (hub, _base):
        # the publisher claims its hub is the cloud metadata service, then a private address
        url = pub.add_topic(Topic("news", in_document=False,
                                  header_hub="http://169.254.169.254/hub"))
        (feed_id,) = await hub.add_feeds([url])
        await eventually(lambda: leases(hub, feed_id) and "refused" in leases(
            hub, feed_id)[0].last_error, what="the guard's refusal")
        assert pub.requests == []
        assert hub.crawler.websub.requests.labels("subscribe", "failed")._value.get() >= 1


async def test_callbacks_cap_the_body_and_the_hub_rate(tmp_path):
    settings = SubscriberSettings(lease_s=3600, hub_burst=3, hub_rate_per_s=0.01)
    async with LoopbackHub() as pub, feedmesh_hub(str(tmp_path), websub=settings) as (hub, base), \
            aiohttp.ClientSession() as session:
        from feedmesh.hub.web import WebLimits
        url = pub.add_topic(Topic("news"))
        feed_id = await subscribed(hub, pub, url)  # the verification took one token
        callback = f"{base}/websub/{leases(hub, feed_id)[0].callback_id}"
        huge = b"x" * (WebLimits().max_push_bytes + 1)
        async with session.post(callback, data=huge) as reply:
            assert reply.status == 413
            assert "at most" in (await reply.json())["error"]["message"]
        statuses = [await pub.publish(url, pub.document("news", [(str(i), f"t{i}")]))
                    for i in range(3)]
        assert statuses == [[202], [202], [429]]


async def test_the_last_account_to_unfollow_a_feed_takes_it_out_of_the_crawl(tmp_path):
    """``DELETE /api/sources/{id}`` through the web server: while another account follows the
    feed it stays; when the last one leaves, the feed leaves the crawl and the publisher's hub
    sees the unsubscription. A feed the operator listed stays whoever unfollows it."""
    async with LoopbackHub() as pub, feedmesh_hub(str(tmp_path)) as (hub, base), \
            aiohttp.ClientSession() as session:
        async def call(method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
            async with session.request(method, base + path, json=body, headers={
                    "Authorization": f"Bearer {token}"}) as reply:
                return reply.status, (await reply.json() if reply.status != 204 else None)

        tokens = []
        for name in ("ann", "bob"):
            async with session.post(base + "/api/accounts", json={"name": name}) as reply:
                tokens.append((await reply.json())["token"])
        url = pub.add_topic(Topic("news"))
        for token in tokens:
            status, body = await call("POST", "/api/sources", token, {"url": url})
            assert status in (200, 201), body
        feed_id = body["source"]["id"]
        await eventually(lambda: pub.verified, what="a verified subscription at the hub")

        assert await call("DELETE", f"/api/sources/{feed_id}", tokens[0]) == (204, None)
        assert feed_id in hub.crawler.crawler.states  # bob still follows it
        assert pub.verified and pub.requests[-1]["hub.mode"] == "subscribe"

        assert await call("DELETE", f"/api/sources/{feed_id}", tokens[1]) == (204, None)
        await eventually(lambda: not pub.verified, what="the hub dropped the subscription")
        assert pub.requests[-1]["hub.mode"] == "unsubscribe"
        assert feed_id not in hub.crawler.crawler.states
        await eventually(lambda: hub.state.websub_leases() == [])

        listed = pub.add_topic(Topic("listed"))
        (operators,) = await hub.add_feeds([listed])
        status, body = await call("POST", "/api/sources", tokens[0], {"url": listed})
        assert status == 201 and body["source"]["id"] == operators
        assert await call("DELETE", f"/api/sources/{operators}", tokens[0]) == (204, None)
        assert operators in hub.crawler.crawler.states
