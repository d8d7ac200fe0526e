"""Snapshot and restore of a :class:`~.scheduler.Scheduler`: survive a restart without a burst.

A snapshot (:class:`~.records.SchedulerSnapshot`, msgspec, so MessagePack or JSON) holds each
feed's row (due time, last fetch, backoff, hints, notes), the hosts' politeness state, the
learned arrays, the clusters, the budget bucket and the spend control, and both RNG states.
Plans are not stored: restore recomputes them from what was learned. Feeds that fell due while
the process was down are spread out instead of all being fetched at the restart instant.

Both directions go through the scheduler's public parts only: its
:class:`~.scheduler_state.SchedulerState`, its :class:`~.upkeep.Upkeep` and its policy.
"""

from __future__ import annotations

import math

import msgspec
import numpy as np

from .errors import SnapshotError
from .kernels import (
    F_BACKOFF,
    F_DITHER,
    F_DUE,
    F_LAST_FETCH,
    F_LAST_SUCCESS,
    F_PHASE,
    F_WEIGHT,
    FLAG_AWAITING,
    FLAG_GONE,
    FLAG_IN_FLIGHT,
    I_ERRORS,
    I_FLAGS,
)
from .policies import Policy
from .records import SNAPSHOT_FORMAT, FeedRecord, HostRecord, SchedulerSnapshot
from .scheduler_state import SchedulerState
from .upkeep import Upkeep

__all__ = ["decode_snapshot", "load_snapshot", "take_snapshot"]

_OVERDUE_S = 60.0


def _or_none(value: float) -> float | None:
    return value if not math.isnan(value) and value != float("inf") else None


def take_snapshot(state: SchedulerState, upkeep: Upkeep, policy: Policy,
                  now: float) -> SchedulerSnapshot:
    """Everything a scheduler needs to resume (``now`` already ticked)."""
    F, I = state.table.F, state.table.I
    slots = sorted(state.slot_of.values())
    feeds = []
    for slot in slots:
        flags = int(I[slot, I_FLAGS])
        feeds.append(FeedRecord(
            feed_id=state.feed_ids[slot], slot=slot,  # type: ignore[arg-type]
            host=state.host_names[slot], weight=float(F[slot, F_WEIGHT]),
            hints=state.hints[slot], next_due_at=_or_none(float(F[slot, F_DUE])),
            in_flight=bool(flags & FLAG_IN_FLIGHT), gone=bool(flags & FLAG_GONE),
            awaiting_plan=bool(flags & FLAG_AWAITING),
            last_fetch_at=_or_none(float(F[slot, F_LAST_FETCH])),
            last_success_at=_or_none(float(F[slot, F_LAST_SUCCESS])),
            error_streak=int(I[slot, I_ERRORS]),
            backoff_until=float(F[slot, F_BACKOFF]), phase=float(F[slot, F_PHASE]),
            dither_s=float(F[slot, F_DITHER]),
            notes=tuple(f"{k}={v}" for k, v in sorted((state.notes[slot] or {}).items()))))
    hosts = []
    for host, row in state.hosts.index.items():
        last, recent, blocked = state.hosts.state(row)
        hosts.append(HostRecord(host=host, last_fetch_at=last, recent=recent,
                                blocked_until=blocked))
    labels = upkeep.labels
    return SchedulerSnapshot(
        format=SNAPSHOT_FORMAT, saved_at=now, settings=state.settings, feeds=feeds, hosts=hosts,
        learned=state.learner.to_state(np.asarray(slots, dtype=np.int64)),
        centroids=None if upkeep.centroids is None else upkeep.centroids.tolist(),
        budget_tokens=float(state.bucket[0]), clock_high=upkeep.clock_high,
        next_refit_at=upkeep.next_refit_at, next_cluster_refit_at=upkeep.next_cluster_refit_at,
        policy_state=policy.state(), rng_state=_ints_to_text(state.rng.bit_generator.state),
        random_state=list(state.random.getstate()), spend=state.spend.state(),
        labels=[int(labels[slot]) if slot < len(labels) else -1 for slot in slots])


