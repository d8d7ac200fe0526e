"""The hub beyond one machine, measured (docs/distributed.md; the distributed-tiers issue).

1. **Three modes** on ``benchmarks/hub.py``'s workload (case (b): 100k feeds, 1M subscriptions;
   ``--quick``: case (a), 10k feeds, 100k subscriptions), the same farm speed and crawl budget in
   each: ``embedded`` (``feedmesh serve``: one process, SQLite, the in-process bus; exactly
   ``hub.run_case``), ``nats_111`` (1 crawler + 1 filter + 1 reflector processes, and a web
   process, over NATS JetStream + PostgreSQL) and ``nats_122`` (1 crawler + 2 filters + 2
   reflectors): articles/s, intra-hub latency p50/p99, per-process CPU and RSS, bus bytes/s,
   PostgreSQL commits/s, private feeds served 200/304 per s (``benchmarks/topology.py``).
2. **The filter tier's capacity**, 2 shard processes versus 1 (Cobra's out-decomposition of a
   filter whose CPU is its limit), each a ``feedmesh filter`` process on a real NATS server,
   draining a pre-filled ``articles`` stream; beside it 2 replicas of one shard (the
   in-decomposition). Runs alternate 1 shard, 2 shards, 2 replicas on the same stream contents;
   the figure is the ratio of the medians. Goal: >= 1.7x on this 2-core machine at 10M
   subscriptions (``filter_scaling_2v1_10m``, ``--subs 10000000``). Beside it, in the same run,
   the bare matcher on the same articles (the shard's own snapshot in this process):
   ``filter_articles_per_s_1m`` (1 shard) against ``matcher_articles_per_s_1m``, goal >= 4,500
   articles/s (half the matcher) with 61-word articles, the default (``--words 637``: the
   earlier figures). Each key's suffix is the subscriptions measured (``_1m``, ``_10m``).
3. **The kill runs**: ``tests/hub/test_distributed_faults.py``'s topology (crawler, 2 filters, 2
   reflectors) killed with SIGKILL 10+ times and started again by the test, checked by an
   offline re-match: entries lost and doubled (``kill_lost``, ``kill_duplicated``); then the
   same under ``feedmesh up``, which starts each killed role again by itself
   (``benchmarks/up_kills.py``): ``kill_restart_s`` (median seconds from a kill to the role
   serving again), ``kill_web_errors`` (a poller's requests to private feeds that got no HTTP
   answer during the kills; 503s apart as ``kill_web_503``), ``up_kill_lost``,
   ``up_kill_duplicated``; and ``up --nats-cluster 3`` losing the node that leads the articles
   stream: ``nats_node_kill_lost``, ``nats_node_kill_duplicated``. ``--kills``: these runs
   alone.
4. **The crawl ceiling** (``--ceiling default`` or ``--ceiling 500,1000``): each mode's highest
   fetch rate held with p99 <= 1 s, the crawl interval shortened step by step on case (a)
   (``<mode>_ceiling_fetches_per_s``).

    .venv/bin/python benchmarks/distributed.py [--quick] [--skip modes,filters,kills] [--ceiling R]
    .venv/bin/python benchmarks/distributed.py --kills [--quick]   # the kill runs alone
    .venv/bin/python benchmarks/distributed.py --calibration   # the provisioner's model, 8 min

Last line: JSON with, per mode, ``<mode>_articles_per_s``, ``<mode>_p50_ms``, ``<mode>_p99_ms``,
``<mode>_rss_mb``; ``filter_scaling_2v1``, ``kill_lost``, ``kill_duplicated``,
``kill_restart_s``, ``kill_web_errors``, ``kill_web_503``; and the figures behind them.
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
from feedmesh.match import article_from_entry
from feedmesh.match.packed import pack_tokens
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
    # Room for every article twice: a stream's bound is reserved on the server's disk.
    room = max(64 * 1024 * 1024, 2 * sum(len(data) for data in articles))
    bus = await JetStreamBus.connect(url, namespace=namespace, capacity_bytes=room)
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


async def forget(url: str, namespace: str) -> None:
    """Delete a run's streams: their reserved bytes would fill the server's disk otherwise."""
    bus = await JetStreamBus.connect(url, namespace=namespace)
    try:
        for info in await bus._js.streams_info():
            if info.config.name.startswith(f"{namespace}_"):
                await bus._js.delete_stream(info.config.name)
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


def run_once(work: Path, url: str, shards: int, articles: list[bytes], replicas: int = 1,
             profile: Path | None = None) -> dict:
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
        spy = str(Path(sys.executable).parent / "py-spy")
        spies = [subprocess.Popen(
            [spy, "record", "--pid", str(p.pid), "--rate", "200", "--format", "raw",
             "--output", str(profile.with_name(f"{profile.name}-{n}.txt")), "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for n, p in enumerate(processes)] if profile is not None else []
        done_before = min(asyncio.run(floors(url, namespace, shards)))
        if not asyncio.run(drained(url, namespace, last, timeout=3600)):
            raise RuntimeError("the filters did not drain the stream within an hour")
        elapsed = time.perf_counter() - started
        cpu = [cpu_seconds(p.pid) - c for p, c in zip(processes, cpu0, strict=True)]
        for spy in spies:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.communicate(timeout=120)
        asyncio.run(forget(url, namespace))
    matched = last - done_before
    return {"shards": shards, "replicas": replicas, "articles": matched,
            "seconds": round(elapsed, 2),
            "articles_per_s": round(matched / elapsed, 1),
            "cpu_s_per_process": [round(c, 1) for c in cpu],
            "cpu_ms_per_article_per_process": [round(1000 * c / max(1, matched), 3)
                                               for c in cpu]}


FORMS = ("packed", "entry")
"""How the articles are published: ``packed`` with their tokens (what the crawler sends since
the filters stopped tokenizing), ``entry`` the entry alone (an older crawler's form, each filter
tokenizes): the second is the same run's baseline."""


