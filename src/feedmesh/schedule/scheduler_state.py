"""What a :class:`~.scheduler.Scheduler` holds about its feeds, hosts and budget, as one record.

:class:`SchedulerState` is the scheduler's data, with every field public and documented, so that
the parts built on it (the scheduler's calls, its :class:`~.upkeep.Upkeep`, and
:mod:`.snapshot`, which reads it to save and writes it to restore) share one definition of each
field instead of reaching into each other's private attributes. Per-feed numbers live in the
arrays of :attr:`SchedulerState.table` (rows by slot, fields named in :mod:`.kernels`); the few
per-feed Python objects (id, host, hints, notes) sit in lists indexed by the same slot.

The record's fields are fixed (``__slots__``); its helpers only keep the fields consistent with
each other (a new slot is registered everywhere at once).
"""

from __future__ import annotations

import math
import random

import numpy as np

from . import kernels
from .errors import UnknownFeedError
from .hints import FeedHints
from .kernels import (
    F_TTL,
    FLAG_GONE,
    FLAG_SKIP_ALL,
    FLAG_WEBSUB,
    I_FLAGS,
    I_HOST,
    I_SKIP_DAYS,
    I_SKIP_HOURS,
    K_FIELDS,
)
from .learning import LearnedState
from .settings import SchedulerSettings
from .spend_control import SpendControl
from .table import FeedTable, HostTable

__all__ = ["SchedulerState"]

_NAN = math.nan


class SchedulerState:
    """Everything a scheduler knows between two calls, except its policy and its upkeep."""

    __slots__ = (
        "active_count", "awaiting_count", "bucket", "feed_ids", "free_slots", "hints",
        "host_names", "hosts", "kernel_settings", "learner", "notes", "random", "rng",
        "settings", "slot_of", "spend", "table",
    )

    def __init__(self, settings: SchedulerSettings) -> None:
        self.settings = settings
        """The validated settings this scheduler runs with."""
        self.table = FeedTable()
        """Per-feed fields (``F``, ``I``), the due-time heap and the plans' offsets."""
        self.hosts = HostTable(settings.host_min_spacing_s, settings.host_max_per_minute,
                               max_spacing_s=settings.host_max_spacing_s,
                               concurrency=settings.host_concurrency,
                               delay_factor=settings.host_delay_factor)
        """Per-host politeness: fetches in flight, spacing paced by the host's answers, last
        fetch, recent fetches, server-requested pauses."""
        self.learner = LearnedState(window_days=settings.rate_window_days,
                                    half_life_days=settings.memory_half_life_days)
        """What was learned of each feed's postings."""
        self.bucket = np.array([1.0, 0.0, 1.0, _NAN])
        """The global budget as a token bucket: [tokens, per second, capacity, refilled at]."""
        self.spend = SpendControl()
        """The feedback that keeps the fetches made at the budget."""
        self.kernel_settings = np.zeros(K_FIELDS)
        """The settings the compiled kernels read (``K_*`` of :mod:`.kernels`), kept current by
        the upkeep."""
        self.rng = np.random.default_rng(settings.seed)
        """Seeded numpy RNG: phases and dithers of new feeds, K-means initialisation."""
        self.random = random.Random(settings.seed)
        """Seeded RNG: start-up spreading and the jitter of a backoff the scheduler computes."""
        self.slot_of: dict[str, int] = {}
        """Feed id -> slot, for every feed held (gone ones included)."""
        self.free_slots: list[int] = []
        """Slots of removed feeds, reused first."""
        self.feed_ids: list[str | None] = []
        """Per slot: the feed id (None for a free slot)."""
        self.host_names: list[str] = []
        """Per slot: the feed's host."""
        self.hints: list[FeedHints | None] = []
        """Per slot: the publisher's hints."""
        self.notes: list[dict[str, str] | None] = []
        """Per slot: decisions about bad input, by kind (see :class:`~.records.FeedStatus`)."""
        self.active_count = 0
        """Feeds held and not gone (the budget M is shared among them)."""
        self.awaiting_count = 0
        """Feeds added with a last fetch that wait for their first plan."""

    # -- slots --------------------------------------------------------------------------------
    def slot(self, feed_id: str) -> int:
        """The slot of ``feed_id``; :class:`UnknownFeedError` when it is not held."""
        slot = self.slot_of.get(feed_id)
        if slot is None:
            raise UnknownFeedError(f"no feed {feed_id!r} is scheduled")
        return slot

    def new_slot(self, feed_id: str, host: str) -> int:
        """A fresh slot for ``feed_id`` (a free one first), registered everywhere."""
        if self.free_slots:
            slot = self.free_slots.pop()
        else:
            slot = len(self.feed_ids)
            for series in (self.feed_ids, self.host_names, self.hints, self.notes):
                series.append(None)  # type: ignore[arg-type]
            self.table.grow(slot + 1)
            self.learner.ensure_capacity(slot + 1)
        table = self.table
        table.reset(slot)
        table.I[slot, I_HOST] = self.hosts.row(host)
        self.feed_ids[slot] = feed_id
        self.host_names[slot] = host
        self.slot_of[feed_id] = slot
        self.hints[slot] = None
        self.notes[slot] = None
        return slot

    def held_slots(self) -> np.ndarray:
        """Slots that hold a feed, in order."""
        return np.asarray(sorted(self.slot_of.values()), dtype=np.int64)

    def polled_slots(self) -> np.ndarray:
        """Held slots that are polled: not gone, no live WebSub push."""
        slots = self.held_slots()
        flags = self.table.I[slots, I_FLAGS]
        return slots[(flags & (FLAG_GONE | FLAG_WEBSUB)) == 0]

    # -- per-feed helpers -----------------------------------------------------------------------
    def push(self, slot: int, due: float) -> None:
        """Schedule ``slot`` at ``due``, after the rules every due time obeys (see
        :func:`.kernels.push`)."""
        table = self.table
        kernels.push(table.heap_keys, table.heap_slots, table.heap_n, table.F, table.I,
                     self.kernel_settings, slot, due)

    def note(self, slot: int, kind: str, message: str) -> None:
        """Record a decision about bad input for ``slot`` (one message per kind)."""
        notes = self.notes[slot]
        if notes is None:
            notes = self.notes[slot] = {}
        notes[kind] = message

    def set_hints(self, slot: int, hints: FeedHints | None) -> None:
        """Store ``hints`` and the numbers the kernels read from them."""
        self.hints[slot] = hints
        F, I = self.table.F, self.table.I
        flags = I[slot, I_FLAGS] & ~(FLAG_WEBSUB | FLAG_SKIP_ALL)
        if hints is None:
            F[slot, F_TTL] = _NAN
            I[slot, I_SKIP_HOURS] = I[slot, I_SKIP_DAYS] = 0
        else:
            F[slot, F_TTL] = _NAN if hints.ttl_s is None else hints.ttl_s
            I[slot, I_SKIP_HOURS] = hints.skip_hours_mask
            I[slot, I_SKIP_DAYS] = hints.skip_days_mask
            if hints.websub_live:
                flags |= FLAG_WEBSUB
            if hints.skips_everything:
                flags |= FLAG_SKIP_ALL
                self.note(slot, "skip_hints", "skipHours/skipDays cover every hour; ignored")
        I[slot, I_FLAGS] = flags
