"""How fast does feedmesh parse a changed feed, against feedparser, same run, same documents?

Documents:

* farm-like 8 KB feeds: RSS 2.0 and Atom 1.0 with 10 entries of ~770 bytes of HTML each (links,
  emphasis, a relative image), words drawn from English frequencies (``wordfreq``), the shape of
  Cobra's Figure 5 median feed; generated here, deterministically;
* the farm's own documents of 6-10 KB (``feedmesh.farm``, healthy feeds, seed 3), when the farm
  package is installed: the same renderers and mix of formats the crawler meets;
* real feeds from ``../shared/conformance`` (podcasts, news sites, blogs; 1 KB to 60 KB).

Both parsers get bytes and return a normalized feed with sanitized HTML: feedmesh's
``parse_feed`` (lxml + nh3) and ``feedparser.parse`` (its defaults: sanitize and resolve
relative URLs). Each document is parsed ``--repeat`` times per parser, interleaved, and the
median is reported; the 8 KB figure is the median over the farm-like documents.

    .venv/bin/python benchmarks/parse.py [--repeat 200]

The last line is JSON: ``ours_ms_8kb``, ``feedparser_ms_8kb``, ``speedup`` (medians over the
generated and the farm's 8 KB documents together), and per-set medians.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import sys
import time
from pathlib import Path

import feedparser
from wordfreq import top_n_list

from feedmesh.feeds import parse_feed

CONFORMANCE = Path(__file__).resolve().parents[2] / "shared" / "conformance"
REAL_FEEDS = [
    "feed-rs-fixtures/rss2/rss_2.0_bbc.xml",
    "feed-rs-fixtures/rss2/rss_2.0_cloudflare.xml",
    "feed-rs-fixtures/atom/atom_example_reddit.xml",
    "feed-rs-fixtures/rss1/rss_1.0_debian.xml",
    "rss-parser-node/input/guardian.rss",
    "rss-parser-node/input/heise.atom",
    "miniflux-testdata/internal/reader/parser/testdata/large_rss.xml",
    "miniflux-testdata/internal/reader/parser/testdata/encoding_ISO-8859-1.xml",
]


def farm_like(seed: int, atom: bool, target: int = 8 * 1024) -> bytes:
    """A synthetic feed of about ``target`` bytes with 10 entries."""
    rng = random.Random(seed)
    words = top_n_list("en", 5000)
    weights = [1 / (rank + 1) for rank in range(len(words))]  # Zipf-like, as real text is

    def text(count: int) -> str:
        return " ".join(rng.choices(words, weights, k=count))

    entries = []
    per_entry = (target - 600) // 10
    for index in range(10):
        paragraphs = []
        size = 0
        while size < per_entry - 380:
            paragraph = (f"<p>{text(rng.randint(12, 30))} <a href=\"/posts/{seed}-{index}\">"
                         f"{text(2)}</a> <b>{text(2)}</b> {text(rng.randint(5, 15))}.</p>")
            paragraphs.append(paragraph)
            size += len(paragraph)
        body = "".join(paragraphs) + f'<img src="/img/{index}.png" alt="{text(2)}">'
        escaped = body.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        day = 1 + index
        if atom:
            entries.append(
                f"<entry><id>tag:farm.test,2024:{seed}-{index}</id><title>{text(6)}</title>"
                f"<link href=\"http://farm.test/{seed}/{index}\"/>"
                f"<updated>2024-03-{day:02d}T10:{index:02d}:00Z</updated>"
                f"<author><name>{text(2)}</name></author>"
                f"<content type=\"html\">{escaped}</content></entry>")
        else:
            entries.append(
                f"<item><title>{text(6)}</title><link>http://farm.test/{seed}/{index}</link>"
                f"<guid isPermaLink=\"false\">farm-{seed}-{index}</guid>"
                f"<pubDate>Sun, {day:02d} Mar 2024 10:{index:02d}:00 GMT</pubDate>"
                f"<category>{text(1)}</category>"
                f"<description>{escaped}</description></item>")
    if atom:
        return (f'<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
                f"<title>Farm feed {seed}</title><id>tag:farm.test,2024:{seed}</id>"
                f'<link href="http://farm.test/{seed}/"/><updated>2024-03-10T10:00:00Z</updated>'
                + "".join(entries) + "</feed>").encode("utf-8")
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel>'
            f"<title>Farm feed {seed}</title><link>http://farm.test/{seed}/</link>"
            f"<description>{text(12)}</description><ttl>60</ttl>"
            + "".join(entries) + "</channel></rss>").encode("utf-8")


def farm_documents(count: int = 8) -> list[tuple[str, bytes, str]]:
    """(name, body, URL) of the farm's healthy 6-10 KB documents, or [] without the farm."""
    try:
        from feedmesh.farm.config import FarmConfig
        from feedmesh.farm.documents import FarmModel
    except ImportError:
        return []
    model = FarmModel(FarmConfig(feeds=400, seed=3, faults="none"), ["http://127.0.0.1:8000"])
    found = []
    for feed_id in range(400):
        body = model.document(feed_id, 1.7e9).body
        if 6 * 1024 <= len(body) <= 10 * 1024:
            fmt = parse_feed(body).feed.format
            found.append((f"farm feed {feed_id} ({fmt})", body, model.feed_url(feed_id)))
        if len(found) == count:
            break
    return found