def article_bytes(texts: list[str], form: str) -> list[bytes]:
    articles = []
    for n, text in enumerate(texts, start=1):
        url = f"http://127.0.0.1/f{n % 1000}"
        entry = Entry(key=str(n), title=text[:80], summary=text)
        tokens = pack_tokens(article_from_entry(entry, url)) if form == "packed" else None
        articles.append(encode(Article(entry_id=n, feed_id=1 + n % 1000, feed_url=url,
                                       feed_title="bench", entry=entry,
                                       first_seen_at=time.time(), tokens=tokens)))
    return articles


def bare_matcher(snapshot: Path, articles: list[bytes], runs: int = 3) -> dict:
    """The same run's baseline: the shard's own index (the snapshot the filter maps) matching
    the same articles in this process, decoded beforehand, no bus: articles per CPU second,
    the median of ``runs`` passes."""
    from feedmesh.hub.messages import decode
    from feedmesh.match import SubscriptionIndex

    index = SubscriptionIndex.from_bytes(snapshot.read_bytes())
    decoded = [decode(data) for data in articles]
    rates, matches = [], 0
    for _ in range(runs):
        started = time.process_time()
        matches = 0
        for a in decoded:
            matches += len(index.match_entry(a.entry, a.feed_url, a.feed_language, a.tokens))
        rates.append(len(decoded) / (time.process_time() - started))
    return {"articles_per_s": round(statistics.median(rates), 1),
            "matches_per_article": round(matches / max(1, len(decoded)), 1)}


def size_suffix(subs: int) -> str:
    """``1m`` for a million subscriptions, ``10m``, ``100k``: the keys' suffix."""
    return f"{subs // 1_000_000}m" if subs % 1_000_000 == 0 else f"{subs // 1000}k"


