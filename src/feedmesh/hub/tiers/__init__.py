"""The hub's tiers (Cobra section 3): the crawler, the filter shards, the reflectors."""
