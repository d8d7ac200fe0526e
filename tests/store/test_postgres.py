"""What only the PostgreSQL stores do: migrations shared by processes that open at once, errors
that name the server and the SQLSTATE (full, read-only, unreachable), a server that restarts, and
a kill -9 in the middle of a stream. Each on a real server (tests/postgres.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import uuid
from urllib.parse import parse_qsl, urlsplit

import msgspec
import psycopg
import pytest

from feedmesh.model import Entry
from feedmesh.store import (
    FeedUpdate,
    StorageFullError,
    StorageReadOnlyError,
    StoreError,
    StoreUnavailableError,
)
from feedmesh.store.pg_server import LocalPostgres
from feedmesh.store.postgres import PostgresStore
from feedmesh.store.postgres_hub import PostgresHubState
from feedmesh.store.postgres_owners import PostgresFeedOwnership
from feedmesh.store.postgres_reflector import PostgresReflectorLog
from tests.postgres import ENV


def versions(url: str) -> list[tuple[str, int]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT component, version FROM feedmesh_migrations "
                            "ORDER BY component, version").fetchall()


def test_stores_opening_a_new_database_at_once_migrate_it_once(postgres_url):
    openers = [PostgresStore, PostgresHubState, PostgresReflectorLog,
               PostgresFeedOwnership] * 4  # the first and the last both make feed_owners
    start = threading.Barrier(len(openers))
    opened, errors = [], []

    def open_one(opener) -> None:
        start.wait()
        try:
            opened.append(opener(postgres_url))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one, args=(o,)) for o in openers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in opened:
        store.close()
    assert errors == [] and len(opened) == len(openers)
    assert versions(postgres_url) == [("hub", 1), ("hub", 2), ("hub", 3), ("hub", 4),
                                      ("hub", 5), ("hub", 6), ("ingest", 1), ("ingest", 2),
                                      ("ingest", 3), ("ownership", 1), ("reflector", 1)]


def test_a_database_a_newer_feedmesh_made_is_refused(postgres_url):
    PostgresHubState(postgres_url).close()
    with psycopg.connect(postgres_url) as conn:
        conn.execute("INSERT INTO feedmesh_migrations (component, version) VALUES ('hub', 99)")
    with pytest.raises(StoreError, match=r"cannot open hub database postgresql://.*: its hub "
                                         r"schema is at version 99, this feedmesh knows 6"):
        PostgresHubState(postgres_url)


def test_a_hub_database_of_before_push_gains_its_tables(postgres_url):
    from feedmesh.store import PushTarget
    from feedmesh.store.postgres_db import PostgresDatabase
    from feedmesh.store.postgres_hub import COMPONENT, MIGRATIONS

    PostgresDatabase(postgres_url, what="hub database", component=COMPONENT,
                     migrations=MIGRATIONS[:1]).close()  # as the hub was before issue 12
    assert versions(postgres_url) == [("hub", 1)]
    state = PostgresHubState(postgres_url)
    account, _ = state.create_account("ann", 1.0)
    sub = state.add_subscription(account.id, name="", query="a", keep=5, reflector=0, now=1.0)
    saved = state.save_push_target(PushTarget(sub_id=sub.id, kind="webhook",
                                              url="http://a.test/", created_at=1.0))
    assert state.push_targets() == [saved]
    assert state.websub_leases() == []  # and the WebSub subscriber's (migration 3)
    assert state.feed_secret(lambda: b"k" * 32) == b"k" * 32  # and the feed-URL key's (4)
    state.close()
    assert versions(postgres_url) == [("hub", 1), ("hub", 2), ("hub", 3), ("hub", 4),
                                      ("hub", 5), ("hub", 6)]


def test_an_ingest_database_of_before_the_entry_count_gains_it_counted(postgres_url):
    from feedmesh.store.postgres import COMPONENT, MIGRATIONS
    from feedmesh.store.postgres_db import PostgresDatabase

    PostgresDatabase(postgres_url, what="PostgreSQL store", component=COMPONENT,
                     migrations=MIGRATIONS[:2]).close()  # as the store was before the count
    with psycopg.connect(postgres_url) as conn:
        conn.execute("INSERT INTO feeds (source_url, url, state, added_at, changed_at) "
                     "VALUES ('http://a/1', 'http://a/1', '', 0, 0)")
        conn.execute("INSERT INTO entries (feed_id, key, content_hash, first_seen_at, "
                     "changed_at, data) SELECT 1, 'k' || n, 'h' || n, 0, 0, '' "
                     "FROM generate_series(1, 25) AS n")
    store = PostgresStore(postgres_url)
    assert store.entry_count() == 25
    store.remove_feed(1)
    assert store.entry_count() == 0
    store.close()
    assert ("ingest", 3) in versions(postgres_url)


def test_push_targets_of_before_the_marks_count_as_delivered_up_to_the_upgrade(postgres_url):
    import time

    from feedmesh.store import PushTarget
    from feedmesh.store.postgres_db import PostgresDatabase
    from feedmesh.store.postgres_hub import COMPONENT, MIGRATIONS

    PostgresDatabase(postgres_url, what="hub database", component=COMPONENT,
                     migrations=MIGRATIONS[:4]).close()  # before the durable marks
    with psycopg.connect(postgres_url) as conn:
        conn.execute("INSERT INTO accounts (name, token_hash, created_at) VALUES "
                     "('ann', 'x'::bytea, 1.0)")
        conn.execute("INSERT INTO subscriptions (account_id, name, query, keep, reflector, "
                     "generation, created_at, changed_at) SELECT id, '', 'a', 5, 0, 0, 1.0, 1.0 "
                     "FROM accounts")
        conn.execute("INSERT INTO push_targets (sub_id, kind, url, created_at) SELECT id, "
                     "'webhook', 'http://a.test/', 1.0 FROM subscriptions")
    before = time.time()
    state = PostgresHubState(postgres_url)
    (target,) = state.push_targets()
    assert isinstance(target, PushTarget) and before - 5 <= target.delivered_before <= time.time()
    state.close()


def test_push_targets_of_before_the_signature_method_sign_sha256_as_they_did(postgres_url):
    from feedmesh.store.postgres_db import PostgresDatabase
    from feedmesh.store.postgres_hub import COMPONENT, MIGRATIONS

    PostgresDatabase(postgres_url, what="hub database", component=COMPONENT,
                     migrations=MIGRATIONS[:5]).close()  # before the signature method
    with psycopg.connect(postgres_url) as conn:
        conn.execute("INSERT INTO accounts (name, token_hash, created_at) VALUES "
                     "('ann', 'x'::bytea, 1.0)")
        conn.execute("INSERT INTO subscriptions (account_id, name, query, keep, reflector, "
                     "generation, created_at, changed_at) SELECT id, '', 'a', 5, 0, 0, 1.0, 1.0 "
                     "FROM accounts")
        conn.execute("INSERT INTO push_targets (sub_id, kind, url, topic, format, secret, "
                     "created_at, delivered_before) SELECT id, 'websub', 'http://cb.test/', "
                     "'http://h/f/t.atom', 'atom1.0', 's', 1.0, 5.0 FROM subscriptions")
    state = PostgresHubState(postgres_url)
    (target,) = state.push_targets()
    assert (target.signature, target.delivered_before) == ("sha256", 5.0)
    assert state.set_push_signature(target.id, "sha1").signature == "sha1"
    state.close()
    assert ("hub", 6) in versions(postgres_url)


def test_a_read_only_database_opens_and_refuses_writes_precisely(postgres_url):
    PostgresStore(postgres_url).close()
    database = urlsplit(postgres_url).path.lstrip("/")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
    store = PostgresStore(postgres_url)
    assert store.feeds() == []
    with pytest.raises(StorageReadOnlyError, match=r"adding feeds failed in postgresql://.*"
                                                   r"read-only transaction \[SQLSTATE 25006\]"):
        store.add_feeds(["http://a/1"], now=1.0)
    store.close()


def test_an_unreachable_server_is_a_store_error_that_keeps_the_password_secret():
    with pytest.raises(StoreUnavailableError) as caught:
        PostgresStore("postgresql://feedmesh:sekrit@127.0.0.1:1/nowhere")
    message = str(caught.value)
    assert message.startswith("cannot open PostgreSQL store "
                              "postgresql://feedmesh@127.0.0.1:1/nowhere: ")
    assert "sekrit" not in message


def test_a_closed_store_says_so(postgres_url):
    state = PostgresHubState(postgres_url)
    account, _ = state.create_account("ann", 1.0)
    state.close()
    with pytest.raises(StoreError, match=r"rotating the token of account 1 failed in "
                                         r"postgresql://.*: the hub database was closed"):
        state.rotate_token(account.id)


@pytest.fixture(scope="module")
def own_server():
    """A server of this module's own, to stop and start (the session's is shared); a test that
    stops it starts it again."""
    folder = tempfile.mkdtemp(prefix="feedmesh-test-pg-")
    server = LocalPostgres(folder, durable=False).start()
    yield server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


def test_a_store_outlives_a_restart_of_its_server(own_server):
    store = PostgresStore(own_server.url())
    (feed,) = store.add_feeds(["http://a/1"], now=1.0)
    own_server.stop()
    # Unavailable, not a plain failure: the tiers wait it out instead of parking their work.
    with pytest.raises(StoreUnavailableError, match="reading PostgreSQL store postgresql://"):
        store.feeds()
    with pytest.raises(StoreUnavailableError, match="adding feeds failed in postgresql://"):
        store.add_feeds(["http://b/2"], now=2.0)
    own_server.start()  # the same folder and port: the same databases
    assert [f.id for f in store.feeds()] == [feed.id]  # connections opened again by themselves
    assert len(store.add_feeds(["http://b/2"], now=3.0)) == 1
    store.close()


WRITER = textwrap.dedent("""
    import sys, msgspec
    from feedmesh.model import Entry
    from feedmesh.store import FeedUpdate
    from feedmesh.store.postgres import PostgresStore
    s = PostgresStore(sys.argv[1], max_entries_per_feed=10**6)
    (feed,) = s.add_feeds(["http://a/1"], now=0.0)
    n = 0
    while True:  # batches of 10 entries, each with the feed's etag naming the last entry
        batch = tuple(Entry(key=f"g{n + i}", content_hash=f"h{n + i}") for i in range(10))
        n += 10
        state = msgspec.structs.replace(feed.state, etag=f"upto-{n}")
        s.apply([FeedUpdate(feed_id=feed.id, state=state, seen_at=float(n), entries=batch)])
        print(n, flush=True)
