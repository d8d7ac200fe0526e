"""Interop with software no one here wrote: Flask-WebSub's *subscriber* (PyPI ``Flask-WebSub``,
pinned in the ``test`` extra), served by werkzeug on its own loopback address, subscribes to a
feedmesh personalized feed through ``POST /hub``, confirms our verification of intent on its own
callback, and receives the feed (a fat ping) when the farm posts an entry the subscription
matches. Its hub and the other direction are in tests/websub/test_flask_websub.py.

Flask-WebSub refuses to send a secret to a hub over plain http (it would travel in clear), so
this subscription has none: the signed path is covered by websub.rocks test 101."""

from __future__ import annotations

import asyncio
import threading

import flask
from flask_websub.subscriber import (
    SQLite3SubscriberStorage,
    SQLite3TempSubscriberStorage,
    Subscriber,
)
from werkzeug.serving import make_server

from feedmesh.feeds.parser import parse_feed
from feedmesh.hub.entry_ids import entry_id_in
from tests.eventually import eventually
from tests.hub.web.conftest import filled_subscription

HOST = "127.0.0.4"


async def test_flask_websubs_subscriber_receives_a_matching_entry(hub_env, ann, tmp_path):
    sub = await filled_subscription(hub_env, ann)
    topic = sub["feed_urls"]["atom"]
    app = flask.Flask("feedmesh-interop-reader")
    subscriber = Subscriber(SQLite3SubscriberStorage(str(tmp_path / "subs.db")),
                            SQLite3TempSubscriberStorage(str(tmp_path / "temp.db")),
                            REQUEST_TIMEOUT=10)
    app.register_blueprint(subscriber.build_blueprint(url_prefix="/callbacks"))
    confirmed: list[tuple[str, str]] = []
    failed: list[tuple[str, str]] = []
    bodies: list[tuple[str, bytes]] = []
    subscriber.add_success_handler(lambda topic_url, callback_id, mode:
                                   confirmed.append((topic_url, mode)))
    subscriber.add_error_handler(lambda topic_url, callback_id, reason:
                                 failed.append((topic_url, reason)))
    subscriber.add_listener(lambda topic_url, callback_id, body:
                            bodies.append((topic_url, body)))
    server = make_server(HOST, 0, app, threaded=True)
    app.config["SERVER_NAME"] = f"{HOST}:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        def subscribe() -> str:
            with app.app_context():
                return subscriber.subscribe(topic_url=topic, hub_url=f"{hub_env.base}/hub")

        # Its request is a blocking one, to our hub in this event loop: from a thread.
        callback_id = await asyncio.to_thread(subscribe)
        await eventually(lambda: confirmed or failed, timeout=30.0)
        assert confirmed == [(topic, "subscribe")] and not failed
        (target,) = await eventually(lambda: hub_env.hub.front.push_targets(sub["id"]))
        assert target.url == f"http://{HOST}:{server.server_port}/callbacks/{callback_id}"
        await eventually(lambda: bodies, timeout=90.0)  # the farm posts; the hub pushes
        pushed_topic, body = bodies[0]
        assert pushed_topic == topic
        parsed = parse_feed(body, url=topic)
        assert parsed.error is None and parsed.feed.self_link == topic
        held = {entry_id_in(await hub_env.hub.front.subscription(sub["id"]), i.entry_id)
                for i in await hub_env.hub.front.feed_items(sub["id"])}
        assert {e.guid for e in parsed.entries} & held
    finally:
        server.shutdown()
        thread.join(10)