def decode_snapshot(snapshot: SchedulerSnapshot | bytes) -> SchedulerSnapshot:
    """``snapshot`` decoded from MessagePack when it is bytes, and checked to be of this format."""
    if isinstance(snapshot, (bytes, bytearray, memoryview)):
        try:
            snapshot = msgspec.msgpack.decode(snapshot, type=SchedulerSnapshot)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise SnapshotError(f"cannot decode scheduler snapshot: {error}") from error
    if snapshot.format != SNAPSHOT_FORMAT:
        raise SnapshotError(f"snapshot format {snapshot.format} is not supported "
                            f"(this version reads {SNAPSHOT_FORMAT})")
    return snapshot


def load_snapshot(state: SchedulerState, upkeep: Upkeep, policy: Policy,
                  snapshot: SchedulerSnapshot, *, now: float) -> None:
    """Fill a new scheduler's parts (holding no feed yet) from ``snapshot``, resuming at ``now``
    (see :meth:`~.scheduler.Scheduler.restore`)."""
    for record in snapshot.feeds:
        slot = state.new_slot(record.feed_id, record.host)
        F, I = state.table.F, state.table.I  # the table may have grown
        state.active_count += 0 if record.gone else 1
        F[slot, F_WEIGHT] = record.weight
        state.set_hints(slot, record.hints)
        if record.gone:
            I[slot, I_FLAGS] |= FLAG_GONE
        F[slot, F_LAST_FETCH] = np.nan if record.last_fetch_at is None else record.last_fetch_at
        F[slot, F_LAST_SUCCESS] = np.nan if record.last_success_at is None else \
            record.last_success_at
        I[slot, I_ERRORS] = record.error_streak
        F[slot, F_BACKOFF] = record.backoff_until
        F[slot, F_PHASE] = record.phase
        F[slot, F_DITHER] = record.dither_s
        state.notes[slot] = dict(n.split("=", 1) for n in record.notes) or None
    upkeep.update_kernel_settings()
    for slot, record in enumerate(snapshot.feeds):
        if not record.gone:
            policy.on_added(slot, upkeep.base_interval_s())
    slots = np.arange(len(snapshot.feeds))
    state.learner.ensure_capacity(len(slots))
    try:
        state.learner.load_state(snapshot.learned, slots)
    except (KeyError, ValueError, TypeError) as error:
        raise SnapshotError(f"learned state in the snapshot is unusable: {error}") from error
    for host in snapshot.hosts:
        state.hosts.load(host.host, last_fetch_at=host.last_fetch_at, recent=host.recent,
                         blocked_until=host.blocked_until)
    if snapshot.centroids is not None:
        upkeep.centroids = np.asarray(snapshot.centroids, dtype=np.float64)
    if snapshot.labels is not None and len(snapshot.labels) == len(slots):
        upkeep.labels = np.asarray(snapshot.labels, dtype=np.int64)
    upkeep.next_cluster_refit_at = snapshot.next_cluster_refit_at
    state.bucket[0] = snapshot.budget_tokens
    if snapshot.spend is not None:
        state.spend.load(snapshot.spend)
    slot_map = {record.slot: new for new, record in enumerate(snapshot.feeds)}
    policy.load_state(snapshot.policy_state, slot_map)
    state.rng.bit_generator.state = _text_to_ints(snapshot.rng_state)
    random_state = snapshot.random_state
    state.random.setstate((random_state[0], tuple(random_state[1]),  # type: ignore[arg-type]
                           random_state[2]))
    upkeep.clock_high = -float("inf")
    now = upkeep.tick(now)
    upkeep.refit(now)
    for new, record in enumerate(snapshot.feeds):
        if record.gone:
            continue
        due = record.next_due_at
        if record.in_flight or record.awaiting_plan or due is None:
            due = now - 2 * _OVERDUE_S  # fetch soon, spread with the other overdue feeds
        state.push(new, due)
    upkeep.respread_overdue(now)


def _ints_to_text(value: object) -> object:
    """numpy's PCG64 state holds 128-bit integers; MessagePack holds 64. Store them as text."""
    if isinstance(value, dict):
        return {k: _ints_to_text(v) for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool):
        return f"int:{value}"
    return value


def _text_to_ints(value: object) -> object:
    if isinstance(value, dict):
        return {k: _text_to_ints(v) for k, v in value.items()}
    if isinstance(value, str) and value.startswith("int:"):
        return int(value[4:])
    return value
