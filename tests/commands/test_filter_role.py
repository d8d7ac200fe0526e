"""`feedmesh filter`: filter shards as processes of their own, on a real NATS server, matching the
articles of the hub's stream against the subscriptions of a hub's database, and following the
subscription changes sent on ``control``."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid

import pytest

from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.hub.idcodec import decode_ids
from feedmesh.hub.messages import Article, Matched, SubscriptionAdded, decode, encode
from feedmesh.match import article_from_entry, parse_query
from feedmesh.model import Entry
from feedmesh.store.sqlite_hub import SQLiteHubState

QUERIES = ["privacy", "law AND court", "privacy OR climate", "court", "climate NOT law",
           "\"supreme court\"", "privacy AND law"]
TITLES = ["privacy law", "the supreme court rules", "climate and law", "climate talks",
          "court of privacy", "nothing at all"]


def article(n: int, title: str) -> Article:
    return Article(entry_id=n, feed_id=1, feed_url="http://127.0.0.1/f", feed_title="F",
                   entry=Entry(key=str(n), title=title), first_seen_at=1.0)


def expected(queries: dict[int, str], titles: list[str]) -> set[tuple[int, int]]:
    """(entry, subscription) pairs by the reference evaluator."""
    pairs = set()
    for n, title in enumerate(titles, start=1):
        tokens = article_from_entry(article(n, title).entry, "http://127.0.0.1/f")
        pairs |= {(n, sid) for sid, q in queries.items() if parse_query(q).matches(tokens)}
    return pairs


def start_filter(tmp_path, nats_url: str, namespace: str, shard: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "feedmesh", "filter", "--bus", nats_url, "--bus-namespace",
         namespace, "--state", str(tmp_path / "hub.db"), "--shard", shard,
         "--data", str(tmp_path / f"filter-{shard.replace('/', '-')}"), "--log-level",
         "warning"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    line = process.stderr.readline()
    assert line.startswith(f"feedmesh filter shard {shard}:"), line + process.stderr.read()
    return process


async def receive(consumer, count: int) -> set[tuple[int, int]]:
    pairs: set[tuple[int, int]] = set()
    for _ in range(count):
        delivery = await consumer.get(30.0)
        assert delivery is not None, f"only {len(pairs)} pairs came"
        matched = decode(delivery.data)
        assert isinstance(matched, Matched)
        pairs |= {(matched.article.entry_id, int(s)) for s in decode_ids(matched.sub_ids)}
        await delivery.ack()
    return pairs


@pytest.fixture
def hub_db(tmp_path):
    state = SQLiteHubState(tmp_path / "hub.db")
    account, _ = state.create_account("ann", 1.0)
    queries = {}
    for query in QUERIES:
        sub = state.add_subscription(account.id, name="", query=query, keep=10, reflector=0,
                                     now=1.0)
        queries[sub.id] = query
    state.close()
    return account.id, queries


async def test_two_shards_in_two_processes_match_like_the_reference(tmp_path, nats_url,
                                                                    hub_db):
    account, queries = hub_db
    namespace = f"t{uuid.uuid4().hex[:10]}"
    bus = await JetStreamBus.connect(nats_url, namespace=namespace)
    reflector = await bus.consumer("matches.0", "reflector-0")  # before anything is matched
    shards = [start_filter(tmp_path, nats_url, namespace, s) for s in ("0/2", "1/2")]
    try:
        for n, title in enumerate(TITLES, start=1):
            await bus.publish("articles", encode(article(n, title)))
        want = expected(queries, TITLES)
        # One message per (article, shard) that matched something.
        messages = len({(n, sid % 2) for n, sid in want})
        assert await receive(reflector, messages) == want
        assert await reflector.get(0.3) is None  # nothing doubled

        # A subscription added while they run: stored, then announced on control, as the web
        # layer does; the answer waits until both shards applied it.
        state = SQLiteHubState(tmp_path / "hub.db")
        sub = state.add_subscription(account, name="", query="talks", keep=10, reflector=0,
                                     now=2.0)
        state.close()
        seq = await bus.publish("control", encode(SubscriptionAdded(
            sub_id=sub.id, query="talks", reflector=0)))
        assert await bus.wait_acked("control", seq, timeout=30.0)
        await bus.publish("articles", encode(article(100, "peace talks")))
        assert await receive(reflector, 1) == {(100, sub.id)}
    finally:
        for process in shards:
            process.send_signal(signal.SIGTERM)
        errors = [process.communicate(timeout=60)[1] for process in shards]
        await bus.close()
    assert [process.returncode for process in shards] == [0, 0], errors
    assert not any("Traceback" in text for text in errors), errors


async def test_a_restarted_shard_catches_up_from_its_snapshot_and_the_stream(tmp_path, nats_url,
                                                                            hub_db):
    _, queries = hub_db
    namespace = f"t{uuid.uuid4().hex[:10]}"
    bus = await JetStreamBus.connect(nats_url, namespace=namespace)
    reflector = await bus.consumer("matches.0", "reflector-0")
    first = start_filter(tmp_path, nats_url, namespace, "0/1")
    first.send_signal(signal.SIGKILL)  # dies; its group stays on the server
    first.communicate(timeout=30)
    for n, title in enumerate(TITLES, start=1):  # published while no member runs
        await bus.publish("articles", encode(article(n, title)))
    again = start_filter(tmp_path, nats_url, namespace, "0/1")  # loads its snapshot
    try:
        want = expected(queries, TITLES)
        assert await receive(reflector, len({n for n, _ in want})) == want
    finally:
        again.send_signal(signal.SIGTERM)
        err = again.communicate(timeout=60)[1]
        await bus.close()
    assert again.returncode == 0 and "Traceback" not in err, err


def test_a_hub_database_that_is_not_there_is_one_line(tmp_path, nats_url):
    done = subprocess.run(
        [sys.executable, "-m", "feedmesh", "filter", "--bus", nats_url, "--state",
         str(tmp_path / "missing" / "hub.db"), "--data", str(tmp_path / "d")],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"feedmesh filter: no hub database at "
                                   f"{tmp_path / 'missing' / 'hub.db'}: give the hub.db of a "
                                   f"hub's data folder, or its postgresql:// URL")