def filter_scaling(subs: int, article_count: int, words: int, runs_each: int,
                   forms: tuple[str, ...] = FORMS, profile: Path | None = None,
                   replicas: bool = True) -> dict:
    with tempfile.TemporaryDirectory() as tmp, LocalNats(Path(tmp) / "nats") as nats:
        work = Path(tmp)
        started = time.perf_counter()
        provision(work / "hub.db", subs)
        provisioned_s = time.perf_counter() - started
        print(f"{subs:,} subscriptions provisioned in {provisioned_s:.0f} s", flush=True)
        texts = Workload(seed=2).article_texts(article_count, words)
        published = {form: article_bytes(texts, form) for form in forms}
        configurations = {"1 shard": (1, 1), "2 shards": (2, 1), "2 replicas": (1, 2)}
        if not replicas:
            del configurations["2 replicas"]
        names = [(form, name) for form in forms for name in configurations
                 if form == forms[0] or name != "2 replicas"]
        runs: dict[str, list[dict]] = {f"{name} ({form})": [] for form, name in names}
        snapshots: dict[int, float] = {}
        for shards in (1, 2):  # build each configuration's snapshots outside the measurement
            print(f"warming {shards} shard(s) (index snapshots)", flush=True)
            began = time.perf_counter()
            run_once(work, nats.url, shards, published[forms[0]][:200])
            snapshots[shards] = round(time.perf_counter() - began, 1)
        matcher = bare_matcher(work / "shards-1" / "filter-0-of-1.index", published[forms[0]])
        print(f"bare matcher, same articles ({forms[0]}), this process: "
              f"{matcher['articles_per_s']:,.0f} articles/s of CPU, "
              f"{matcher['matches_per_article']:,.0f} matches per article", flush=True)
        for run in range(runs_each):
            for form, name in names:
                shards, replicas = configurations[name]
                spy = (profile.with_name(f"{profile.name}-{name.replace(' ', '')}-{form}")
                       if profile is not None and run == runs_each - 1 else None)
                result = run_once(work, nats.url, shards, published[form], replicas, spy)
                runs[f"{name} ({form})"].append(result)
                print(f"  {name:10} ({form:6}): {result['articles_per_s']:>8,.0f} articles/s "
                      f"({result['articles']:,} in {result['seconds']} s, CPU ms per article "
                      f"per process {result['cpu_ms_per_article_per_process']})", flush=True)
        print(f"\n{len(texts):,} articles of {words} words, {subs:,} subscriptions, medians of "
              f"{runs_each} runs")
        print(f"{'configuration':28} {'articles/s':>10} {'vs 1 shard':>10}  CPU ms per article "
              "per process (median)")
    rate = {key: statistics.median(r["articles_per_s"] for r in found)
            for key, found in runs.items()}
    cpu = {key: [round(statistics.median(r["cpu_ms_per_article_per_process"][p] for r in found),
                       3) for p in range(len(found[0]["cpu_ms_per_article_per_process"]))]
           for key, found in runs.items()}
    for key in runs:
        one = rate[f"1 shard ({key.split('(')[1]}"]
        print(f"{key:28} {rate[key]:>10,.0f} {rate[key] / one:>9.2f}x  {cpu[key]}")
    form = forms[0]
    one, two = (rate[f"{n} ({form})"] for n in ("1 shard", "2 shards"))
    pair = rate.get(f"2 replicas ({form})")
    size = size_suffix(subs)
    print(f"filter tier ({form} articles, {words} words, {subs:,} subscriptions): 1 shard "
          f"{one:,.0f} articles/s, the bare matcher {matcher['articles_per_s']:,.0f} "
          f"({one / matcher['articles_per_s']:.2f} of it; goal >= 4,500/s at 1M, 61 words); "
          f"2 shards (out-decomposition) {two / one:.2f}x 1 shard (goal >= 1.7 at 10M)"
          + (f"; 2 replicas of one shard (in-decomposition) {pair / one:.2f}x" if pair else ""),
          flush=True)
    figures = {"filter_scaling_2v1": round(two / one, 2),
               f"filter_scaling_2v1_{size}": round(two / one, 2),
               f"filter_articles_per_s_{size}": one,
               f"matcher_articles_per_s_{size}": matcher["articles_per_s"],
               f"filter_vs_matcher_{size}": round(one / matcher["articles_per_s"], 3),
               "matcher_matches_per_article": matcher["matches_per_article"],
               "filter_provision_s": round(provisioned_s, 1),
               "filter_snapshot_warm_s": snapshots,
               "filter_1_shard_articles_per_s": one, "filter_2_shards_articles_per_s": two,
               "filter_article_form": form,
               "filter_cpu_ms_per_article": cpu, "filter_articles_per_s": rate,
               "filter_subscriptions": subs, "filter_articles": article_count,
               "words_per_article": words, "filter_runs": runs}
    if pair:
        figures |= {"filter_replicas_2v1": round(pair / one, 2),
                    "filter_2_replicas_articles_per_s": pair}
    for other in forms[1:]:
        base = rate[f"1 shard ({other})"]
        figures[f"filter_scaling_2v1_{other}"] = round(rate[f"2 shards ({other})"] / base, 2)
        figures[f"filter_1_shard_{form}_vs_{other}"] = round(one / base, 2)
    return figures


