"""The key that signs private feed URLs, kept in PostgreSQL (migration 4 of the hub database):
every process of a hub on one database signs and checks with the same key, whatever machine and
data folder it runs with, and a hub that kept its key in a file brings it over."""

from __future__ import annotations

import threading

import psycopg
import pytest

from feedmesh.compose import FEED_SECRET_FILE
from feedmesh.compose.embedded import embedded_hub
from feedmesh.compose.settings import BusSettings, WebSettings
from feedmesh.compose.web import web_process
from feedmesh.store import StoreError
from feedmesh.store.postgres_hub import PostgresHubState

from .conftest import hub_settings


def test_the_first_key_stored_wins_and_every_process_reads_it(postgres_url):
    first, second = PostgresHubState(postgres_url), PostgresHubState(postgres_url)
    try:
        with pytest.raises(StoreError, match=r"no key for private feed URLs.*crawling hub"):
            second.feed_secret()  # a web process never makes one
        with pytest.raises(StoreError, match="at least 32 bytes, got 5"):
            first.feed_secret(lambda: b"short")
        keys: list[bytes] = []
        starting = threading.Barrier(2)

        def start(state: PostgresHubState, key: bytes) -> None:
            starting.wait()
            keys.append(state.feed_secret(lambda: key))

        threads = [threading.Thread(target=start, args=(state, bytes([n]) * 32))
                   for n, state in enumerate((first, second))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert keys[0] == keys[1] and keys[0] in (bytes([0]) * 32, bytes([1]) * 32)
        assert second.feed_secret() == first.feed_secret(lambda: b"x" * 32) == keys[0]
    finally:
        first.close()
        second.close()


def test_a_short_key_is_refused_by_the_database_too(postgres_url):
    state = PostgresHubState(postgres_url)  # runs the migrations
    state.close()
    with psycopg.connect(postgres_url) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO hub_keys (name, secret, created_at) VALUES ('x', %s, 0)",
                     (b"short",))


async def test_hubs_and_web_processes_on_one_database_agree_on_feed_urls(tmp_path, postgres_url):
    legacy = tmp_path / "old-machine"
    legacy.mkdir()
    (legacy / FEED_SECRET_FILE).write_bytes(b"k" * 32)  # this hub kept its key in a file
    hub = embedded_hub(hub_settings(str(legacy)), store_url=postgres_url)
    await hub.start()
    try:
        account, _ = await hub.front.create_account("ann")
        sub = await hub.front.add_subscription(account.id, name="", query="law", keep=5)
        token = hub.front.feed_token(sub)
    finally:
        await hub.stop()
    state = PostgresHubState(postgres_url)
    try:  # its URLs keep working: the key moved into the database
        assert state.feed_secret() == b"k" * 32
    finally:
        state.close()
    # a replacement crawling hub and a web process on other machines: empty data folders
    again = embedded_hub(hub_settings(str(tmp_path / "new-machine")), store_url=postgres_url)
    await again.start()
    (_, web_role), closers = web_process(
        WebSettings(bus=BusSettings(url="nats://127.0.0.1:9"), reflectors=("http://127.0.0.1:9",),
                    data_dir=str(tmp_path / "web-machine"), store=postgres_url),
        base_url="http://127.0.0.1")
    web = web_role.front
    try:
        assert again.front.feed_token(sub) == web.feed_token(sub) == token
        assert web.read_feed_token(token) == again.front.read_feed_token(token) == (sub.id, 0)
        assert not (tmp_path / "new-machine" / FEED_SECRET_FILE).exists()  # not spread in files
        assert not (tmp_path / "web-machine").exists()
    finally:
        await web.aclose()
        for close in closers:
            done = close()
            if done is not None:
                await done
        await again.stop()


def test_tools_read_the_key_where_the_hub_keeps_it(tmp_path, postgres_url):
    # private_feed_key, for tools that build readers' URLs (the benchmarks): from the database
    # with a URL (no feed-secret.key is written there), from the folder without; never made
    from feedmesh.compose import private_feed_key

    with pytest.raises(StoreError, match="no key for private feed URLs"):
        private_feed_key(tmp_path, postgres_url)
    state = PostgresHubState(postgres_url)
    try:
        made = state.feed_secret(lambda: b"d" * 32)
    finally:
        state.close()
    assert private_feed_key(tmp_path, postgres_url) == made
    assert not (tmp_path / FEED_SECRET_FILE).exists()
    with pytest.raises(StoreError, match=r"no feed-secret\.key in"):
        private_feed_key(tmp_path)
    (tmp_path / FEED_SECRET_FILE).write_bytes(b"f" * 32)
    assert private_feed_key(tmp_path) == b"f" * 32
