"""The reflector tier (Cobra section 3.3): keeps each subscription's last k matching entries and
serves them back as a feed.

It consumes ``matches.<n>`` (articles and the ids of this reflector's subscriptions they matched,
or the article alone, which it re-matches against its own index) and the ``control`` subject
(subscriptions added and removed). Matches are committed in small batches to a log
(:class:`feedmesh.store.ReflectorLog`), and only then applied to the held entries in memory
(:class:`TopK`), acknowledged and the feeds' versions bumped: a feed never shows an entry a crash
could take back. The held entries are checkpointed every minute and at shutdown, which truncates the
log (:mod:`.held`). When the log cannot be written (a full disk), the batch is handed back to the
bus to be tried again (:mod:`.deliveries`), and nothing of it is shown.

Memory pressure degrades service as Cobra describes, never by crashing: above
``soft_memory_bytes`` new entries are stored without their bodies (title and link kept); above
``hard_memory_bytes`` new entries are dropped. Each degradation is logged (at most once a minute)
and counted in ``feedmesh_reflector_degraded``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import msgspec
import nh3
import numpy as np

from feedmesh import failpoints
from feedmesh.bus import Bus, Consumer, Delivery
from feedmesh.clock import Clock
from feedmesh.hub.deliveries import Settle
from feedmesh.hub.idcodec import decode_ids, encode_ids
from feedmesh.hub.messages import (
    Article,
    Matched,
    MatchedBatch,
    SubscriptionAdded,
    SubscriptionRemoved,
)
from feedmesh.hub.metrics import HubMetrics, process_rss_bytes
from feedmesh.hub.tiers.held import Restored, VersionColumns, checkpoint_arrays, restore_held
from feedmesh.hub.tiers.subtable import SubTable
from feedmesh.hub.tiers.topk import WIDTH, TopK

try:  # numba is the optional ``fast`` extra
    from feedmesh.hub.tiers.topk_kernel import bump_versions
except ImportError:
    bump_versions = None
from feedmesh.match import SubscriptionIndex, parse_query
from feedmesh.store import ReflectedItem, ReflectorLog, StoreError, StoreThread

__all__ = ["Reflector", "ReflectorSettings"]

log = logging.getLogger("feedmesh.hub.reflector")
_encoder = msgspec.msgpack.Encoder()

COPY_SLICE = 65_536
"""Rows of the held entries copied at a time for a checkpoint (~0.2 ms), between batches."""
TRUNCATE_CHUNK = 100
"""Match log rows deleted per transaction after a checkpoint (~5 ms)."""
DELETE_CHUNK = 2000
"""Items deleted per transaction by garbage collection, so the stream's writes interleave."""
RECENT_PAIRS = 65_536
"""(entry, shard, content) triples a reflector remembers having stored, to skip a copy: a filter
that died before acknowledging a batch matches it again, and when the batch is formed otherwise
the second time (more articles had arrived) the bus's duplicate window does not catch the copy.
The log and the held entries would ignore it anyway; this keeps its pushes and version bumps
from happening twice."""
EDITED_OFFSET = 1 << 40
"""Added to the version of a feed edited after the last checkpoint when it is restored: above
every version it had (entry ids stay far below), so no reader's old copy is taken as current."""


class ReflectorSettings(msgspec.Struct, frozen=True, kw_only=True):
    batch_interval_s: float = 0.02
    """Group commit: a batch of matches gathers until this long after the one before began (one
    log write each); behind a batch that took longer, what waited goes at once."""
    batch_max: int = 256
    summary_limit: int = 1024
    """Characters of summary kept per entry (Cobra kept the first 1 KB of the body)."""
    soft_memory_bytes: int = 0
    """Above this resident size, drop bodies of new entries (0: never)."""
    hard_memory_bytes: int = 0
    """Above this resident size, drop new entries (0: never)."""
    checkpoint_interval_s: float = 60.0
    """How often the held entries are checkpointed and the match log truncated."""
    gc_interval_s: float = 600.0


AppliedBatch = list[tuple[ReflectedItem, np.ndarray, int]]
"""Each stored entry of a batch, the subscriptions it was stored for, and its filter shard."""


class ReflectorEvents(Protocol):
    """What a reflector tells of the matches it stores, given to it at construction."""

    def matched(self, batch: AppliedBatch) -> None:
        """A batch, once committed to the log and shown in the feeds."""
        ...


