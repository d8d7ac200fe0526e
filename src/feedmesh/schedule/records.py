"""Records the scheduler takes in and hands out: fetch reports, feed status, snapshots.

A :class:`FetchReport` is what the crawler (or the simulator) tells the scheduler after a fetch:
the outcome, how many entries were new and their declared publish times, the HTTP hints, and the
fetch state's decision on when the feed may be fetched again (backoff, Retry-After, not a feed:
decided once, in :mod:`feedmesh.fetch.state`). It is built from the fetcher's
:class:`~feedmesh.model.FetchResult` and the feed's committed fetch state by
:meth:`FetchReport.from_fetch`.

A :class:`SchedulerSnapshot` holds everything needed to resume after a restart (msgspec, so it
encodes to MessagePack or JSON unchanged); :class:`FeedStatus` is a read-only view for metrics and
debugging.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from feedmesh.model import Entry, FetchOutcome, FetchResult

from .hints import FeedHints
from .settings import SchedulerSettings

if TYPE_CHECKING:
    from feedmesh.fetch.state import FeedFetchState

__all__ = [
    "SNAPSHOT_FORMAT", "FeedRecord", "FeedStatus", "FetchReport", "HostRecord", "SchedulerSnapshot",
]

SNAPSHOT_FORMAT = 1


def _epoch(value: datetime | None) -> float | None:
    if value is None:
        return None
    try:
        return value.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


class FetchReport(msgspec.Struct, frozen=True, omit_defaults=True):
    """What one fetch taught the scheduler about one feed."""

    feed_id: str
    fetched_at: float
    outcome: FetchOutcome
    new_entries: int = 0
    """Entries not seen before in this feed (first seen at ``fetched_at``)."""
    published: tuple[float | None, ...] = ()
    """Declared publish times (epoch s) of the new entries, None where absent. The scheduler
    decides which are trustworthy (not in the future, not before the previous fetch - 1 day)."""
    entries_in_document: int = 0
    """How many entries the document listed (for the adaptive policies' share of new entries)."""
    max_age_s: float | None = None
    """Cache-Control max-age / Expires - Date."""
    retry_after_s: float | None = None
    """Retry-After, in seconds from ``fetched_at``."""
    hints: FeedHints | None = None
    """Feed-level hints read from this document (replace the stored ones when given)."""
    not_before: float = 0.0
    """The fetch state's decision (:attr:`feedmesh.fetch.state.FeedFetchState.not_before`): no
    fetch before this instant (error backoff, a capped Retry-After, a document that was not a
    feed). 0: the report carries no decision, and after a failure the scheduler asks the same
    rule with the default :class:`~feedmesh.fetch.state.BackoffPolicy`."""
    error_streak: int | None = None
    """Consecutive failed fetches, as the fetch state counts them (a page that is not a feed
    counts, though HTTP said 200). None: the scheduler counts them itself."""
    elapsed_s: float | None = None
    """How long the host took to answer (what paces the next fetch start to it). None: unknown."""
    status: int | None = None
    """The HTTP status of the answer (a 503 slows its host down), None without one."""

    @property
    def host_overloaded(self) -> bool:
        """The answer says the host is overloaded: 429, 503, or no answer in time."""
        return (self.outcome in (FetchOutcome.RATE_LIMITED, FetchOutcome.TIMEOUT)
                or self.status == 503)

    @classmethod
    def from_fetch(cls, feed_id: str, result: FetchResult, *, new_entries: Sequence[Entry] = (),
                   entries_in_document: int = 0, hints: FeedHints | None = None,
                   state: FeedFetchState | None = None) -> FetchReport:
        """Build a report from the fetcher's result, the entries dedup found new, and the feed's
        fetch state after this fetch (whose decision on the next fetch the scheduler follows)."""
        return cls(
            feed_id=feed_id, fetched_at=result.fetched_at, outcome=result.outcome,
            new_entries=len(new_entries),
            published=tuple(_epoch(e.published or e.updated) for e in new_entries),
            entries_in_document=entries_in_document, max_age_s=result.max_age_s,
            retry_after_s=result.retry_after_s, hints=hints,
            not_before=0.0 if state is None else state.not_before,
            error_streak=None if state is None else state.errors,
            elapsed_s=result.elapsed_s or None, status=result.status)


class FeedStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """A read-only view of one feed's scheduling state."""

    feed_id: str
    host: str
    weight: float
    state: str
    """``scheduled``, ``in_flight``, ``gone`` (410) or ``waiting_plan``."""
    next_due_at: float | None
    last_fetch_at: float | None
    last_success_at: float | None
    error_streak: int
    planned_per_day: float | None
    """Fetches a day in the current plan (None for reactive policies or no plan yet)."""
    window_rate_per_day: float
    """Posts a day over the sliding window, as learned."""
    notes: tuple[str, ...] = ()
    """Decisions about bad input (ignored hints, capped Retry-After, untrusted dates)."""


class FeedRecord(msgspec.Struct, frozen=True, omit_defaults=True):
    """One feed in a snapshot."""

    feed_id: str
    slot: int
    host: str = ""
    weight: float = 1.0
    hints: FeedHints | None = None
    next_due_at: float | None = None
    in_flight: bool = False
    gone: bool = False
    awaiting_plan: bool = False
    last_fetch_at: float | None = None
    last_success_at: float | None = None
    error_streak: int = 0
    backoff_until: float = 0.0
    phase: float = 0.0
    dither_s: float = 0.0
    notes: tuple[str, ...] = ()


class HostRecord(msgspec.Struct, frozen=True, omit_defaults=True):
    """A host's politeness state, as stored in a snapshot."""

    host: str
    last_fetch_at: float | None = None
    recent: tuple[float, ...] = ()
    blocked_until: float = 0.0


class SchedulerSnapshot(msgspec.Struct, frozen=True):
    """Everything a scheduler needs to resume where it stopped."""

    format: int
    saved_at: float
    settings: SchedulerSettings
    feeds: list[FeedRecord]
    hosts: list[HostRecord]
    learned: dict[str, object]
    centroids: list[list[float]] | None
    budget_tokens: float
    clock_high: float
    next_refit_at: float
    next_cluster_refit_at: float
    policy_state: dict[str, object]
    rng_state: dict[str, object]
    random_state: list[object]
    spend: dict[str, object] | None = None
    """The spend control's scale and recent counts (see :class:`~.spend_control.SpendControl`)."""
    labels: list[int] | None = None
    """Each feed's cluster at the last refit, in ``feeds`` order (keeps cluster stickiness)."""