""")


def test_kill_9_mid_stream_loses_and_duplicates_nothing(postgres_url):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, postgres_url], stdout=subprocess.PIPE,
                            text=True, env=env)
    committed = 0
    while committed < 300:  # the writer's own lines: it has committed this many
        line = proc.stdout.readline()
        assert line, "the writer stopped before committing 300 entries"
        committed = int(line)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    s = PostgresStore(postgres_url, max_entries_per_feed=10**6)
    keys = [e.entry.key for e in s.entries(1, limit=10**6)]
    etag = s.feed(1).state.etag
    s.close()
    assert len(keys) == len(set(keys))  # no duplicates
    stored = len(keys)
    assert stored >= committed  # everything acknowledged survived
    assert etag == f"upto-{stored}"  # validators and entries were committed together


def test_a_full_disk_is_a_storage_full_error_and_nothing_is_half_written(postgres_url):
    """The entries table moves to a tablespace on a 1 MiB tmpfs: PostgreSQL's own ENOSPC
    (disk_full, 53100) when it cannot extend the table."""
    if os.environ.get(ENV):
        pytest.skip(f"the server of {ENV} may not see this machine's file systems")
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount_point = tempfile.mkdtemp(prefix="feedmesh-test-full-")
    tablespace = f"full_{uuid.uuid4().hex[:8]}"
    # The system's mount and umount, found on PATH (the test skips where it cannot mount).
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mount_point],  # noqa: S607
                      capture_output=True, check=False).returncode != 0:
        os.rmdir(mount_point)
        pytest.skip("this machine does not let us mount a tmpfs")
    store = None
    try:
        shutil.chown(mount_point, "postgres", "postgres")
        store = PostgresStore(postgres_url, max_entries_per_feed=10**6)
        (feed,) = store.add_feeds(["http://a/1"], now=0.0)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE {tablespace} LOCATION '{mount_point}'")
            conn.execute(f"ALTER TABLE entries SET TABLESPACE {tablespace}")
        stored, n = 0, 0
        with pytest.raises(StorageFullError, match=r"applying 1 feed updates failed in "
                                                   r"postgresql://.*\[SQLSTATE 53100\]"):
            while n < 5_000:
                batch = tuple(Entry(key=f"g{n + i}", content_hash=f"h{n + i}",
                                    title=os.urandom(1500).hex()) for i in range(10))
                state = msgspec.structs.replace(feed.state, etag=f"upto-{n + 10}")
                store.apply([FeedUpdate(feed_id=feed.id, state=state, seen_at=1.0,
                                        entries=batch)])
                n += 10
                stored = n
        assert stored > 0 and store.entry_count() == stored  # the failed batch left nothing
        assert store.feed(feed.id).state.etag == f"upto-{stored}"
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE entries SET TABLESPACE pg_default")  # room again
        store.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=2.0,
                                entries=(Entry(key="later", content_hash="later"),))])
        assert store.entry_count() == stored + 1
    finally:
        if store is not None:
            store.close()
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE IF EXISTS entries SET TABLESPACE pg_default")
            conn.execute(f"DROP TABLESPACE IF EXISTS {tablespace}")
        subprocess.run(["umount", mount_point], check=False)  # noqa: S607
        os.rmdir(mount_point)


def test_the_superusers_login_for_other_processes_names_a_passfile_and_connects(own_server,
                                                                              tmp_path):
    login = own_server.superuser_login(tmp_path / "secrets" / "su.pgpass")
    assert own_server.password not in login.url and "passfile=" in login.url
    assert oct(os.stat(login.passfile).st_mode & 0o777) == "0o600"
    with psycopg.connect(login.url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE other")
    try:  # the passfile holds every database of the server
        other = login.url.replace("/postgres?", "/other?")
        with psycopg.connect(other) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("other",)
    finally:
        with psycopg.connect(login.url, autocommit=True) as conn:
            conn.execute("DROP DATABASE other")


def test_the_url_the_tests_hand_their_processes_holds_no_password(postgres_url):
    if os.environ.get(ENV):
        pytest.skip(f"a server given by {ENV} is reached as it is given")
    parts = urlsplit(postgres_url)
    assert parts.password is None
    passfile = dict(parse_qsl(parts.query))["passfile"]
    assert oct(os.stat(passfile).st_mode & 0o777) == "0o600"
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_local_server_listens_on_its_address_only_and_wants_its_password(own_server):
    with psycopg.connect(own_server.url()) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
    without = own_server.url().replace(f":{own_server.password}@", "@")
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(without, connect_timeout=5)
    assert oct(os.stat(own_server.folder / "password").st_mode & 0o777) == "0o600"


def test_writers_on_separate_connections_commit_entry_ids_in_order(postgres_url):
    """Two crawlers (a store each, so a connection each) commit while a third process follows
    ``entries_after`` from its watermark: without ids drawn under the lock held to the commit,
    a transaction that drew smaller ids commits after the reader has moved past them."""
    setup = PostgresStore(postgres_url)
    feeds = setup.add_feeds([f"http://a/{n}" for n in range(4)], now=0.0)
    setup.close()
    writers = [PostgresStore(postgres_url, max_entries_per_feed=10**6) for _ in feeds]
    reader = PostgresStore(postgres_url)
    errors: list[BaseException] = []

    def write(store, feed, start: int) -> None:
        try:
            for n in range(start, start + 300, 3):
                store.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=float(n),
                                        entries=tuple(Entry(key=f"k{k}", content_hash=f"h{k}")
                                                      for k in range(n, n + 3)))])
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(store, feed, 1000 * i))
               for i, (store, feed) in enumerate(zip(writers, feeds, strict=True))]
    for thread in threads:
        thread.start()
    seen: list[int] = []
    watermark = 0
    while True:
        finished = not any(thread.is_alive() for thread in threads)
        chunk = reader.entries_after(watermark, 7)
        seen += [item.id for item in chunk]
        if chunk:
            watermark = chunk[-1].id
        elif finished:
            break
    stored = reader.entry_count()
    for store in (*writers, reader):
        store.close()
    assert not errors
    assert stored == 300 * len(writers)
    assert len(seen) == len(set(seen)) == stored  # the watermark stepped over nothing


def test_a_filter_following_the_change_log_misses_no_change_made_on_another_connection(
        postgres_url):
    """Four web processes (a hub state each) add subscriptions while a filter shard catches up
    as it does: take ``change_seq()``, then the changes since its last mark. Seqs drawn under
    the lock held to the commit mean every change below a mark it has read is committed."""
    setup = PostgresHubState(postgres_url)
    account, _ = setup.create_account("ann", 0.0)
    setup.close()
    writers = [PostgresHubState(postgres_url) for _ in range(4)]
    reader = PostgresHubState(postgres_url)
    added: list[int] = []
    errors: list[BaseException] = []

    def write(state) -> None:
        try:
            for n in range(100):
                added.append(state.add_subscription(account.id, name="", query=f"q{n}", keep=5,
                                                    reflector=0, now=1.0).id)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(state,)) for state in writers]
    for thread in threads:
        thread.start()
    seen: set[int] = set()
    mark = 0
    while True:
        finished = not any(thread.is_alive() for thread in threads)
        top = reader.change_seq()
        seen.update(reader.changed_since(mark))
        mark = top
        if finished and reader.changed_since(mark) == []:
            break
    for state in (*writers, reader):
        state.close()
    assert not errors and len(added) == 400
    assert seen == set(added)
