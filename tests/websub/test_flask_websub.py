"""Interop with software no one here wrote: Flask-WebSub's hub and publisher (PyPI
``Flask-WebSub``, pinned in the ``test`` extra), its Celery tasks run eagerly (in the request that
queues them: no broker), served by werkzeug on its own loopback address. feedmesh's subscriber
discovers the hub from the publisher's ``Link:`` headers, subscribes through it (Flask-WebSub
verifies our intent by GET), and receives a publish (a sha512-signed fat ping), which is stored.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import aiohttp
import celery as celery_module
import flask
import flask_websub.hub as flask_websub_hub
from flask_websub.publisher import init_publisher, publisher
from werkzeug.serving import make_server

from tests.eventually import eventually
from tests.websub.test_subscriber_loopback import (
    feedmesh_hub,
    leases,
    live_in_scheduler,
    stored_ids,
)

HOST = "127.0.3.4"
ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>flask blog</title><id>urn:flask-blog</id>
<updated>2025-01-01T00:00:00Z</updated>{{ websub_hub_link }}{{ websub_self_link }}
{% for id, title in entries %}<entry><id>urn:flask:{{ id }}</id><title>{{ title }}</title>
<updated>2025-01-01T00:00:00Z</updated><summary>{{ title }}</summary></entry>{% endfor %}
</feed>"""


class FlaskBlog:
    """A Flask app that is a WebSub publisher (``/feed``) and hub (``/hub``)."""

    def __init__(self, storage_path: str) -> None:
        self.entries: list[tuple[str, str]] = [("1", "first post")]
        app = flask.Flask("feedmesh-interop-blog")
        app.config["PUBLISH_SUPPORTED"] = True  # lets the test publish with hub.mode=publish
        celery = celery_module.Celery("feedmesh-interop-blog")
        celery.conf.update(task_always_eager=True, task_eager_propagates=True,
                           broker_url="memory://")
        hub = flask_websub_hub.Hub(flask_websub_hub.SQLite3HubStorage(storage_path), celery,
                                   REQUEST_TIMEOUT=5)
        app.register_blueprint(hub.build_blueprint(url_prefix="/hub"))
        init_publisher(app)

        @app.route("/feed")
        @publisher()
        def feed():  # type: ignore[no-untyped-def]
            return flask.Response(flask.render_template_string(ATOM, entries=self.entries),
                                  mimetype="application/atom+xml")

        self.server = make_server(HOST, 0, app, threaded=True)
        self.base = f"http://{HOST}:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def feed_url(self) -> str:
        return f"{self.base}/feed"


@contextlib.contextmanager
def flask_blog(storage_path: str) -> Iterator[FlaskBlog]:
    blog = FlaskBlog(storage_path)
    blog.thread.start()
    try:
        yield blog
    finally:
        blog.server.shutdown()
        blog.thread.join(10)


async def test_flask_websub_hub_verifies_and_pushes_to_feedmesh(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "*")  # Flask-WebSub's requests calls stay on loopback
    with flask_blog(str(tmp_path / "flask-hub.db")) as blog:
        async with feedmesh_hub(str(tmp_path / "hub")) as (hub, _base), \
                aiohttp.ClientSession() as session:
            (feed_id,) = await hub.add_feeds([blog.feed_url])
            await eventually(lambda: [lease.state for lease in leases(hub, feed_id)] == [
                "active"], what="Flask-WebSub verified our subscription")
            (lease,) = leases(hub, feed_id)
            assert (lease.topic, lease.hub) == (blog.feed_url, f"{blog.base}/hub")
            # the lease is stored before the scheduler hears of it
            await eventually(lambda: live_in_scheduler(hub, feed_id),
                             what="websub_live in the scheduler")
            await eventually(lambda: "urn:flask:1" in stored_ids(hub))

            blog.entries.insert(0, ("2", "pushed by flask-websub"))
            async with session.post(f"{blog.base}/hub", data={
                    "hub.mode": "publish", "hub.topic": blog.feed_url}) as reply:
                assert reply.status == 202, await reply.text()
            await eventually(lambda: "urn:flask:2" in stored_ids(hub),
                             what="the entry Flask-WebSub pushed")
            assert hub.crawler.websub.deliveries.labels("accepted")._value.get() >= 1
            assert hub.crawler.websub.deliveries.labels("bad_signature")._value.get() == 0
