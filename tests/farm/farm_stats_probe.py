"""Measure Cobra Figure 5 statistics on farm documents, independently of how the farm builds them.

Used by test_statistics.py (and handy by hand: ``python tests/farm/farm_stats_probe.py 3000``).
Sizes are measured on the documents: a feed's size is its bytes; an article's size is the bytes
of its ``<item>``/``<entry>`` element (or JSON item) as served; an article's words are the words of
its title and text with markup removed.
"""

from __future__ import annotations

import html
import json
import re
import sys

import numpy as np
from lxml import etree

from feedmesh.farm.config import FarmConfig
from feedmesh.farm.documents import FarmModel

_TAG = re.compile(r"<[^>]*>")
ITEM_TAGS = {"item", "entry"}


def _words(text: str) -> int:
    return len(html.unescape(_TAG.sub(" ", text)).split())


def article_stats(body: bytes, fmt: str) -> list[tuple[int, int]]:
    """(bytes, words) per article of a document."""
    out = []
    if fmt.startswith("json"):
        for item in json.loads(body)["items"]:
            size = len(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode())
            text = item.get("title", "") + " " + item.get("content_html", "")
            out.append((size, _words(text)))
        return out
    root = etree.fromstring(body)
    for element in root.iter():
        if not isinstance(element.tag, str) or etree.QName(element).localname not in ITEM_TAGS:
            continue
        size = len(etree.tostring(element, encoding="utf-8"))
        text = " ".join(child.text or "" for child in element
                        if isinstance(child.tag, str)
                        and etree.QName(child).localname in ("title", "description", "summary",
                                                              "content", "encoded"))
        out.append((size, _words(text)))
    return out


def measure(feeds: int, seed: int = 11, t: float = 1_760_000_000.0) -> dict[str, float]:
    config = FarmConfig(feeds=feeds, seed=seed, faults="none")
    model = FarmModel(config, ["http://127.0.0.1:8080"])
    sizes, counts, art_bytes, art_words = [], [], [], []
    for feed_id in range(feeds):
        doc = model.document(feed_id, t)
        articles = article_stats(doc.body, model.spec(feed_id).format)
        sizes.append(len(doc.body))
        counts.append(len(articles))
        art_bytes.extend(a for a, _ in articles)
        art_words.extend(w for _, w in articles)
    return {
        "feed_bytes_median": float(np.median(sizes)),
        "feed_bytes_p90": float(np.percentile(sizes, 90)),
        "entries_median": float(np.median(counts)), "entries_p90": float(np.percentile(counts, 90)),
        "article_bytes_median": float(np.median(art_bytes)),
        "article_bytes_p90": float(np.percentile(art_bytes, 90)),
        "article_words_median": float(np.median(art_words)),
        "article_words_p90": float(np.percentile(art_words, 90)),
    }


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 3000), indent=1))
