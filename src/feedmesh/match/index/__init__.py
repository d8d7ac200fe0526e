"""The subscription index: two-phase matching of an article against millions of queries.

In the spirit of Fabret et al. / Pereira et al. (Cobra's filter, section 3.2): every conjunction of
every query is filed under its most selective term (its *access predicate*, chosen from observed
article frequencies); an article's terms select the candidates, which are then verified with their
remaining terms, cheapest test first, NOT terms last, phrases by positions.

* :class:`SubscriptionIndex` - add/remove/match, compaction (also in the background), snapshots;
* :func:`load_snapshot` / :func:`snapshot_bytes` - the compact serialized form, loadable zero-copy
  from bytes, an mmap'ed file or shared memory, for fast restarts and read-only worker processes;
* :class:`TermStatistics` - the article-frequency estimates behind the access predicates.
"""

from __future__ import annotations

from feedmesh.match.index.kernels import BACKENDS, default_backend, warm_up
from feedmesh.match.index.settings import IndexSettings, IndexStats
from feedmesh.match.index.statistics import PriorFunction, TermStatistics, english_prior
from feedmesh.match.index.subscriptions import SubscriptionIndex

__all__ = [
    "BACKENDS",
    "IndexSettings",
    "IndexStats",
    "PriorFunction",
    "SubscriptionIndex",
    "TermStatistics",
    "default_backend",
    "english_prior",
    "warm_up",
]
