"""Predicted load of every service of a topology, from the resource model (pure arithmetic).

Per crawl interval ``T`` (the model's workload):

* crawler of ``F`` feeds: in = F * bytes_in / T; out = the sum over its links of the link's
  feeds * bytes_out / T (each filter sharing its feeds gets their new articles); CPU = F * cpu
  / T; memory = base + F * per feed.
* filter of feeds ``Ff`` and subscriptions ``S``: articles a = Ff * articles / T; in = Ff *
  bytes_out / T; CPU = a * (per article + per_ksubs * S / 1000); memory = base + S * per
  subscription; out = the sum over its reflectors of a * sel(shared subscriptions) * message.
* reflector of ``S`` subscriptions: in = the sum over its filters of what they send it (an
  article may come from several, each for its own users); CPU = the distinct articles (all
  articles * sel(S)) * (per article + per_ksubs * S / 1000): it re-matches each once; memory =
  base + S * (per subscription + k * per held entry); out = S / poll interval * bytes per poll
  answer.

``sel(n) = 1 - (1 - p)^n`` is the share of articles that match at least one of ``n``
subscriptions, each matched with probability ``p`` (independence assumed).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .model import ResourceModel
from .topology import RESOURCES, Topology

__all__ = ["Load", "predict", "selectivity"]


@dataclass(frozen=True)
class Load:
    in_bandwidth: float  # bytes/s
    out_bandwidth: float  # bytes/s
    cpu: float  # core-seconds per second on the model's machine
    memory: float  # bytes
    articles_in_per_s: float = 0.0

    def of(self, resource: str) -> float:
        assert resource in RESOURCES
        return float(getattr(self, resource))

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def selectivity(p: float, subscriptions: int) -> float:
    if subscriptions <= 0 or p <= 0:
        return 0.0
    if p >= 1:
        return 1.0
    return -math.expm1(subscriptions * math.log1p(-p))


def predict(topology: Topology, model: ResourceModel) -> dict[str, Load]:
    """Every service's load, by name."""
    interval = model.workload.crawl_interval_s
    c, f, r = model.crawler, model.filter, model.reflector
    p = f.matches_per_article_per_subscription
    loads: dict[str, Load] = {}
    for crawler in topology.crawlers:
        feeds = _size(crawler.feeds)
        sent = sum(crawler.feeds.overlap(flt.feeds) for flt in topology.filters)  # type: ignore[union-attr,arg-type]
        loads[crawler.name] = Load(
            in_bandwidth=feeds * c.bytes_in_per_feed_per_crawl / interval,
            out_bandwidth=sent * c.bytes_out_per_feed_per_crawl / interval,
            cpu=feeds * c.cpu_s_per_feed_per_crawl / interval,
            memory=c.memory_base_bytes + feeds * c.memory_bytes_per_feed,
            articles_in_per_s=0.0)
    reflector_in: dict[str, tuple[float, float]] = {x.name: (0.0, 0.0) for x in topology.reflectors}
    for flt in topology.filters:
        feeds, subs = _size(flt.feeds), _size(flt.subscriptions)
        articles = feeds * c.articles_per_feed_per_crawl / interval
        out = 0.0
        for reflector in topology.reflectors:
            shared = flt.subscriptions.overlap(reflector.subscriptions)  # type: ignore[union-attr,arg-type]
            if shared:
                matched = articles * selectivity(p, shared)
                out += matched * f.bytes_per_match_message
                got_bytes, got_articles = reflector_in[reflector.name]
                reflector_in[reflector.name] = (got_bytes + matched * f.bytes_per_match_message,
                                                got_articles + matched)
        loads[flt.name] = Load(
            in_bandwidth=feeds * c.bytes_out_per_feed_per_crawl / interval,
            out_bandwidth=out,
            cpu=articles * (f.cpu_s_per_article + f.cpu_s_per_article_per_ksubs * subs / 1000),
            memory=f.memory_base_bytes + subs * f.memory_bytes_per_subscription,
            articles_in_per_s=articles)
    k = model.workload.held_per_subscription
    all_articles = sum(_size(c.feeds) for c in topology.crawlers) \
        * c.articles_per_feed_per_crawl / interval
    for reflector in topology.reflectors:
        subs = _size(reflector.subscriptions)
        in_bytes, _ = reflector_in[reflector.name]
        # Several filters may send it the same article (each for its own share of its users);
        # it is matched once: what it works on is every article matching one of its users.
        articles = all_articles * selectivity(p, subs)
        loads[reflector.name] = Load(
            in_bandwidth=in_bytes,
            out_bandwidth=subs / model.workload.poll_interval_s * r.bytes_per_poll_answer,
            cpu=articles * (r.cpu_s_per_article + r.cpu_s_per_article_per_ksubs * subs / 1000),
            memory=(r.memory_base_bytes + subs * r.memory_bytes_per_subscription
                    + subs * k * r.memory_bytes_per_held_entry),
            articles_in_per_s=articles)
    return loads


def _size(share: object) -> int:
    return share.size if share is not None else 0  # type: ignore[attr-defined]
