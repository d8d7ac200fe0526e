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
from feedmesh.hub.messages import Article, SubscriptionAdded, as_matched, decode, encode
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
    """The (entry, subscription) pairs of the next ``count`` (article, shard) matches, each
    come once (a filter sends a batch of them in one message)."""
    pairs: set[tuple[int, int]] = set()
    seen: set[tuple[int, int]] = set()
    while len(seen) < count:
        delivery = await consumer.get(30.0)
        assert delivery is not None, f"only {len(pairs)} pairs came"
        for matched in as_matched(decode(delivery.data)):
            assert (matched.article.entry_id, matched.shard) not in seen
            seen.add((matched.article.entry_id, matched.shard))
            pairs |= {(matched.article.entry_id, int(s)) for s in decode_ids(matched.sub_ids)}
        await delivery.ack()
    assert len(seen) == count
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
        # One match per (article, shard) that matched something.
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


async def test_a_batch_of_articles_through_the_filter_process_matches_like_the_bare_matcher(
        tmp_path, nats_url):
    """A few thousand Cobra-style subscriptions on two reflectors, a few hundred articles put
    on the stream at once (so the process takes them in batches, and each reflector gets one
    message per batch): every article's matches, as the reflectors decode them, are exactly the
    bare matcher's, none dropped or doubled."""
    from feedmesh.hub.messages import MatchedBatch
    from feedmesh.match import SubscriptionIndex
    from feedmesh.match.packed import pack_tokens
    from feedmesh.match.workload import Workload

    queries = Workload(seed=1).subscriptions(3000)
    state = SQLiteHubState(tmp_path / "hub.db")
    account, _ = state.create_account("ann", 1.0)
    state.add_subscriptions(((account.id, "", q, 10, n % 2) for n, q in enumerate(queries)),
                            1.0)
    stored = dict(state.queries())
    state.close()
    reference = SubscriptionIndex.build(stored.items())
    reflector_of = {sid: n % 2 for n, sid in enumerate(sorted(stored))}  # inserted in order
    articles = []
    for n, text in enumerate(Workload(seed=2).article_texts(400, 61), start=1):
        entry = Entry(key=str(n), title=text[:80], summary=text)
        url = "http://127.0.0.1/f"
        articles.append(Article(entry_id=n, feed_id=1, feed_url=url, feed_title="F",
                                entry=entry, first_seen_at=1.0,
                                tokens=pack_tokens(article_from_entry(entry, url))))
    want = {(a.entry_id, int(s)) for a in articles
            for s in reference.match_entry(a.entry, a.feed_url, tokens=a.tokens)}
    assert len(want) > 1000  # the workload does match
    namespace = f"t{uuid.uuid4().hex[:10]}"
    bus = await JetStreamBus.connect(nats_url, namespace=namespace)
    reflectors = [await bus.consumer(f"matches.{r}", f"reflector-{r}") for r in (0, 1)]
    await (await bus.consumer("articles", "filter-0")).close()  # the group keeps what comes
    for a in articles:  # all on the stream before the process starts: it takes batches
        await bus.publish("articles", encode(a))
    process = start_filter(tmp_path, nats_url, namespace, "0/1")
    try:
        got: list[tuple[int, int]] = []
        seen: list[int] = []
        messages = 0
        for r, consumer in enumerate(reflectors):
            want_here = {(e, s) for e, s in want if reflector_of[s] == r}
            entries_here = {e for e, _ in want_here}
            mine: set[int] = set()
            while mine != entries_here:
                delivery = await consumer.get(30.0)
                assert delivery is not None, f"reflector {r}: {len(mine)} articles came"
                message = decode(delivery.data)
                assert isinstance(message, MatchedBatch)
                messages += 1
                for matched in message.items():
                    ids = decode_ids(matched.sub_ids).tolist()
                    assert all(reflector_of[s] == r for s in ids)
                    mine.add(matched.article.entry_id)
                    seen.append(matched.article.entry_id)
                    got.extend((matched.article.entry_id, s) for s in ids)
                await delivery.ack()
            assert await consumer.get(0.3) is None  # nothing more, nothing doubled
        assert len(got) == len(set(got)) and set(got) == want
        assert messages < len(seen) / 4  # batches, not one message per article
    finally:
        process.send_signal(signal.SIGTERM)
        err = process.communicate(timeout=60)[1]
        await bus.close()
    assert process.returncode == 0 and "Traceback" not in err, err

