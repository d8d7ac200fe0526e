"""Benchmark the subscription index against Cobra's figures (section 3.2, Figure 10).

For each number of subscriptions (default 100k and 1M; ``--ten-million`` adds 10M), on a seeded
Cobra-style workload (:mod:`feedmesh.match.workload`):

* build: from query text (parse + compile + vectorized build), and restore from the stored snapshot
  (what the hub does at start-up), both per million subscriptions;
* memory: the index arrays, the term dictionary, and the process RSS;
* matching, article by article on one thread, for 61, 637 and 2,000 words (tokenization included):
  p50/p90 wall-clock and CPU time, articles/s, matches per article;
* the naive linear scan (every subscription's word list checked against the article, as Cobra's
  baseline) on the same articles, with the speed-up ratio; its results must equal the index's.

The machine is shared (2 cores), so CPU time (``time.thread_time``) is printed beside wall time,
with the load average. Prints a table per size and, as its LAST line, one JSON object: the figures
of the largest size at top level, and every size under ``runs``.

    .venv/bin/python benchmarks/match.py                      # 100k and 1M
    .venv/bin/python benchmarks/match.py --subs 1000000       # one size
    .venv/bin/python benchmarks/match.py --ten-million        # 100k, 1M and 10M
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time

import numpy as np

from feedmesh.match import Article, parse_query, tokenize_article
from feedmesh.match.index import IndexSettings, SubscriptionIndex, warm_up
from feedmesh.match.workload import ARTICLE_SIZES, Workload

ARTICLE_COUNTS = {61: 400, 637: 150, 2000: 60}


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load_average() -> float:
    return os.getloadavg()[0]


def time_matches(index: SubscriptionIndex, articles: list[Article]) -> dict[str, float]:
    for article in articles[:5]:  # warm caches (and the JIT) before measuring
        index.match(article, observe=False)
    gc.collect()
    walls, cpus, matches = [], [], []
    started = time.perf_counter()
    for article in articles:
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        result = index.match(article, observe=False)
        cpus.append((time.thread_time_ns() - cpu) / 1e6)
        walls.append((time.perf_counter_ns() - wall) / 1e6)
        matches.append(len(result))
    elapsed = time.perf_counter() - started
    return {
        "p50_ms": float(np.percentile(walls, 50)),
        "p90_ms": float(np.percentile(walls, 90)),
        "p50_cpu_ms": float(np.percentile(cpus, 50)),
        "p90_cpu_ms": float(np.percentile(cpus, 90)),
        "articles_per_s": len(articles) / elapsed,
        "articles_per_cpu_s": len(articles) / (sum(cpus) / 1e3),
        "matches": float(np.median(matches)),
    }


def naive_scan(word_lists: list[tuple[str, ...]], articles: list[Article],
               index: SubscriptionIndex) -> float:
    """Milliseconds per article for the linear scan; checks its answers against the index."""
    per_article = []
    for article in articles:
        started = time.perf_counter()
        words = tokenize_article(article).token_set("text")
        found = [sub for sub, query in enumerate(word_lists) if all(w in words for w in query)]
        per_article.append((time.perf_counter() - started) * 1e3)
        if found != index.match(article, observe=False).tolist():
            raise SystemExit("naive scan and index disagree: this is a bug")
    return float(np.median(per_article))


def run(subscriptions: int, args: argparse.Namespace, workload: Workload) -> dict[str, float]:
    print(f"\n== {subscriptions:,} subscriptions ({args.variant}), "
          f"load average {load_average():.1f}")
    started = time.perf_counter()
    texts = workload.subscriptions(subscriptions, args.variant)
    generate_s = time.perf_counter() - started

    gc.collect()
    started = time.perf_counter()
    index = SubscriptionIndex.build(enumerate(texts), IndexSettings(backend=args.backend))
    build_s = time.perf_counter() - started
    snapshot = index.to_bytes()
    started = time.perf_counter()
    index = SubscriptionIndex.from_bytes(snapshot, IndexSettings(backend=args.backend))
    restore_s = time.perf_counter() - started
    stats = index.stats()
    per_million = 1e6 / subscriptions
    figures: dict[str, float] = {
        "subs": subscriptions,
        "generate_s": generate_s,
        "build_s": build_s,
        "build_s_per_million": build_s * per_million,
        "restore_s": restore_s,
        "restore_s_per_million": restore_s * per_million,
        "snapshot_mb": len(snapshot) / 2**20,
        "conjunctions": stats.conjunctions,
        "terms": stats.terms,
        "index_mb": stats.index_bytes / 2**20,
        "index_mb_per_million": stats.index_bytes / 2**20 * per_million,
        "vocabulary_mb": stats.vocabulary_bytes / 2**20,
        "rss_mb": rss_mb(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    del snapshot
    for size in ARTICLE_SIZES:
        articles = workload.articles(ARTICLE_COUNTS[size] // args.fewer, size, args.variant,
                                     stream=1)
        for name, value in time_matches(index, articles).items():
            figures[f"{name}_{size}"] = value

    if args.variant == "conjunctive" and args.naive_articles:
        word_lists = [tuple(sorted(set(text.lower().split()))) for text in texts]
        naive_articles = workload.articles(args.naive_articles, 61, args.variant, stream=1)
        figures["naive_ms_61"] = naive_scan(word_lists, naive_articles, index)
        figures["speedup_61"] = figures["naive_ms_61"] / figures["p50_ms_61"]
        del word_lists
    figures["load_average"] = load_average()
    print_table(figures)
    return figures


def print_table(f: dict[str, float]) -> None:
    print(f"build from text   {f['build_s']:8.2f} s   ({f['build_s_per_million']:.2f} s per 1M)")
    print(f"restore snapshot  {f['restore_s']:8.3f} s   ({f['restore_s_per_million']:.3f} s per 1M,"
          f" {f['snapshot_mb']:.1f} MB)")
    print(f"index arrays      {f['index_mb']:8.1f} MB  ({f['index_mb_per_million']:.1f} MB per 1M;"
          f" term dictionary {f['vocabulary_mb']:.1f} MB, {f['terms']:,} terms,"
          f" {f['conjunctions']:,} conjunctions)")
    print(f"process RSS       {f['rss_mb']:8.0f} MB  (peak {f['peak_rss_mb']:.0f} MB)")
    print(f"{'words':>6} {'p50 ms':>8} {'p90 ms':>8} {'p50 cpu':>8} {'p90 cpu':>8}"
          f" {'art/s':>8} {'art/cpu-s':>9} {'matches':>9}")
    for size in ARTICLE_SIZES:
        print(f"{size:>6} {f[f'p50_ms_{size}']:8.3f} {f[f'p90_ms_{size}']:8.3f}"
              f" {f[f'p50_cpu_ms_{size}']:8.3f} {f[f'p90_cpu_ms_{size}']:8.3f}"
              f" {f[f'articles_per_s_{size}']:8.0f} {f[f'articles_per_cpu_s_{size}']:9.0f}"
              f" {f[f'matches_{size}']:9.0f}")
    if "naive_ms_61" in f:
        print(f"naive scan, 61 words: {f['naive_ms_61']:.0f} ms per article;"
              f" index is {f['speedup_61']:,.0f}x faster (p50)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subs", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--ten-million", action="store_true", help="also run 10M subscriptions")
    parser.add_argument("--variant", choices=["conjunctive", "mixed"], default="conjunctive")
    parser.add_argument("--backend", default="auto", help="numba, numpy or auto")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--naive-articles", type=int, default=3,
                        help="articles for the naive scan (0 to skip)")
    parser.add_argument("--fewer", type=int, default=1,
                        help="divide the article counts (quick runs)")
    args = parser.parse_args()
    sizes = sorted(set(args.subs + ([10_000_000] if args.ten_million else [])))

    backend = args.backend if args.backend != "auto" else SubscriptionIndex().backend
    jit_s = warm_up(backend)
    print(f"backend {backend}; first kernel call (compile or load from cache) {jit_s:.2f} s;"
          f" python {sys.version.split()[0]}, numpy {np.__version__}")
    workload = Workload(seed=args.seed)
    parse_query("warm up")  # the tokenizer's tables, outside the measurements
    runs = [run(size, args, workload) for size in sizes]
    summary = {**runs[-1], "backend": backend, "jit_first_call_s": jit_s, "variant": args.variant,
               "runs": runs}
    print(json.dumps(summary, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