class Reflector:
    def __init__(self, number: int, log: ReflectorLog, bus: Bus, clock: Clock,
                 metrics: HubMetrics, settings: ReflectorSettings | None = None, *,
                 index: SubscriptionIndex | None = None,
                 memory_probe: Callable[[], int] = process_rss_bytes,
                 events: ReflectorEvents | None = None) -> None:
        self.number = number
        self.log = log
        self.bus = bus
        self.clock = clock
        self.metrics = metrics
        self.settings = settings or ReflectorSettings()
        self.subs = SubTable()
        self.topk = TopK()
        self.applied_seq = 0
        self.index = index
        """Only with the filters' ``article`` delivery: this reflector's own subscriptions, to
        re-match each article against (Cobra's final design)."""
        self.memory_probe = memory_probe
        self.events = events
        """Told of every batch once it is committed and shown (the push worker beside it)."""
        self._writer = StoreThread()
        self._reader = StoreThread()
        metrics.held_pairs[number] = lambda: self.topk.pairs()
        self._last_warning: dict[str, float] = {}
        self._checkpointed_seq = 0
        self._maintenance = asyncio.Lock()
        self._spare: TopK | None = None
        """The copy checkpoints and garbage collection read while the stream goes on."""
        self._restored = False
        self._recent: dict[tuple[int, int, int], None] = {}
        self._batch_keys: dict[tuple[int, int, int], None] = {}
        self._control: Consumer | None = None
        self._changed_at = np.zeros(0, dtype=np.float64)
        """When each subscription was last edited, as loaded at start-up (for its version)."""
        self.settle = Settle(bus, f"reflector-{number}", metrics)
        self.control_joined = asyncio.Event()
        self.stream_joined = asyncio.Event()
        """Set once the tier's groups exist on the bus (see FilterTier's)."""

    def restore(self) -> None:
        """Load the held entries (checkpoint + log) once the subscriptions are registered, so
        that each one's keep is known; rows of subscriptions that no longer exist are dropped.
        Feeds' versions come back as they were (see :meth:`_restore_versions`)."""
        restored = restore_held(self.log, self.subs.keep)
        self.topk, self.applied_seq = restored.topk, restored.last_seq
        self._checkpointed_seq = 0  # the log after the checkpoint is folded in at the next one
        subs = self.subs
        self.topk.ensure(subs.capacity - 1)
        subs.ensure(self.topk.capacity - 1)
        gone = np.flatnonzero(~subs.active[: self.topk.capacity] & self.topk.rows.any(axis=1))
        for sub_id in gone.tolist():
            self.topk.drop(sub_id)
        for sub_id in [s for s in self.topk.extra if not subs.is_active(s)]:
            self.topk.drop(sub_id)
        self._restore_versions(restored)
        self._restored = True

    def _restore_versions(self, restored: Restored) -> None:
        """Every feed's version as the live reflector had it: the checkpoint's columns (taken at
        its log position exactly), then the log rows after it by the rule :meth:`_apply` follows.
        A reader's ETag and Last-Modified are the same after a restart as before it. A feed
        edited after the checkpoint (its name, query or keep: changes the log does not hold)
        gets a version no earlier content had instead, drawn from when it was edited."""
        subs = self.subs
        saved = restored.versions
        if saved is None and restored.checkpointed:  # a checkpoint from before versions were kept
            held = self.topk.newest.astype(np.int64)
            for sub_id, values in self.topk.extra.items():
                held[sub_id] = values.max() if len(values) else 0
            known = np.flatnonzero(held)
            subs.version[known] = held[known]
        elif saved is not None:
            n = min(len(saved.version), subs.capacity)
            active = subs.active[:n]
            subs.version[:n][active] = saved.version[:n][active]
            subs.modified[:n][active] = np.maximum(subs.modified[:n][active],
                                                   saved.modified[:n][active])
            changed = np.zeros(subs.capacity, dtype=np.float64)
            known = min(len(self._changed_at), subs.capacity)
            changed[:known] = self._changed_at[:known]
            edited = np.flatnonzero(subs.active & (changed > saved.taken_at))
            stamps = (changed[edited] * 1000).astype(np.int64) & 0xFFFF_FFFF
            subs.version[edited] += EDITED_OFFSET + stamps
            subs.modified[edited] = changed[edited]
        if not restored.replayed:
            return
        stored_at = {item.entry_id: item.stored_at for item in self.log.items(
            sorted({entry_id for entry_id, _ in restored.replayed}))}
        fallback = saved.taken_at if saved is not None else 0.0
        for entry_id, ids in restored.replayed:
            ids = subs.active_ids(ids)
            if len(ids):
                self._bump(ids, entry_id, stored_at.get(entry_id, fallback))

    # -- subscriptions ----------------------------------------------------------------------

    def register(self, sub_id: int, keep: int, generation: int, modified: float = 0.0, *,
                 query: str = "") -> None:
        """Create or update one of this reflector's subscriptions."""
        subs = self.subs
        if self.index is not None and query:
            if subs.is_active(sub_id):
                self.index.remove(sub_id)
            self.index.add(sub_id, parse_query(query))
        subs.ensure(sub_id)
        self.topk.ensure(sub_id)
        if subs.active[sub_id]:
            # A change of name, query, keep or URL changes what its feed shows (title, length),
            # so its validators must change too, or readers would keep a stale copy on a 304.
            subs.version[sub_id] += 1
            subs.modified[sub_id] = max(modified, subs.modified[sub_id])
        elif subs.modified[sub_id] == 0.0:
            subs.modified[sub_id] = modified
        subs.active[sub_id] = True
        if keep > WIDTH >= subs.keep[sub_id] and sub_id not in self.topk.extra:
            self.topk.widen(sub_id)
        subs.keep[sub_id] = keep
        subs.generation[sub_id] = generation

    def load(self, columns: dict[str, np.ndarray], queries: Iterable[tuple[int, str]] = ()) -> int:
        """Register this reflector's subscriptions at start-up from the hub's numpy columns
        (``HubState.subscription_columns``), then restore what they held. ``queries`` feeds the
        re-match index (``article`` delivery only)."""
        mask = columns["reflector"] == self.number
        ids = columns["id"][mask]
        if len(ids):
            subs = self.subs
            subs.ensure(int(ids.max()))
            subs.active[ids] = True
            subs.keep[ids] = columns["keep"][mask]
            subs.generation[ids] = columns["generation"][mask]
            subs.modified[ids] = columns["created_at"][mask]
            changed = np.zeros(subs.capacity, dtype=np.float64)
            changed[ids] = columns["changed_at"][mask]
            self._changed_at = changed
        if self.index is not None:
            self.index = SubscriptionIndex.build(
                (sub_id, query) for sub_id, query in queries if self.subs.is_active(sub_id))
        self.restore()
        return len(ids)

    async def unregister(self, sub_id: int) -> None:
        if self.subs.is_active(sub_id):
            self.subs.active[sub_id] = False
            self.topk.drop(sub_id)
            if self.index is not None:
                self.index.remove(sub_id)

    # -- the tier's loop --------------------------------------------------------------------

    async def join_control(self) -> Consumer:
        """Join this reflector's group of ``control``. A reflector process joins before it loads
        the subscriptions, so no change falls between what it read and what it is sent."""
        if self._control is None:
            self._control = await self.bus.consumer("control", f"reflector-{self.number}")
            self.control_joined.set()
        return self._control

    async def run_control(self) -> None:
        consumer = await self.join_control()
        async for delivery in consumer:
            message = await self.settle.decoded(delivery)
            if isinstance(message, SubscriptionAdded) and message.reflector == self.number:
                self.register(message.sub_id, message.keep, message.generation,
                              self.clock.now(), query=message.query)
            elif isinstance(message, SubscriptionRemoved) and message.reflector == self.number:
                await self.unregister(message.sub_id)
            await delivery.ack()

    async def run(self) -> None:
        if not self._restored:
            self.restore()
        consumer = await self.bus.consumer(f"matches.{self.number}", f"reflector-{self.number}")
        self.stream_joined.set()
        loop = asyncio.get_running_loop()
        next_checkpoint = loop.time() + self.settings.checkpoint_interval_s
        next_gc = loop.time() + self.settings.gc_interval_s
        maintenance: asyncio.Task[None] | None = None
        began = -math.inf
        while True:
            first = await consumer.get()
            if first is None:
                break  # the bus closed
            pending = [first]
            # Group commit: a batch gathers until batch_interval_s after the one before began.
            # Under load the one before took longer than that, and what waited meanwhile goes
            # at once; after a quiet spell a match goes at once too. (Counted from the first
            # match instead, every match waited out the window behind a busy batch as well.)
            deadline = began + self.settings.batch_interval_s
            while len(pending) < self.settings.batch_max:
                delivery = await consumer.get(max(0.0, deadline - loop.time()))
                if delivery is None:
                    break
                pending.append(delivery)
            began = loop.time()
            try:
                await self._store_batch(pending)
            except Exception as exc:  # a bug: hand the batch back before the loop restarts
                for delivery in pending:
                    await self.settle.retry_later(delivery, exc)
                raise
            # Checkpoints and garbage collection run beside the stream, not in its way: the
            # next batches are stored while they work.
            if maintenance is not None:
                if not maintenance.done():
                    continue
                maintenance.result()  # a bug, not a full disk: let the supervisor see it
            checkpoint, collect = loop.time() > next_checkpoint, loop.time() > next_gc
            if checkpoint:
                next_checkpoint = loop.time() + self.settings.checkpoint_interval_s
            if collect:
                next_gc = loop.time() + self.settings.gc_interval_s
            if checkpoint or collect:
                maintenance = asyncio.create_task(self._maintain(checkpoint, collect))
        if maintenance is not None:
            await maintenance

    async def _maintain(self, checkpoint: bool, collect: bool) -> None:
        try:
            if checkpoint:
                await self.checkpoint()
            if collect:
                await self.collect_garbage()
        except StoreError as exc:  # e.g. a full disk: the stream goes on
            log.error("reflector_maintenance_failed reflector=%d error=%r", self.number, exc)

    async def checkpoint(self, *, paced: bool = True) -> None:
        """Persist the held entries and truncate the match log up to what they include (at
        once when not ``paced``: at shutdown, nothing is waiting)."""
        async with self._maintenance:
            if self.applied_seq <= self._checkpointed_seq:
                return
            upto = self.applied_seq  # the copy begins here: it holds every log row up to upto
            # The versions are not idempotent like the rows: copied at upto exactly (no await).
            versions = VersionColumns(self.subs.version.copy(), self.subs.modified.copy(),
                                      self.clock.now())
            snapshot = await self._copy_held()
            failpoints.reached("reflector.checkpoint_copied")
            # the nonzero rows are picked out on the worker thread too, off the event loop
            await asyncio.to_thread(lambda: self.log.write_checkpoint(
                checkpoint_arrays(snapshot, versions), upto))
            failpoints.reached("reflector.checkpoint_written")
            # A minute of log at 200 articles/s is ~13,000 rows of ~16 KB: deleted back to back
            # they hold the writer (and so the stream) for most of a second. Small deletions,
            # spread over half the interval, each delay one of the stream's writes by a few ms.
            rows = max(1, upto - self._checkpointed_seq)
            pause = min(0.1, 0.5 * self.settings.checkpoint_interval_s * TRUNCATE_CHUNK / rows)
            chunk = TRUNCATE_CHUNK if paced else 10 * TRUNCATE_CHUNK
            while await self._writer.call(self.log.truncate_log, upto, chunk):
                if paced:
                    await asyncio.sleep(pause)
            self._checkpointed_seq = upto

    async def _copy_held(self) -> TopK:
        """A copy of the held entries, taken a slice at a time between the stream's batches into
        a spare kept for the purpose (see :meth:`TopK.copy_slice`). Valid until the maintenance
        lock is released."""
        if self._spare is None:
            self._spare = TopK(capacity=0)
        start = 0
        while start < self.topk.capacity:
            start = self.topk.copy_slice(self._spare, start, start + COPY_SLICE)
            await asyncio.sleep(0)
        self.topk.copy_extra(self._spare)
        return self._spare

    async def collect_garbage(self) -> int:
        """Delete the stored items no subscription holds any more; returns how many. Never at
        the same time as a checkpoint: an item stored again meanwhile is protected by its log
        row until the next one."""
        async with self._maintenance:
            snapshot = await self._copy_held()
            dead = await asyncio.to_thread(
                lambda: self.log.unheld_items(snapshot.live_entries()))
            removed = 0
            for start in range(0, len(dead), DELETE_CHUNK):
                removed += await self._writer.call(self.log.delete_items,
                                                   dead[start:start + DELETE_CHUNK])
            if removed:
                log.info("reflector_garbage_collected reflector=%d items=%d", self.number,
                         removed)
            return removed

    async def _store_batch(self, deliveries: list[Delivery]) -> None:
        now = self.clock.now()
        memory = self.memory_probe()
        batch: list[tuple[ReflectedItem, np.ndarray, int]] = []
        log_rows: list[tuple[ReflectedItem, bytes, int]] = []
        watermarks: dict[int, int] = {}
        settled: list[Delivery] = []
        self._batch_keys = {}
        for delivery in deliveries:
            message = await self.settle.decoded(delivery)
            if message is None:
                continue  # acknowledged as undecodable
            settled.append(delivery)
            if isinstance(message, MatchedBatch):  # a filter's batch: an article at a time
                try:
                    items = message.items()
                except ValueError as exc:  # one bad message must not stall the tier
                    log.error("reflector_bad_message reflector=%d error=%r", self.number, exc)
                    continue
            elif isinstance(message, Matched):
                items = [message]
            else:
                continue
            self.metrics.bytes_in.labels("reflector").inc(delivery.size)
            for matched in items:
                self._take(matched, now, memory, batch, log_rows, watermarks)
        if batch or watermarks:
            try:
                seq = await self._writer.call(self.log.store, log_rows, watermarks)
            except StoreError as exc:  # nothing of the batch is stored, nor shown: try again
                for delivery in settled:
                    await self.settle.retry_later(delivery, exc)
                return
            self._apply(batch, now)
            self.applied_seq = max(self.applied_seq, seq)
            self._recent.update(self._batch_keys)
            while len(self._recent) > RECENT_PAIRS:
                del self._recent[next(iter(self._recent))]
        # Together (Bus.ack_many): on NATS one write and one answer for the batch, not a
        # round trip each; the next batch waits for these.
        await self.bus.ack_many(settled)

    def _take(self, matched: Matched, now: float, memory: int, batch: AppliedBatch,
              log_rows: list[tuple[ReflectedItem, bytes, int]],
              watermarks: dict[int, int]) -> None:
        """Add one article's matches to the batch being stored (and its shard's watermark)."""
        article = matched.article
        self.metrics.articles_in.labels("reflector").inc()
        if matched.shard >= 0:  # a new subscription's first entries carry no watermark
            watermarks[matched.shard] = max(watermarks.get(matched.shard, 0), article.entry_id)
        try:
            if matched.sub_ids is None:
                ids = (self.index.match_entry(article.entry, article.feed_url,
                                              article.feed_language, article.tokens)
                       if self.index is not None else np.zeros(0, np.int64))
            else:
                ids = decode_ids(matched.sub_ids)
        except (ValueError, zlib.error) as exc:  # one bad message must not stall the tier
            log.error("reflector_bad_message reflector=%d entry=%d error=%r", self.number,
                      article.entry_id, exc)
            return
        received = len(ids)
        ids = self.subs.active_ids(ids)
        if not len(ids):
            return
        key = (article.entry_id, matched.shard, zlib.crc32(_encoder.encode(article.entry)))
        if key in self._recent or key in self._batch_keys:
            return  # a copy of what is stored (see RECENT_PAIRS)
        item = self._item(article, now, memory, matched.matched_at)
        if item is None:
            return
        self._batch_keys[key] = None
        batch.append((item, ids, matched.shard))
        # The log keeps the filter's bytes unless some ids were dropped here.
        log_rows.append((item, matched.sub_ids if matched.sub_ids is not None
                         and len(ids) == received else encode_ids(ids), matched.shard))

    def _item(self, article: Article, now: float, memory: int,
              matched_at: float = 0.0) -> ReflectedItem | None:
        s = self.settings
        entry = article.entry
        degraded = False
        if s.hard_memory_bytes and memory > s.hard_memory_bytes:
            self._warn(f"reflector_dropping_entries reflector={self.number} rss_bytes={memory} "
                       f"limit={s.hard_memory_bytes}")
            self.metrics.degraded.labels("dropped").inc()
            return None
        if s.soft_memory_bytes and memory > s.soft_memory_bytes:
            self._warn(f"reflector_dropping_bodies reflector={self.number} rss_bytes={memory} "
                       f"limit={s.soft_memory_bytes}")
            self.metrics.degraded.labels("body_dropped").inc()
            entry = msgspec.structs.replace(entry, summary="", content="", enclosures=())
            degraded = True
        else:
            summary = entry.summary or entry.content
            entry = msgspec.structs.replace(entry, summary=_trim_html(summary, s.summary_limit),
                                            content="")
        return ReflectedItem(entry_id=article.entry_id, feed_id=article.feed_id,
                             feed_url=article.feed_url, feed_title=article.feed_title,
                             first_seen_at=article.first_seen_at, stored_at=now, entry=entry,
                             degraded=degraded, matched_at=matched_at)

    def _apply(self, batch: list[tuple[ReflectedItem, np.ndarray, int]], now: float) -> None:
        """Put committed matches into the held entries and move the feeds' versions."""
        subs = self.subs
        any_wide = bool(self.topk.extra) or bool((subs.keep > WIDTH).any())
        for item, ids, shard in batch:
            self.topk.ensure(int(ids.max()))
            keep = subs.keep[ids].astype(np.int64) if any_wide else None
            self.topk.insert(item.entry_id, ids, keep)
            self._bump(ids, item.entry_id, now)
            if shard >= 0:  # stored entries given to a new subscription are not latency
                self.metrics.hub_latency.observe(max(0.0, item.stored_at - item.first_seen_at))
            self.metrics.articles_out.labels("reflector").inc()
        if self.events is not None and batch:
            self.events.matched(batch)

    def _bump(self, ids: np.ndarray, entry_id: int, now: float) -> None:
        """Move the feeds ``ids`` on for a stored match of ``entry_id``: +1 so that an edited
        entry (same id) still changes their ETags. Start-up replays the log by this rule."""
        subs = self.subs
        if bump_versions is not None:
            bump_versions(subs.version, subs.modified, ids, entry_id, now)
        else:
            subs.version[ids] = np.maximum(subs.version[ids] + 1, entry_id)
            subs.modified[ids] = now

    def _warn(self, message: str) -> None:
        """Log a degradation, each kind at most once a minute (it may happen per entry)."""
        kind = message.split(" ", 1)[0]
        now = time.monotonic()
        if now - self._last_warning.get(kind, -1e9) > 60:
            self._last_warning[kind] = now
            log.warning(message)

    # -- serving ----------------------------------------------------------------------------

    def holds(self, sub_id: int) -> bool:
        """Whether this reflector holds ``sub_id``'s feed (at any URL generation)."""
        return self.subs.is_active(sub_id)

    def subscription_count(self) -> int:
        return self.subs.count()

    def serves(self, sub_id: int, generation: int) -> bool:
        """Whether this reflector holds ``sub_id`` at URL generation ``generation``."""
        return (self.subs.is_active(sub_id)
                and int(self.subs.generation[sub_id]) == generation)

    def version(self, sub_id: int) -> tuple[int, float]:
        """The feed's content version and when it last changed (what its validators carry)."""
        return int(self.subs.version[sub_id]), float(self.subs.modified[sub_id])

    def memory_bytes(self) -> int:
        """What this reflector holds in memory: the newest-k rows and the spare copy that
        checkpoints read, the per-subscription columns, its re-match index (``article``
        delivery) and its SQLite page caches (2 MB each)."""
        index = self.index.stats().index_bytes if self.index is not None else 0
        spare = self._spare.nbytes() if self._spare is not None else 0
        return self.topk.nbytes() + spare + self.subs.nbytes() + index + 2 * 2 * 1024 * 1024

    def held(self, sub_id: int) -> int:
        return min(self.topk.count(sub_id), int(self.subs.keep[sub_id]))

    async def items(self, sub_id: int,
                    known: Mapping[int, ReflectedItem] | None = None) -> list[ReflectedItem]:
        """The entries the feed shows, newest first; those in ``known`` (items the caller
        kept from recent batches) are not read from the log again."""
        keep = int(self.subs.keep[sub_id]) or WIDTH
        ids = [int(e) for e in self.topk.newest_ids(sub_id, keep)]
        if known is None:
            return await self._reader.call(self.log.items, ids)
        missing = [e for e in ids if e not in known]
        found = {i.entry_id: i for i in await self._reader.call(self.log.items, missing)} \
            if missing else {}
        return [item for e in ids if (item := known.get(e) or found.get(e)) is not None]

    async def close_async(self) -> None:
        """Checkpoint, so the next start-up replays as little as possible, then close."""
        await self.checkpoint(paced=False)
        self.close()

    def close(self) -> None:
        self._writer.close()
        self._reader.close()
        self.log.close()


def _trim_html(fragment: str, limit: int) -> str:
    """About ``limit`` characters of a sanitized HTML fragment, never cutting a tag in half."""
    if len(fragment) <= limit:
        return fragment
    cut = fragment[:limit]
    open_tag = cut.rfind("<")
    if open_tag > cut.rfind(">"):
        cut = cut[:open_tag]
    return nh3.clean(cut.rstrip() + "…")  # closes the elements the cut left open
