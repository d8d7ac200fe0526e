"""A retired feed-URL key ends the WebSub subscriptions whose topic it signed (a leaked URL's
subscriber must not go on getting the feed pushed), telling their callbacks; a rotation alone
ends none."""

from __future__ import annotations

from typing import Any

import pytest

from feedmesh import cli
from feedmesh.hub.push.service import PushSettings
from feedmesh.websub.delivery import RetryPolicy
from feedmesh.websub.hub_requests import LeaseBounds
from tests.eventually import eventually
from tests.hub.web.conftest import filled_subscription
from tests.hub.web.test_websub_hub import _denial, subscribed
from tests.websub.subscriber import loopback_subscriber


@pytest.fixture
def hub_overrides() -> dict[str, Any]:
    return {"push": PushSettings(lease=LeaseBounds(default_s=600, min_s=2, max_s=3600),
                                 timeout_s=3.0, sweep_interval_s=0.1,
                                 retry=RetryPolicy(first_delay_s=0.05, max_delay_s=0.2,
                                                   max_failures=3))}


async def test_retiring_the_key_ends_the_websub_subscriptions_it_signed(hub_env, ann, capsys):
    hub = hub_env.hub
    hub.tokens.refresh_s = 0.0  # read the keys at every look (60 s in production)
    sub = await filled_subscription(hub_env, ann, entries=1)
    old_topic = sub["feed_urls"]["rss"]
    data = str(hub.settings.data_dir)
    async with loopback_subscriber() as subscriber, loopback_subscriber("127.0.0.3") as later:
        await subscribed(hub_env, subscriber, old_topic)
        assert cli.main(["url-key", "rotate", "--data", data]) == 0
        await eventually(lambda: hub.tokens.changes >= 1)
        status, body = await ann.call("GET", f"/api/subscriptions/{sub['id']}")
        fresh = body["subscription"]
        assert status == 200 and fresh["feed_urls"]["rss"] != old_topic
        # A reader of the old URL still gets the feed, and is pointed to the new URL.
        before = await hub_env.session.get(old_topic)
        body = await before.text()
        assert before.status == 200
        assert fresh["feed_urls"]["rss"] in before.headers["Link"]
        assert fresh["feed_urls"]["rss"] in body and old_topic not in body
        await subscribed(hub_env, later, fresh["feed_urls"]["rss"])
        # a sweep looked at the targets with the rotated keys
        await eventually(lambda: hub.push._topics_checked == hub.tokens.changes >= 1)
        assert _denial(subscriber) is None  # the old URL still works: nothing ends

        assert cli.main(["url-key", "retire", "--data", data]) == 0
        denial = await eventually(lambda: _denial(subscriber), timeout=10.0)
        assert denial.params["hub.topic"] == old_topic
        assert "key that signed the topic URL was retired" in denial.params["hub.reason"]
        assert [t.topic for t in hub.front.push_targets(sub["id"])] == [fresh["feed_urls"]["rss"]]
        assert _denial(later) is None
        gone = await hub_env.session.get(old_topic)
        assert gone.status == 404  # the old URL ended with its key
        assert (await hub_env.session.get(fresh["feed_urls"]["rss"])).status == 200
    assert "rotated" in capsys.readouterr().out
