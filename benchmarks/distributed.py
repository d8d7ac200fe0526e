"""The hub beyond one machine: what is built of it, measured (docs/distributed.md).

Today: the filter tier's capacity with its subscriptions split over 2 shard processes versus 1
(Cobra's out-decomposition of a filter whose CPU is its limit), each shard a `feedmesh filter`
process on a real NATS JetStream server this benchmark starts, draining a pre-filled `articles`
stream. With n shards every article is matched n times, each time against 1/n of the
subscriptions, on as many cores: the ideal is 2x on this 2-core machine (the NATS server and the
benchmark share the cores). Goal (the distributed-tiers issue): >= 1.7x.

Beside it, the in-decomposition: 2 replica processes of one shard sharing the stream (each
article matched once, against every subscription). Runs alternate 1 shard, 2 shards, 2 replicas,
... on the same stream contents and the same subscriptions (each configuration's index snapshot is built once, then loaded); the figure is the
ratio of the medians. Matches are published to a subject no group reads (the filters alone are
measured: a stream without a group keeps nothing).

    .venv/bin/python benchmarks/distributed.py [--quick] [--subs N] [--articles N] [--runs N]

Not yet measured (not built): the three-mode hub run (embedded, 1+1+1 and 1+2+2 processes over
NATS + PostgreSQL), the kill -9 run's exactly-once check.

Last line: JSON with ``filter_scaling_2v1`` and the figures behind it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.bus.nats_server import LocalNats
from feedmesh.hub.messages import Article, encode
from feedmesh.match.workload import Workload
from feedmesh.model import Entry
from feedmesh.procstat import cpu_seconds
from feedmesh.store.sqlite_hub import SQLiteHubState


def provision(path: Path, subscriptions: int) -> None:
    state = SQLiteHubState(path)
    account, _ = state.create_account("bench", time.time())
    queries = Workload(seed=1).subscriptions(subscriptions)
    state.add_subscriptions(((account.id, "", q, 10, 0) for q in queries), time.time())
    state.close()


async def fill(url: str, namespace: str, shards: int, articles: list[bytes]) -> int:
    bus = await JetStreamBus.connect(url, namespace=namespace,
                                     capacity_bytes=4 * 1024 * 1024 * 1024)
    try:
        for shard in range(shards):  # the groups exist before the articles: they keep them
            await (await bus.consumer("articles", f"filter-{shard}")).close()
        last = 0
        for start in range(0, len(articles), 256):
            seqs = await asyncio.gather(*(bus.publish("articles", data)
                                          for data in articles[start:start + 256]))
            last = max(last, *seqs)
        return last
    finally:
        await bus.close()


async def floors(url: str, namespace: str, shards: int) -> list[int]:
    bus = await JetStreamBus.connect(url, namespace=namespace)
    try:
        await bus.open()
        return [(await bus._js.consumer_info(f"{namespace}_articles", f"filter-{s}"))
                .ack_floor.stream_seq for s in range(shards)]
    finally:
        await bus.close()


async def drained(url: str, namespace: str, last: int, timeout: float) -> bool:
    bus = await JetStreamBus.connect(url, namespace=namespace)
    try:
        return await bus.wait_acked("articles", last, timeout=timeout)
    finally:
        await bus.close()


def run_once(work: Path, url: str, shards: int, articles: list[bytes], replicas: int = 1) -> dict:
    """``shards`` processes each holding 1/shards of the subscriptions (every one sees every
    article), or ``replicas`` processes of one shard sharing the article stream."""
    namespace = f"bench{uuid.uuid4().hex[:8]}"
    last = asyncio.run(fill(url, namespace, shards, articles))
    processes = []
    for shard in [s for s in range(shards) for _ in range(replicas)]:
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "feedmesh", "filter", "--bus", url, "--bus-namespace",
             namespace, "--state", str(work / "hub.db"), "--shard", f"{shard}/{shards}",
             "--data", str(work / f"shards-{shards}"), "--log-level", "warning"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True))
    try:
        for process in processes:
            line = process.stderr.readline()
            if not line.startswith("feedmesh filter shard"):
                raise RuntimeError(f"filter did not start: {line}{process.stderr.read()}")
        started = time.perf_counter()
        cpu0 = [cpu_seconds(p.pid) for p in processes]
        done_before = min(asyncio.run(floors(url, namespace, shards)))
        if not asyncio.run(drained(url, namespace, last, timeout=3600)):
            raise RuntimeError("the filters did not drain the stream within an hour")
        elapsed = time.perf_counter() - started
        cpu = [cpu_seconds(p.pid) - c for p, c in zip(processes, cpu0, strict=True)]
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.communicate(timeout=120)
    matched = last - done_before
    return {"shards": shards, "replicas": replicas, "articles": matched,
            "seconds": round(elapsed, 2),
            "articles_per_s": round(matched / elapsed, 1),
            "cpu_s_per_process": [round(c, 1) for c in cpu]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="100k subscriptions, 4,000 articles, 2 runs each")
    parser.add_argument("--subs", type=int, default=1_000_000)
    parser.add_argument("--articles", type=int, default=20_000)
    parser.add_argument("--words", type=int, default=637,
                        help="words per article (the matcher benchmark's middle size)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each configuration")
    args = parser.parse_args()
    if args.quick:
        args.subs, args.articles, args.runs = 100_000, 4_000, 2
    with tempfile.TemporaryDirectory() as tmp, LocalNats(Path(tmp) / "nats") as nats:
        work = Path(tmp)
        started = time.perf_counter()
        provision(work / "hub.db", args.subs)
        print(f"{args.subs:,} subscriptions provisioned in {time.perf_counter() - started:.0f} s",
              flush=True)
        texts = Workload(seed=2).article_texts(args.articles, args.words)
        articles = [encode(Article(entry_id=n, feed_id=1 + n % 1000,
                                   feed_url=f"http://127.0.0.1/f{n % 1000}", feed_title="bench",
                                   entry=Entry(key=str(n), title=text[:80], summary=text),
                                   first_seen_at=time.time()))
                    for n, text in enumerate(texts, start=1)]
        configurations = {"1 shard": (1, 1), "2 shards": (2, 1), "2 replicas": (1, 2)}
        runs: dict[str, list[dict]] = {name: [] for name in configurations}
        for shards in (1, 2):  # build each configuration's snapshots outside the measurement
            print(f"warming {shards} shard(s) (index snapshots)", flush=True)
            run_once(work, nats.url, shards, articles[:200])
        for _ in range(args.runs):
            for name, (shards, replicas) in configurations.items():
                result = run_once(work, nats.url, shards, articles, replicas)
                runs[name].append(result)
                print(f"  {name:10}: {result['articles_per_s']:>8,.0f} articles/s "
                      f"({result['articles']:,} in {result['seconds']} s, CPU s per process "
                      f"{result['cpu_s_per_process']})", flush=True)
    rate = {name: statistics.median(r["articles_per_s"] for r in found)
            for name, found in runs.items()}
    one, two, pair = rate["1 shard"], rate["2 shards"], rate["2 replicas"]
    print(f"filter tier, {args.subs:,} subscriptions, {args.words}-word articles: 1 shard "
          f"{one:,.0f}/s; 2 shards (out-decomposition) {two:,.0f}/s = {two / one:.2f}x (goal "
          f">= 1.7); 2 replicas of one shard (in-decomposition) {pair:,.0f}/s = {pair / one:.2f}x")
    print(json.dumps({"filter_scaling_2v1": round(two / one, 2),
                      "filter_replicas_2v1": round(pair / one, 2),
                      "filter_1_shard_articles_per_s": one, "filter_2_shards_articles_per_s": two,
                      "filter_2_replicas_articles_per_s": pair,
                      "subscriptions": args.subs, "articles": args.articles,
                      "words_per_article": args.words, "runs": runs}))


if __name__ == "__main__":
    main()