def ours(data: bytes, url: str) -> object:
    return parse_feed(data, url=url)


def theirs(data: bytes, url: str) -> object:
    return feedparser.parse(io.BytesIO(data), response_headers={"content-location": url})


def median_ms(function, data: bytes, url: str, repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        function(data, url)
        timings.append(time.perf_counter() - start)
    return statistics.median(timings) * 1000


def measure(documents: list[tuple[str, bytes, str]],
            repeat: int) -> list[tuple[str, int, float, float]]:
    rows = []
    for name, data, url in documents:
        ours(data, url), theirs(data, url)  # warm caches and imports
        # interleave in rounds so that noise from other processes hits both parsers alike
        our_times, their_times = [], []
        rounds = 5
        for _ in range(rounds):
            our_times.append(median_ms(ours, data, url, max(1, repeat // rounds)))
            their_times.append(median_ms(theirs, data, url, max(1, repeat // (rounds * 4))))
        rows.append((name, len(data), statistics.median(our_times),
                     statistics.median(their_times)))
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200,
                        help="parses per document for feedmesh (feedparser gets a quarter)")
    args = parser.parse_args(argv)

    generated = [(f"farm-like {'atom' if seed % 2 else 'rss'} #{seed}",
                  farm_like(seed, seed % 2 == 1), f"http://farm.test/feeds/{seed}")
                 for seed in range(6)]
    from_farm = farm_documents()
    real = [(name, (CONFORMANCE / name).read_bytes(), "http://example.test/feed")
            for name in REAL_FEEDS if (CONFORMANCE / name).is_file()]
    generated_rows = measure(generated, args.repeat)
    farm_rows = measure(from_farm, args.repeat)
    real_rows = measure(real, args.repeat)

    print(f"{'document':58} {'bytes':>7} {'feedmesh ms':>12} {'feedparser ms':>14} {'ratio':>6}")
    for name, size, our_ms, their_ms in generated_rows + farm_rows + real_rows:
        print(f"{name[-58:]:58} {size:7d} {our_ms:12.3f} {their_ms:14.3f} {their_ms / our_ms:6.1f}")
    eight_kb = generated_rows + farm_rows
    ours_8kb = statistics.median(row[2] for row in eight_kb)
    theirs_8kb = statistics.median(row[3] for row in eight_kb)
    ours_real = statistics.median(row[2] for row in real_rows) if real_rows else None
    theirs_real = statistics.median(row[3] for row in real_rows) if real_rows else None
    print(f"\n8 KB feeds ({len(eight_kb)}: {len(generated_rows)} generated, {len(farm_rows)} from "
          f"the farm): feedmesh {ours_8kb:.3f} ms, feedparser {theirs_8kb:.3f} ms (median), "
          f"{theirs_8kb / ours_8kb:.1f}x faster")
    if real_rows:
        print(f"real feeds ({len(real_rows)}): feedmesh {ours_real:.3f} ms, feedparser "
              f"{theirs_real:.3f} ms (median of medians)")
    print(json.dumps({
        "ours_ms_8kb": round(ours_8kb, 4),
        "feedparser_ms_8kb": round(theirs_8kb, 4),
        "speedup": round(theirs_8kb / ours_8kb, 2),
        "ours_ms_real_median": None if ours_real is None else round(ours_real, 4),
        "feedparser_ms_real_median": None if theirs_real is None else round(theirs_real, 4),
        "ours_ms_8kb_generated": round(statistics.median(r[2] for r in generated_rows), 4),
        "ours_ms_8kb_farm": (round(statistics.median(r[2] for r in farm_rows), 4)
                             if farm_rows else None),
        "documents_8kb": len(eight_kb),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
