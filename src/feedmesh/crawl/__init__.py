"""Ingestion: fetch -> parse -> dedup -> store for many feeds (:mod:`.pipeline`) and the
``feedmesh crawl`` command (:mod:`.cli`). The hub's crawler tier runs this pipeline."""

from feedmesh.crawl.pipeline import Crawler, CrawlSettings, CrawlStats, FeedOutcome

__all__ = ["CrawlSettings", "CrawlStats", "Crawler", "FeedOutcome"]
