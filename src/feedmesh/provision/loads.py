"""Predicted load of every service of a topology, from the resource model (pure arithmetic).

Per crawl interval ``T`` (the model's workload); every CPU figure also counts the tier's fixed
``cpu_s_per_s_base`` (0 in a model calibrated without ``--idle``):

* crawler of ``F`` feeds: in = F * bytes_in / T; out = the sum over its links of the link's
  feeds * bytes_out / T (each filter sharing its feeds gets their new articles); CPU = F * cpu
  / T; memory = base + F * per feed.
* filter of feeds ``Ff`` and subscriptions ``S``: articles a = Ff * articles / T; in = Ff *
  bytes_out / T; CPU = a * (per article + per_ksubs * S / 1000); memory = base + S * per
  subscription; out = the sum over its reflectors of a * sel(shared subscriptions) * message.
* reflector of ``S`` subscriptions: in = the sum over its filters of what they send it (an
  article may come from several, each for its own users); CPU = the distinct articles (all
  articles * sel(S)) * (per article + per_ksubs * S / 1000): it re-matches each once; memory =
  base + S * (per subscription + h * per held entry); out = S / poll interval * (bytes per
  poll answer + (h - k) * bytes per held item), where ``h`` is what a feed holds on average: k
  (full feeds, the steady state) unless the workload says otherwise; CPU also counts each poll.

``sel(n) = 1 - (1 - p)^n`` is the share of articles that match at least one of ``n``
subscriptions, each matched with probability ``p`` (independence assumed).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import asdict, dataclass

import numpy as np

from .model import ResourceModel
from .topology import RESOURCES, Service, Topology

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


def _selectivity(p: float, shared: np.ndarray) -> np.ndarray:
    if p <= 0:
        return np.zeros_like(shared, dtype=float)
    if p >= 1:
        return (shared > 0).astype(float)
    return np.where(shared > 0, -np.expm1(shared * math.log1p(-p)), 0.0)


def _ranges(services: tuple[Service, ...], attribute: str) -> tuple[np.ndarray, np.ndarray]:
    shares = [getattr(s, attribute) for s in services]
    return (np.array([x.start for x in shares], dtype=np.int64),
            np.array([x.stop for x in shares], dtype=np.int64))


def _overlap(rows: tuple[np.ndarray, np.ndarray], columns: tuple[np.ndarray, np.ndarray]
             ) -> np.ndarray:
    """rows x columns: how many ids each pair of ranges shares (what a link carries)."""
    return np.maximum(0, np.minimum(rows[1][:, None], columns[1][None, :])
                      - np.maximum(rows[0][:, None], columns[0][None, :])).astype(float)


def predict(topology: Topology, model: ResourceModel,
            only: Collection[str] | None = None) -> dict[str, Load]:
    """Every service's load, by name (or only the services named: the planner's trials).

    Vectorized over the links (crawlers x filters, filters x reflectors), so that plans of
    thousands of services stay quick."""
    wanted = set(only) if only is not None else None
    c, f, r = model.crawler, model.filter, model.reflector
    interval, p = model.workload.crawl_interval_s, f.matches_per_article_per_subscription
    k = model.workload.held_per_subscription
    held_avg = model.workload.held  # what a private feed holds on average (k when full)
    answer = r.bytes_per_poll_answer + (held_avg - k) * r.bytes_per_poll_item

    def chosen(services: tuple[Service, ...]) -> tuple[Service, ...]:
        return services if wanted is None else tuple(s for s in services if s.name in wanted)

    crawlers, filters, reflectors = (chosen(topology.crawlers), chosen(topology.filters),
                                     chosen(topology.reflectors))
    loads: dict[str, Load] = {}
    if crawlers:
        feeds = _ranges(crawlers, "feeds")
        sent = _overlap(feeds, _ranges(topology.filters, "feeds")).sum(axis=1)
        for crawler, share, out in zip(crawlers, feeds[1] - feeds[0], sent, strict=True):
            loads[crawler.name] = Load(
                in_bandwidth=float(share) * c.bytes_in_per_feed_per_crawl / interval,
                out_bandwidth=float(out) * c.bytes_out_per_feed_per_crawl / interval,
                cpu=c.cpu_s_per_s_base + float(share) * c.cpu_s_per_feed_per_crawl / interval,
                memory=c.memory_base_bytes + float(share) * c.memory_bytes_per_feed)
    all_reflectors = _ranges(topology.reflectors, "subscriptions")
    if filters:
        feeds, subs = _ranges(filters, "feeds"), _ranges(filters, "subscriptions")
        articles = (feeds[1] - feeds[0]) * c.articles_per_feed_per_crawl / interval
        matched = _selectivity(p, _overlap(subs, all_reflectors)).sum(axis=1)
        for i, flt in enumerate(filters):
            held = float(subs[1][i] - subs[0][i])
            loads[flt.name] = Load(
                in_bandwidth=float(feeds[1][i] - feeds[0][i]) * c.bytes_out_per_feed_per_crawl
                / interval,
                out_bandwidth=float(articles[i] * matched[i]) * f.bytes_per_match_message,
                cpu=f.cpu_s_per_s_base + float(articles[i]) * (f.cpu_s_per_article
                                          + f.cpu_s_per_article_per_ksubs * held / 1000),
                memory=f.memory_base_bytes + held * f.memory_bytes_per_subscription,
                articles_in_per_s=float(articles[i]))
    if reflectors:
        subs = _ranges(reflectors, "subscriptions")
        all_feeds = _ranges(topology.filters, "feeds")
        filter_articles = (all_feeds[1] - all_feeds[0]) * c.articles_per_feed_per_crawl / interval
        received = (_selectivity(p, _overlap(subs, _ranges(topology.filters, "subscriptions")))
                    * filter_articles[None, :]).sum(axis=1)
        every_article = sum(x.feeds.size for x in topology.crawlers) \
            * c.articles_per_feed_per_crawl / interval  # type: ignore[union-attr]
        for i, reflector in enumerate(reflectors):
            held = float(subs[1][i] - subs[0][i])
            # Several filters may send it the same article (each for its own share of its
            # users); it is matched once: it works on every article matching one of its users.
            articles = every_article * selectivity(p, int(held))
            loads[reflector.name] = Load(
                in_bandwidth=float(received[i]) * f.bytes_per_match_message,
                out_bandwidth=held / model.workload.poll_interval_s * answer,
                cpu=r.cpu_s_per_s_base
                + articles * (r.cpu_s_per_article + r.cpu_s_per_article_per_ksubs * held / 1000)
                + held / model.workload.poll_interval_s * r.cpu_s_per_poll,
                memory=(r.memory_base_bytes + held * r.memory_bytes_per_subscription
                        + held * held_avg * r.memory_bytes_per_held_entry),
                articles_in_per_s=articles)
    # the topology's order, whatever the tiers' order above
    return {s.name: loads[s.name] for s in topology.services if s.name in loads}