def kill_run() -> dict:
    """The fault test's topology and schedule, run here for its figures."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package
    from tests.hub.test_distributed_faults import kill_at_random, run_topology

    with tempfile.TemporaryDirectory() as tmp, LocalNats(Path(tmp) / "nats") as nats:
        lost, duplicated, expected, done = asyncio.run(
            run_topology(Path(tmp), nats.url, kill_at_random))
    print(f"kill run: {len(done)} kills ({', '.join(done)}); {expected} entry-subscription "
          f"pairs expected; lost {lost}, doubled {duplicated}", flush=True)
    return {"kill_lost": lost, "kill_duplicated": duplicated, "kill_pairs": expected,
            "kills": len(done)}


def modes(quick: bool, window: float) -> dict:
    import topology

    import hub

    case = "a" if quick else "b"
    feeds, subs, speed, interval = hub.CASES[case]
    embedded = hub.run_case(case, feeds, subs, speed, interval, window, "ids", "memory")
    results = {"embedded": {"articles_per_s": embedded["articles_per_s"],
                            "latency_p50_ms": embedded["latency_p50_ms"],
                            "latency_p99_ms": embedded["latency_p99_ms"],
                            "rss_mb": embedded["hub_rss_mb"],
                            "feed_200_per_s": embedded["feed_200_per_s"],
                            "feed_304_per_s": embedded["feed_304_per_s"]}}
    for name, filters, reflectors in (("nats_111", 1, 1), ("nats_122", 2, 2)):
        results[name] = topology.run_mode(name, feeds, subs, speed, interval, window, filters,
                                          reflectors)
    print(f"\ncase ({case}): {feeds:,} feeds, {subs:,} subscriptions, farm x{speed:g}, crawl "
          f"every {interval:g} s in every mode")
    print(f"{'mode':9} {'art/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'RSS MB':>7} {'200/s':>6} "
          f"{'304/s':>6}  per process (CPU %, RSS MB)")
    for name, r in results.items():
        per = ", ".join(f"{p} {v['cpu_pct']:.0f}%/{v['rss_mb']:.0f}"
                        for p, v in r.get("processes", {}).items())
        print(f"{name:9} {r['articles_per_s']:>7.0f} {r['latency_p50_ms'] or 0:>8.1f} "
              f"{r['latency_p99_ms'] or 0:>8.1f} {r['rss_mb']:>7.0f} {r['feed_200_per_s']:>6} "
              f"{r['feed_304_per_s']:>6}  {per}")
    print("goals (nats modes): >= 200 articles/s, p50 <= 150 ms, p99 <= 1,000 ms, feeds served "
          "no worse than embedded")
    figures: dict = {"case": case}
    for name, r in results.items():
        figures[f"{name}_articles_per_s"] = r["articles_per_s"]
        figures[f"{name}_p50_ms"] = r["latency_p50_ms"]
        figures[f"{name}_p99_ms"] = r["latency_p99_ms"]
        figures[f"{name}_rss_mb"] = r["rss_mb"]
    figures["modes"] = results
    return figures


CALIBRATION = {"feeds": (4000, 1000), "subs": 100_000, "interval": 20.0, "speed": 900.0 / 20.0}
"""The separate processes' model measured on its own workload (``--calibration``): each crawl
spans Cobra's 15 farm minutes, so most fetches find nothing new (0.05 articles per fetch, as in
``crawl_bandwidth.py``), and one crawler fetches 200 feeds a second, then 50: the rates a
process of a plan runs at (Figure 2's 800,000 feeds every 15 minutes are 44 articles a second
for the whole hub), not case (a)'s 500 fetches and 246 articles a second in one process, where
batching makes each unit of work cheaper. Two rates, so that each role's CPU is a line (a
working process's fixed part, and a part per unit of work) fitted through measurements rather
than an idle process's CPU plus one ratio. ``hub.py``'s farm and subscriptions, the filters'
``article`` delivery (the reflector re-matches: Cobra's final design, which the model
describes)."""


def calibration(window: float) -> dict:
    import topology

    c = CALIBRATION
    modes = {}
    for name, feeds in zip(("nats_111", "nats_111_low"), c["feeds"], strict=True):
        run = topology.run_mode("nats_111", feeds, c["subs"], c["speed"], c["interval"],
                                window, 1, 1, delivery="article")
        run["workload"] = "model"
        modes[name] = run
    return {"modes": modes}


CEILING_RATES = (500, 1000, 1500, 2000, 3000)
"""Fetch rates tried for the ceiling, per second: case (a)'s 10,000 feeds crawled every 20 s
(its own rate; case (b)'s is 100,000 feeds every 300 s, 333 per second) down to every 3.3 s."""


def ceiling(window: float, rates: tuple[int, ...]) -> dict:
    """Each mode's crawl ceiling: the highest fetch rate it sustains (at least 95% of the rate
    asked, every fetch's state stored, intra-hub latency p99 <= 1 s), on case (a)'s feeds,
    subscriptions and farm (so the articles per second stay those of case (a): only the crawl
    quickens), the crawl interval shortened step by step until a step fails."""
    import topology

    import hub

    feeds, subs, speed, _ = hub.CASES["a"]
    figures: dict = {}
    for mode in ("embedded", "nats_111", "nats_122"):
        steps, best = [], 0.0
        for rate in rates:
            interval = feeds / rate
            if mode == "embedded":
                r = hub.run_case("a", feeds, subs, speed, interval, window, "ids", "memory",
                                 serve_feeds=False)
            else:
                shards = 1 if mode == "nats_111" else 2
                r = topology.run_mode(mode, feeds, subs, speed, interval, window, shards, shards,
                                      serve_feeds=False)
            p99 = r["latency_p99_ms"]
            held = r["fetches_per_s"] >= 0.95 * rate and p99 is not None and p99 <= 1000
            steps.append({"asked_per_s": rate, "fetches_per_s": r["fetches_per_s"],
                          "p99_ms": p99, "articles_per_s": r["articles_per_s"], "held": held})
            print(f"  {mode}: asked {rate:,}/s, fetched {r['fetches_per_s']:,.0f}/s, p99 "
                  f"{p99} ms: {'held' if held else 'not held'}", flush=True)
            if not held:
                break
            best = r["fetches_per_s"]
        figures[f"{mode}_ceiling_fetches_per_s"] = best
        figures[f"{mode}_ceiling_steps"] = steps
    print("crawl ceiling (fetches/s held with p99 <= 1 s): " + ", ".join(
        f"{m} {figures[f'{m}_ceiling_fetches_per_s']:,.0f}"
        for m in ("embedded", "nats_111", "nats_122")), flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="case (a) for the modes; 100k subscriptions, 4,000 articles, 2 "
                        "runs each for the filter tier")
    parser.add_argument("--window", type=float, default=60.0,
                        help="seconds measured per mode (whole crawl intervals)")
    parser.add_argument("--skip", default="", help="parts not to run: modes,filters,kills")
    parser.add_argument("--kills", action="store_true",
                        help="only the kill runs: the test's topology, then under `feedmesh "
                        "up`'s supervision (with --quick: 6 kills on 20 feeds, else 12 on 30)")
    parser.add_argument("--ceiling", default="", metavar="RATES",
                        help="also find each mode's crawl ceiling, trying these fetch rates "
                        "per second in turn (comma-separated; 'default' for "
                        f"{','.join(map(str, CEILING_RATES))}); about 3 minutes a step")
    parser.add_argument("--calibration", action="store_true",
                        help="only the 1+1+1 processes on the provisioner's workload (200 "
                        "then 50 fetches/s, 15 farm minutes a crawl, article delivery): what "
                        "`feedmesh provision calibrate --distributed` reads (~8 minutes)")
    parser.add_argument("--subs", type=int, default=1_000_000)
    parser.add_argument("--articles", type=int, default=20_000)
    parser.add_argument("--words", type=int, default=61,
                        help="words per article: 61, the size of benchmarks/match.py's "
                        "figure at 1M (filter_articles_per_s_1m); 637 for the figures "
                        "measured before issue 34 (the matcher benchmark's middle size)")
    parser.add_argument("--no-replicas", action="store_true",
                        help="the filter tier without the 2-replica configuration")
    parser.add_argument("--runs", type=int, default=3, help="runs of each filter configuration")
    parser.add_argument("--forms", default=",".join(FORMS),
                        help="article forms for the filter tier, the first measured in every "
                        "configuration, the others as its baseline (1 and 2 shards): "
                        "packed,entry")
    parser.add_argument("--profile", type=Path, default=None, metavar="PREFIX",
                        help="record each filter process with py-spy (raw stacks) in the last "
                        "run of each configuration, into PREFIX-<configuration>-<form>-<n>.txt")
    args = parser.parse_args()
    skip = {part.strip() for part in args.skip.split(",") if part.strip()}
    if args.kills:
        skip |= {"modes", "filters"}
    if args.quick:
        args.subs, args.articles, args.runs = 100_000, 4_000, 2
        args.window = min(args.window, 40.0)
    figures: dict = {}
    if args.calibration:
        print(json.dumps(calibration(max(args.window, 60.0))))
        return
    if "modes" not in skip:
        figures |= modes(args.quick, args.window)
    if "filters" not in skip:
        forms = tuple(form.strip() for form in args.forms.split(",") if form.strip())
        if not forms or set(forms) - set(FORMS):
            parser.error(f"--forms: choose among {', '.join(FORMS)}")
        figures |= filter_scaling(args.subs, args.articles, args.words, args.runs, forms,
                                  args.profile, replicas=not args.no_replicas)
    if "kills" not in skip:
        from up_kills import nats_node_kill_run, supervised_kill_run

        figures |= kill_run()
        figures |= (supervised_kill_run(kills=6, feeds=20) if args.quick
                    else supervised_kill_run(kills=12, feeds=30))
        figures |= nats_node_kill_run(feeds=20 if args.quick else 30)
    if args.ceiling:
        rates = (CEILING_RATES if args.ceiling == "default"
                 else tuple(int(r) for r in args.ceiling.split(",")))
        figures |= ceiling(min(args.window, 40.0), rates)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
