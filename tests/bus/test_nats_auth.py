"""The hub's NATS server lets no one in without a key, and each role's key only what that role
does (bus/nats_auth.py): attacked as another user of the machine would (no key, a key of its
own making, the crawler's key used to forge a match or read the matches), then used as the
hub's roles use it. Each test starts its own real ``nats-server`` with authorization."""

from __future__ import annotations

import logging
import os
import socket
import stat

import nats
import nats.errors
import nkeys
import numpy as np
import pytest

from feedmesh.bus import BusError
from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.bus.nats_auth import (
    authorization_block,
    create_credentials,
    inbox_prefix,
    public_key,
    read_seed,
)
from feedmesh.bus.nats_server import LocalNats
from feedmesh.hub.idcodec import encode_ids
from feedmesh.hub.messages import Article, Matched, encode
from feedmesh.model import Entry
from feedmesh.secret_file import write_secret

NS = "fm"
REFLECTORS = 2
SUBJECTS = ["articles", "control", "feeds", *(f"matches.{r}" for r in range(REFLECTORS))]
GROUPS = [("articles", "filter-0"), ("control", "filter-0"), ("feeds", "crawler-0"),
          *((subject, f"reflector-{r}") for r in range(REFLECTORS)
            for subject in ("control", f"matches.{r}"))]


@pytest.fixture
async def secured(tmp_path):
    """A server that knows the five roles' keys, the hub's streams and groups made with the
    admin's (as set-up does); yields the server and the credentials."""
    credentials = create_credentials(tmp_path / "secrets" / "nats")
    server = LocalNats(tmp_path / "nats",
                       authorization=authorization_block(credentials, NS, REFLECTORS)).start()
    admin = await JetStreamBus.connect(server.url, namespace=NS,
                                       credentials=credentials.path("admin"))
    await admin.prepare(SUBJECTS, GROUPS)
    await admin.close()
    yield server, credentials
    server.stop()


async def as_role(server, credentials, role: str, **options) -> JetStreamBus:
    return await JetStreamBus.connect(server.url, namespace=NS, ack_wait_s=1.0,
                                      credentials=credentials.path(role), **options)


def forged_match() -> bytes:
    """What the issue's attacker published: a phishing link and a script for subscription 1."""
    entry = Entry(key="x", title="You won", link="http://phish.invalid/",
                  summary="<script>steal()</script>")
    article = Article(entry_id=10**9, feed_id=1, feed_url="http://127.0.0.1/f", feed_title="f",
                      entry=entry, first_seen_at=0.0)
    return encode(Matched(article=article, sub_ids=encode_ids(np.array([1], dtype=np.int64)),
                          shard=0, matched_at=0.0))


async def test_a_client_without_credentials_is_refused(secured, tmp_path):
    server, _ = secured
    with pytest.raises(BusError, match=r"refused no credentials .*Authorization Violation"):
        await JetStreamBus.connect(server.url, namespace=NS, connect_timeout=20)
    # a key of its own making: well formed, unknown to the server
    stranger = write_secret(tmp_path / "stranger.nk",
                            nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER))
    with pytest.raises(BusError, match=r"refused the credentials in .*stranger\.nk"):
        await JetStreamBus.connect(server.url, namespace=NS, connect_timeout=20,
                                   credentials=stranger)
    # Below the client library: the server says so in one line and hangs up.
    with socket.create_connection((server.host, server.port), timeout=5) as raw:
        assert b'"auth_required":true' in raw.recv(4096)
        raw.sendall(b'CONNECT {"verbose":false}\r\nSUB > 1\r\nPING\r\n')
        answer = raw.recv(4096)
        assert b"Authorization Violation" in answer and b"PONG" not in answer


