"""What rendering a private feed costs, with and without the per-entry cache (``RenderedItems``).

A hub serves (and pushes) many private feeds whose entries overlap: an article that matches a
thousand subscriptions is in a thousand feeds. This benchmark builds ``--entries`` articles of a
realistic size (a title, a link, a 600-byte summary, a source), then ``--feeds`` feeds of
``--size`` entries each drawn from them at random, and renders every feed in each format served
(RSS 2.0, Atom, JSON Feed) twice per round: whole (``render_private_feed`` without a cache, as
before) and through one shared ``RenderedItems``. A feed rendered through the cache is checked to
be the same bytes as the whole render. The cache starts empty each round, so its misses are
counted in its time. Medians over ``--rounds`` rounds, the two ways alternating.

    PYTHONPATH=src .venv/bin/python benchmarks/render_private.py [--feeds 2000] [--rounds 5]

Last line: JSON with ``<format>_us_whole``, ``<format>_us_cached`` and ``<format>_ratio`` per
format (microseconds per feed rendered), and ``hit_rate``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from datetime import UTC, datetime

from feedmesh.hub.front.feed_document import EXTENSIONS, RenderedItems, render_private_feed
from feedmesh.model import Entry
from feedmesh.store import ReflectedItem, Subscription

WORDS = ["market", "election", "storm", "league", "court", "vaccine", "budget", "rocket", "river",
         "museum", "festival", "senate", "harbour", "climate", "airline", "bridge", "orchestra",
         "glacier", "satellite", "harvest"]


def articles(count: int, rng: random.Random) -> list[ReflectedItem]:
    out = []
    for n in range(count):
        title = " ".join(rng.choice(WORDS) for _ in range(8)).capitalize()
        summary = "<p>" + " ".join(rng.choice(WORDS) for _ in range(80)) + " &amp; more</p>"
        entry = Entry(key=f"k{n}", guid=f"urn:feedmesh:bench:{n}", title=title,
                      link=f"http://news{n % 50}.example.org/story/{n}",
                      published=datetime.fromtimestamp(1.7e9 + n * 7, UTC), summary=summary)
        out.append(ReflectedItem(entry_id=n, feed_id=n % 50,
                                 feed_url=f"http://news{n % 50}.example.org/feed.xml",
                                 feed_title=f"News {n % 50}", first_seen_at=1.7e9 + n * 7,
                                 stored_at=1.7e9 + n * 7, entry=entry))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=500, help="articles to draw from")
    parser.add_argument("--feeds", type=int, default=2000, help="private feeds per round")
    parser.add_argument("--size", type=int, default=10, help="entries per feed (its keep)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    pool = articles(args.entries, rng)
    feeds = [sorted(rng.sample(pool, args.size), key=lambda i: -i.stored_at)
             for _ in range(args.feeds)]
    subs = [Subscription(id=i, account_id=i, name="", query="market OR storm", keep=args.size,
                         reflector=0, generation=0, created_at=0.0, changed_at=0.0)
            for i in range(args.feeds)]
    figures: dict[str, float] = {}
    hits = misses = 0
    for fmt in EXTENSIONS.values():
        whole_us: list[float] = []
        cached_us: list[float] = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            plain = [render_private_feed(sub, items, fmt, base_url="http://hub.test",
                                         self_url=f"http://hub.test/f/{sub.id}")
                     for sub, items in zip(subs, feeds, strict=True)]
            whole_us.append((time.perf_counter() - started) / args.feeds * 1e6)
            cache = RenderedItems()
            started = time.perf_counter()
            cached = [render_private_feed(sub, items, fmt, base_url="http://hub.test",
                                          self_url=f"http://hub.test/f/{sub.id}", cache=cache)
                      for sub, items in zip(subs, feeds, strict=True)]
            cached_us.append((time.perf_counter() - started) / args.feeds * 1e6)
            if cached != plain:
                raise SystemExit(f"{fmt}: a feed rendered through the cache differs")
            hits, misses = hits + cache.hits, misses + cache.misses
        name = fmt.replace(".", "")
        figures[f"{name}_us_whole"] = round(statistics.median(whole_us), 1)
        figures[f"{name}_us_cached"] = round(statistics.median(cached_us), 1)
        figures[f"{name}_ratio"] = round(figures[f"{name}_us_whole"] /
                                         figures[f"{name}_us_cached"], 2)
        print(f"{fmt:8s} whole {figures[f'{name}_us_whole']:7.1f} us  cached "
              f"{figures[f'{name}_us_cached']:7.1f} us  ratio {figures[f'{name}_ratio']:.2f}  "
              f"(rounds: {[round(x) for x in whole_us]} / {[round(x) for x in cached_us]})")
    figures["hit_rate"] = round(hits / (hits + misses), 3)
    figures.update(feeds=args.feeds, size=args.size, entries=args.entries, rounds=args.rounds)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
