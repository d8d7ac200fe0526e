"""Settings and figures of a :class:`~feedmesh.match.index.SubscriptionIndex`, and id checking."""

from __future__ import annotations

from typing import Final

import msgspec
import numpy as np

from feedmesh.match.errors import SubscriptionIdError
from feedmesh.match.query import QueryLimits

__all__ = ["MAX_SUB_ID", "IndexSettings", "IndexStats", "check_sub_id"]

MAX_SUB_ID: Final = 2**31 - 1


def check_sub_id(sub_id: int) -> int:
    """``sub_id`` as an int, or :class:`SubscriptionIdError` (the index stores int32 ids)."""
    if isinstance(sub_id, bool) or not isinstance(sub_id, (int, np.integer)):
        raise SubscriptionIdError(f"subscription id must be an int, not {type(sub_id).__name__}")
    if not 0 <= sub_id <= MAX_SUB_ID:
        raise SubscriptionIdError(f"subscription id {sub_id} is outside 0..{MAX_SUB_ID}")
    return int(sub_id)


class IndexSettings(msgspec.Struct, frozen=True, kw_only=True):
    """When the index asks for compaction, and how it matches."""

    backend: str = "auto"
    """``numba``, ``numpy``, or ``auto`` (numba when installed)."""
    delta_limit: int = 5_000
    """Subscriptions in the delta that make compaction due (the delta is matched in Python)."""
    removed_fraction: float = 0.05
    """Share of the main index removed or replaced that makes compaction due."""
    reestimate_after: int = 20_000
    """Articles observed since the last build that make compaction (re-choosing access) due."""
    query_limits: QueryLimits = QueryLimits()


class IndexStats(msgspec.Struct, frozen=True):
    subscriptions: int
    main_subscriptions: int
    delta_subscriptions: int
    removed_pending: int
    conjunctions: int
    terms: int
    index_bytes: int
    """The main index arrays (the matching structure)."""
    vocabulary_bytes: int
    """Estimated size of the term dictionary and its per-term arrays (strings, dicts)."""
