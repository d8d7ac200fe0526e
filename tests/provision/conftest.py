"""Models for the planner's tests: small, round, and each able to make one resource dominant.

The planner's logic is tested on these (a plan is a function of its model); the shipped model
measured on this machine is tested where the figures matter (tests/provision/test_paper.py)."""

from __future__ import annotations

import msgspec
import pytest

from feedmesh.provision.model import (
    CrawlerCosts,
    FilterCosts,
    Machine,
    ReflectorCosts,
    ResourceModel,
    Workload,
)


def make_model(**changes: float) -> ResourceModel:
    """A round model; ``changes`` as ``tier__field=value``."""
    crawler = CrawlerCosts(bytes_in_per_feed_per_crawl=2_000, bytes_out_per_feed_per_crawl=50,
                           articles_per_feed_per_crawl=0.05, cpu_s_per_feed_per_crawl=1e-4,
                           memory_bytes_per_feed=500, memory_base_bytes=100 * 2**20)
    flt = FilterCosts(cpu_s_per_article=1e-4, cpu_s_per_article_per_ksubs=1e-7,
                      memory_bytes_per_subscription=30,
                      memory_base_bytes=100 * 2**20, matches_per_article_per_subscription=0.01,
                      bytes_per_match_message=1_000)
    reflector = ReflectorCosts(cpu_s_per_article=1e-4, cpu_s_per_article_per_ksubs=1e-7,
                               memory_bytes_per_subscription=30,
                               memory_bytes_per_held_entry=20, memory_base_bytes=100 * 2**20,
                               bytes_per_poll_answer=200)
    parts = {"crawler": crawler, "filter": flt, "reflector": reflector}
    for key, value in changes.items():
        tier, field = key.split("__")
        parts[tier] = msgspec.structs.replace(parts[tier], **{field: value})
    return ResourceModel(1, Machine("test", 1, "2026-11-24"), Workload(), parts["crawler"],
                         parts["filter"], parts["reflector"], {})


@pytest.fixture
def model() -> ResourceModel:
    return make_model()