async def test_a_crawlers_key_cannot_publish_a_matched_message(secured):
    server, credentials = secured
    crawler = await as_role(server, credentials, "crawler")
    reflector = await as_role(server, credentials, "reflector")
    filter_ = await as_role(server, credentials, "filter")
    matches = await reflector.consumer("matches.0", "reflector-0")
    try:
        with pytest.raises(BusError, match=r"refused publishing to matches\.0.*crawler\.nk "
                                           r"may not use fm\.matches\.0"):
            await crawler.publish("matches.0", forged_match())
        with pytest.raises(BusError, match="refused"):
            await crawler.publish_many([("matches.1", forged_match(), None)])
        # nor below the bus, as a plain NATS publish the stream would capture
        seed = read_seed(credentials.path("crawler"))
        raw = await nats.connect(server.url, nkeys_seed_str=seed.decode(),
                                 inbox_prefix=inbox_prefix(public_key(seed)))
        await raw.publish("fm.matches.0", forged_match())
        await raw.flush()
        await raw.close()
        # the filter's match is the first the reflector ever gets
        seq = await filter_.publish("matches.0", b"the filter's")
        delivery = await matches.get(10.0)
        assert (delivery.seq, delivery.data) == (1, b"the filter's") and seq == 1
        await delivery.ack()
    finally:
        for bus in (crawler, reflector, filter_):
            await bus.close()


async def test_each_role_does_what_the_hub_asks_of_it(secured, caplog):
    server, credentials = secured
    caplog.set_level(logging.ERROR, logger="feedmesh.bus")
    crawler, filter_, reflector, web = [await as_role(server, credentials, role)
                                        for role in ("crawler", "filter", "reflector", "web")]
    try:
        # the crawler: its own group of feeds; finds the groups set-up made; publishes
        feeds = await crawler.consumer("feeds", "crawler-0")
        for subject, group in GROUPS:
            if group != "crawler-0":
                await (await crawler.consumer(subject, group)).close()
        articles = await crawler.publish_many([("articles", b"a%d" % n, f"a{n}")
                                               for n in range(3)])
        # the web: control, feeds, a new subscription's first entries; waits for them
        control = await web.publish("control", b"add subscription 1")
        await (await web.consumer("feeds", "crawler-0")).close()
        await web.publish("feeds", b"feeds added")
        await web.publish("matches.1", b"start entries")
        # the filter
        f_control = await filter_.consumer("control", "filter-0")
        f_articles = await filter_.consumer("articles", "filter-0")
        change = await f_control.get(10.0)
        assert change.seq == control
        await change.ack()
        got = [await f_articles.get(10.0) for _ in articles]
        await filter_.publish_many([(f"matches.{n % 2}", d.data, str(d.seq))
                                    for n, d in enumerate(got)])
        await filter_.ack_many(got)
        # the reflectors
        for r in range(REFLECTORS):
            r_control = await reflector.consumer("control", f"reflector-{r}")
            await (await r_control.get(10.0)).ack()
        m0 = await reflector.consumer("matches.0", "reflector-0")
        m1 = await reflector.consumer("matches.1", "reflector-1")
        held = [await m0.get(10.0), await m0.get(10.0), await m1.get(10.0), await m1.get(10.0)]
        await reflector.ack_many(held[:2])
        await held[2].ack()
        await reflector.park(held[3], "reflector-1", "a poison message")
        delivery = await feeds.get(10.0)
        await crawler.park(delivery, "crawler-0", "a poison message")
        # what drain and the web wait on
        assert await crawler.wait_acked("articles", articles[-1], timeout=10.0)
        assert await crawler.wait_acked("matches.0", await crawler.last_seq("matches.0"),
                                        timeout=10.0)
        assert await web.wait_acked("control", control, timeout=10.0)
        assert await web.wait_acked("matches.1", await web.last_seq("matches.1"), timeout=10.0)
        for bus in (crawler, filter_, reflector, web):  # the queue depths' metrics
            await bus.refresh_depths()
            assert "control/filter-0" in bus.depths() or "feeds/crawler-0" in bus.depths()
    finally:
        for bus in (crawler, filter_, reflector, web):
            await bus.close()
    assert [r.message for r in caplog.records if "refused" in r.message] == []


# (role, a request it must not make) -> refused. Each is a way to read, forge or lose the hub's
# messages: pull another role's group, read a stored message, make a consumer on a stream it
# does not read (a push consumer would send it every message), delete groups or streams,
# answer or eavesdrop on another connection's inbox.
REFUSED_REQUESTS = [
    ("crawler", "$JS.API.CONSUMER.MSG.NEXT.fm_matches_0.reflector-0"),
    ("crawler", "$JS.API.CONSUMER.CREATE.fm_matches_0.mine.fm.matches.0"),
    ("crawler", "$JS.API.CONSUMER.MSG.NEXT.fm_articles.filter-0"),
    ("crawler", "$JS.API.STREAM.MSG.GET.fm_articles"),
    ("crawler", "$JS.API.CONSUMER.DELETE.fm_articles.filter-0"),
    ("crawler", "$JS.API.STREAM.PURGE.fm_matches_0"),
    ("crawler", "$JS.API.STREAM.DELETE.fm_control"),
    ("crawler", "$JS.API.STREAM.CREATE.fm_other"),
    ("crawler", "fm.control"),
    ("filter", "fm.articles"),
    ("filter", "fm.control"),
    ("filter", "$JS.API.CONSUMER.MSG.NEXT.fm_matches_1.reflector-1"),
    ("reflector", "fm.matches.0"),
    ("reflector", "$JS.API.CONSUMER.MSG.NEXT.fm_articles.filter-0"),
    ("web", "fm.articles"),
    ("web", "$JS.API.CONSUMER.MSG.NEXT.fm_feeds.crawler-0"),
    ("web", "$JS.API.CONSUMER.CREATE.fm_feeds.mine.fm.feeds"),
    ("web", "$JS.ACK.fm_control.filter-0.1.1.1.1.0"),
    ("web", "_INBOX.anyone"),
]


@pytest.mark.parametrize(("role", "subject"), REFUSED_REQUESTS)
async def test_a_role_is_refused_what_it_does_not_do(secured, role, subject):
    server, credentials = secured
    seed = read_seed(credentials.path(role))
    refusals: list[str] = []

    async def error(e: Exception) -> None:
        refusals.append(str(e))

    raw = await nats.connect(server.url, nkeys_seed_str=seed.decode(), error_cb=error,
                             inbox_prefix=inbox_prefix(public_key(seed)))
    try:
        with pytest.raises(nats.errors.TimeoutError):
            await raw.request(subject, b"{}", timeout=1.0)
        assert any("permissions violation for publish" in r and subject.lower() in r
                   for r in refusals), refusals
    finally:
        await raw.close()


@pytest.mark.parametrize("subject", [">", "fm.>", "fm.matches.0", "_INBOX.>", "$JS.ACK.>"])
async def test_a_role_listens_only_on_its_own_inbox(secured, subject):
    server, credentials = secured
    seed = read_seed(credentials.path("crawler"))
    refusals: list[str] = []

    async def error(e: Exception) -> None:
        refusals.append(str(e))

    raw = await nats.connect(server.url, nkeys_seed_str=seed.decode(), error_cb=error,
                             inbox_prefix=inbox_prefix(public_key(seed)))
    try:
        await raw.subscribe(subject)
        await raw.flush()
        await raw.request("$JS.API.STREAM.INFO.fm_articles", b"", timeout=5.0)  # still works
        assert any("permissions violation for subscription" in r for r in refusals), refusals
    finally:
        await raw.close()


async def test_the_servers_files_and_the_keys_are_closed_to_others(secured):
    server, credentials = secured
    assert stat.S_IMODE(server.folder.stat().st_mode) == 0o700
    for name in ("nats.conf", "nats-server.log"):
        assert stat.S_IMODE((server.folder / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE(credentials.folder.stat().st_mode) == 0o700
    config = (server.folder / "nats.conf").read_text()
    for role, public in credentials.public_keys.items():
        path = credentials.path(role)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert public in config and path.read_text().strip() not in config  # no seed in it


async def test_a_key_file_others_can_read_is_not_used(secured):
    server, credentials = secured
    credentials.path("filter").chmod(0o644)
    with pytest.raises(BusError, match=r"filter\.nk: others may read it \(mode 0644\)"):
        await as_role(server, credentials, "filter")
