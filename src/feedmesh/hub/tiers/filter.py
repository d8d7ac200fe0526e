"""The filter tier (Cobra section 3.2): matches every article against one shard of the
subscriptions and tells each reflector which of its subscriptions matched.

Shards split subscriptions by id (``sub_id % shards == shard``: Cobra's out-decomposition); every
shard sees every article (its own group on the ``articles`` subject).

What goes to the reflector is Cobra's trade-off (section 3.3), a setting here:

* ``ids`` (default): the article and the matching subscription ids as varint gaps
  (:mod:`.idcodec`: about a byte per id, not Cobra's four). The reflector does no matching.
* ``article``: the article alone; each reflector re-matches it against its own subscriptions
  (Cobra's final design, chosen when id lists of 100,000 subscriptions cost 400 KB per article).
"""

from __future__ import annotations

import asyncio
import json
import logging
import mmap
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import msgspec
import numpy as np

from feedmesh import failpoints
from feedmesh.bus import Bus, Consumer, Delivery, Outgoing
from feedmesh.clock import Clock
from feedmesh.hub.deliveries import Settle
from feedmesh.hub.idcodec import encode_routed, first_reflector_bits
from feedmesh.hub.messages import (
    Article,
    MatchedBatch,
    SubscriptionAdded,
    SubscriptionRemoved,
    encode,
)
from feedmesh.hub.metrics import HubMetrics
from feedmesh.match import IndexSnapshotError, SubscriptionIndex, parse_query
from feedmesh.match.packed import PACKED_VERSION
from feedmesh.store import HubState

__all__ = ["FilterTier"]

log = logging.getLogger("feedmesh.hub.filter")

StateOpener = Callable[[], HubState]
"""Opens the hub's state in another process (picklable: the composition root makes it)."""

BATCH_MAX = 64
"""Articles a filter takes from what the bus already holds for it, at most, at once."""


class FilterTier:
    def __init__(self, shard: int, shards: int, bus: Bus, clock: Clock, metrics: HubMetrics,
                 *, delivery: str = "ids") -> None:
        if delivery not in ("ids", "article"):
            raise ValueError(f"filter delivery must be 'ids' or 'article', not {delivery!r}")
        self.shard = shard
        self.shards = shards
        self.bus = bus
        self.clock = clock
        self.metrics = metrics
        self.delivery = delivery
        self.index = SubscriptionIndex()
        self.reflector_of = np.full(1024, -1, dtype=np.int16)
        """Subscription id -> the reflector its matches go to; -1: not an active subscription
        of this shard (two bytes a subscription: what routing a match reads). Changed only
        through :meth:`set_route`, which keeps :attr:`first` beside it."""
        self.first = np.zeros(len(self.reflector_of) // 8, dtype=np.uint8)
        """The subscriptions whose reflector is 0, a bit each: what a shard of one reflector
        routes by (:func:`~feedmesh.hub.idcodec.encode_routed`)."""
        self.every_first = True
        """Whether every subscription of :attr:`index` goes to reflector 0: then a shard of one
        reflector routes its matches without looking any up (checked over the whole index at
        :meth:`load`, cleared by :meth:`set_route` when one of them goes elsewhere)."""
        self.reflectors: set[int] = set()
        self._snapshot: mmap.mmap | None = None
        self.settle = Settle(bus, f"filter-{shard}", metrics)
        self._control: Consumer | None = None
        self.control_joined = asyncio.Event()
        self.stream_joined = asyncio.Event()
        """Set once the tier's groups exist on the bus: a bus keeps a message for the groups
        that existed when it was published, so the hub publishes nothing before."""

    def owns(self, sub_id: int) -> bool:
        return sub_id % self.shards == self.shard

    def load(self, state: HubState, columns: dict[str, np.ndarray], snapshot_dir: Path,
             open_state: StateOpener) -> int:
        """Build the shard's index at start-up: from its snapshot plus the subscriptions changed
        since (milliseconds for a million), else from the stored queries (seconds), in a child
        process that opens the state with ``open_state``, after which a snapshot is written.
        Returns how many subscriptions the shard holds."""
        ids = columns["id"]
        owned = ids % self.shards == self.shard
        mine = ids[owned]
        if len(mine):
            reflectors = columns["reflector"][owned]
            for reflector in np.unique(reflectors).tolist():
                _check_reflector(reflector)
                self.reflectors.add(reflector)
            self._ensure(int(mine.max()))
            self.reflector_of[mine] = reflectors
            self.first = first_reflector_bits(self.reflector_of)
        path = snapshot_dir / f"filter-{self.shard}-of-{self.shards}.index"
        if not self._restore(state, path):
            # Building from query text peaks at GBs for millions of subscriptions, memory a
            # process never gives back: build in a short-lived child, then map its snapshot.
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
                pool.submit(build_snapshot, open_state, self.shard, self.shards,
                            str(path)).result()
            if not self._restore(state, path):
                raise RuntimeError(f"filter shard {self.shard}: the snapshot just built at "
                                   f"{path} cannot be read")
        self.every_first = self._all_routed_first()
        return len(mine)

    def _all_routed_first(self) -> bool:
        ids = self.index.ids()
        inside = ids < 8 * len(self.first)
        return bool(inside.all()) and bool(
            ((self.first[ids >> 3] >> (ids & 7).astype(np.uint8)) & 1).all())

    def _restore(self, state: HubState, path: Path) -> bool:
        try:
            with open(f"{path}.json") as f:
                seq = int(json.load(f)["seq"])
            with open(path, "rb") as f:
                self._snapshot = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            index = SubscriptionIndex.from_bytes(self._snapshot)
            failpoints.reached("filter.snapshot_mapped")
        except FileNotFoundError:
            return False
        except (OSError, ValueError, KeyError, IndexSnapshotError) as exc:
            log.warning("filter_snapshot_unusable shard=%d path=%s error=%r; rebuilding",
                        self.shard, path, exc)
            return False
        changed = [s for s in state.changed_since(seq) if self.owns(s)]
        for sub_id in changed:
            index.remove(sub_id)
        for sub_id, query in state.queries(changed):
            index.add(sub_id, query)
        self.index = index
        log.info("filter_restored shard=%d subscriptions=%d changed_since_snapshot=%d",
                 self.shard, len(index), len(changed))
        return True

    def save(self, path: Path, seq: int) -> None:
        """Write the shard's index snapshot (compacting first) and the change seq it covers."""
        write_snapshot(self.index, path, seq)

    async def maintain(self) -> None:
        """Fold added and removed subscriptions into the main index when it pays off; the build
        runs in a worker thread while matching goes on."""
        if self.index.maintenance_due():
            await self.index.compact_in_background()

    def is_active(self, sub_id: int) -> bool:
        return 0 <= sub_id < len(self.reflector_of) and bool(self.reflector_of[sub_id] >= 0)

    def _ensure(self, sub_id: int) -> None:
        if sub_id >= len(self.reflector_of):
            size = len(self.reflector_of)
            while size <= sub_id:
                size *= 2
            grown = np.full(size, -1, dtype=np.int16)
            grown[:len(self.reflector_of)] = self.reflector_of
            self.reflector_of = grown
            first = np.zeros(size // 8, dtype=np.uint8)
            first[:len(self.first)] = self.first
            self.first = first

    def set_route(self, sub_id: int, reflector: int) -> None:
        """Send ``sub_id``'s matches to ``reflector`` (-1: to none), in the table and its
        bitmap."""
        if reflector != 0 and sub_id in self.index:
            self.every_first = False
        self._ensure(sub_id)
        self.reflector_of[sub_id] = reflector
        byte, bit = divmod(sub_id, 8)
        if reflector == 0:
            self.first[byte] |= 1 << bit
        else:
            self.first[byte] &= 0xFF ^ (1 << bit)

    def add(self, sub_id: int, query: str, reflector: int) -> None:
        if not self.owns(sub_id):
            return
        _check_reflector(reflector)
        if self.is_active(sub_id):  # a changed query replaces the old one
            self.index.remove(sub_id)
        self.index.add(sub_id, parse_query(query))
        self.set_route(sub_id, reflector)
        self.reflectors.add(reflector)

    def remove(self, sub_id: int) -> None:
        if self.owns(sub_id) and self.is_active(sub_id):
            self.index.remove(sub_id)
            self.set_route(sub_id, -1)

    async def join_control(self) -> Consumer:
        """Join the shard's group of ``control``. A filter process joins before it loads the
        subscriptions, so no change falls between what it read and what it is sent."""
        if self._control is None:
            self._control = await self.bus.consumer("control", f"filter-{self.shard}")
            self.control_joined.set()
        return self._control

    async def run_control(self) -> None:
        consumer = await self.join_control()
        async for delivery in consumer:
            message = await self.settle.decoded(delivery)
            if isinstance(message, SubscriptionAdded):
                self.add(message.sub_id, message.query, message.reflector)
            elif isinstance(message, SubscriptionRemoved):
                self.remove(message.sub_id)
            await delivery.ack()
            await self.maintain()

    async def run(self) -> None:
        """Batch after batch (:meth:`process_batch`), the next one matched while the last one's
        matches are being stored: one batch's publish and acknowledgements in flight at a
        time. (Waiting for the bus's answers to 500 KB of matches idled the process a sixth of
        its time; the loop is single-threaded, so the answers wait for the matching, and the
        bus stores one batch while the filter matches the next.)"""
        consumer = await self.bus.consumer("articles", f"filter-{self.shard}")
        self.stream_joined.set()
        sending: asyncio.Task | None = None
        try:
            while (first := await consumer.get()) is not None:
                batch = [first]
                while len(batch) < BATCH_MAX and (more := await consumer.get(0)) is not None:
                    batch.append(more)
                outgoing, done = await self.match_batch(batch)
                if sending is not None:
                    await sending
                sending = asyncio.get_running_loop().create_task(self.send_batch(outgoing,
                                                                                 done))
            if sending is not None:
                await sending
        finally:
            if sending is not None and not sending.done():
                # Stopped: the batch in flight is stored and acknowledged all the same (not
                # acknowledged, it would only come again).
                await asyncio.shield(sending)

    async def process_batch(self, batch: list[Delivery]) -> None:
        """Match what the bus already holds for this member together, end to end in batches:
        decode every article, match them against the shard in one call (:meth:`match_many`),
        then send each reflector one :class:`~feedmesh.hub.messages.MatchedBatch` for the
        whole batch (its articles and their ids), all in one
        :meth:`~feedmesh.bus.Bus.publish_many`, and acknowledge the batch in one
        :meth:`~feedmesh.bus.Bus.ack_many` (on NATS, one write and one answer for many instead
        of a round trip per article). An article that fails is handed back alone (a batch that
        cannot be matched at once is matched one by one); a publish that fails hands back the
        whole batch."""
        await self.send_batch(*await self.match_batch(batch))

    async def match_batch(self, batch: list[Delivery]) -> tuple[list[Outgoing], list[Delivery]]:
        """:meth:`process_batch`'s first half: what to publish, and the deliveries it settles."""
        done: list[Delivery] = []
        decoded: list[tuple[Delivery, Article]] = []
        size = 0
        for delivery in batch:
            article = await self.settle.decoded(delivery)
            if article is None:
                continue  # not a message: parked
            if isinstance(article, Article):
                size += delivery.size
                decoded.append((delivery, article))
            else:
                done.append(delivery)
        matched: list[tuple[Article, np.ndarray]] = []
        seqs: list[int] = []
        found_all = self.match_many([article for _, article in decoded])
        for n, (delivery, article) in enumerate(decoded):
            if found_all is not None:
                found = found_all[n]
            else:
                try:
                    found = self.match(article)
                except Exception as exc:  # a bug on one article: retried, then parked
                    log.exception("filter_failed shard=%d entry=%d", self.shard,
                                  article.entry_id)
                    await self.settle.retry_later(delivery, exc)
                    continue
            if found is not None:
                matched.append((article, found))
            seqs.append(delivery.seq)
            done.append(delivery)
        if seqs:
            self.metrics.articles_in.labels("filter").inc(len(seqs))
            self.metrics.bytes_in.labels("filter").inc(size)
        return self.route_batch(matched, seqs), done

    async def send_batch(self, outgoing: list[Outgoing], done: list[Delivery]) -> None:
        """:meth:`process_batch`'s second half: publish, then acknowledge (or hand back)."""
        if outgoing:
            try:
                await self.bus.publish_many(outgoing)
            except Exception as exc:
                log.exception("filter_publish_failed shard=%d articles=%d", self.shard,
                              len(done))
                for delivery in done:
                    await self.settle.retry_later(delivery, exc)
                return
        await self.bus.ack_many(done)

    def match_many(self, articles: list[Article]) -> list[np.ndarray | None] | None:
        """:meth:`match` for a batch in one call to the index (per batch, not per article: the
        scratch, the term statistics, the metrics); None when the batch is not all of the
        crawler's packed form (then :meth:`match` each) or one of them is not whole (then
        nothing was counted: :meth:`match` each, which hands that one back alone). The
        match-time histogram gets the batch's mean for each article."""
        packed = [article.tokens for article in articles
                  if article.tokens is not None and article.tokens.version == PACKED_VERSION]
        if not packed or len(packed) < len(articles):
            return None
        started = time.perf_counter()
        try:
            found = self.index.match_packed_many(packed)
        except Exception:  # noqa: BLE001 - one article not whole, or a bug: each alone, where
            return None    # the broken one is retried and parked by itself
        each = (time.perf_counter() - started) / len(packed)
        for _ in packed:
            self.metrics.match_seconds.observe(each)
        self.metrics.matches.inc(sum(len(ids) for ids in found))
        return [ids if len(ids) else None for ids in found]

    async def process(self, article: Article, seq: int = 0) -> None:
        """Match one article and send each reflector its matches (see :meth:`route`)."""
        await self.bus.publish_many(self.route(article, seq))

    def match(self, article: Article) -> np.ndarray | None:
        """The subscriptions of this shard's index that ``article`` matches (sorted); None when
        there are none. Which of them go where (and which are no longer active) is routing's
        part (:meth:`route_batch`)."""
        started = time.perf_counter()
        ids = self.index.match_entry(article.entry, article.feed_url, article.feed_language,
                                     article.tokens)
        self.metrics.match_seconds.observe(time.perf_counter() - started)
        if not len(ids):
            return None
        self.metrics.matches.inc(len(ids))
        return ids

    def route(self, article: Article, seq: int = 0) -> list[Outgoing]:
        """Match one article: the messages that tell each reflector its matches (a batch of
        one; see :meth:`route_batch`)."""
        found = self.match(article)
        return self.route_batch([] if found is None else [(article, found)],
                                [seq] if seq else [])

    def route_batch(self, matched: list[tuple[Article, np.ndarray]],
                    seqs: list[int]) -> list[Outgoing]:
        """One message per reflector for a batch: the ids of each ``(article, ids)`` of
        ``matched`` split by reflector, the ids as varint gaps (ids no longer active dropped:
        removed while matching, never delivered), all in one compiled pass
        (:func:`~feedmesh.hub.idcodec.encode_routed`). ``seqs`` are the batch's
        article numbers on the bus: a batch delivered again as it was (its filter died before
        acknowledging it) is matched again and the bus drops the copies (their ``msg_id`` is
        the batch's first and last article number and the shard's); a batch formed otherwise
        the second time reaches the reflector again, which keeps each (entry, shard) once (its
        log and held entries ignore a copy)."""
        if not matched:
            return []
        ids = self.delivery == "ids"
        slots = max(self.reflectors, default=0) + 1
        routed = encode_routed([found for _, found in matched], self.reflector_of, slots,
                               first=self.first, every=slots == 1 and self.every_first)
        articles = [msgspec.structs.replace(article, tokens=None)  # the reflector never reads them
                    if ids and article.tokens is not None else article for article, _ in matched]
        now = self.clock.now()
        msg_id = f"articles.{seqs[0]}-{seqs[-1]}.{self.shard}" if seqs else None
        outgoing = []
        for reflector, lists in routed.items():
            data = encode(MatchedBatch(articles=tuple(articles[a] for a, _ in lists),
                                       sub_ids=tuple(mine if ids else b"" for _, mine in lists),
                                       shard=self.shard, matched_at=now))
            outgoing.append(Outgoing(f"matches.{reflector}", data, msg_id))
            self.metrics.articles_out.labels("filter").inc(len(articles))
            self.metrics.bytes_out.labels("filter").inc(len(data))
        return outgoing


def _check_reflector(reflector: int) -> None:
    if not 0 <= reflector < 2**15:
        raise ValueError(f"reflector {reflector} is not a reflector's number (0 to 32767)")


def write_snapshot(index: SubscriptionIndex, path: Path | str, seq: int) -> None:
    """Atomically write ``index`` (compacted) and, beside it, the subscription change seq it
    includes."""
    data = index.to_bytes()
    temporary = f"{path}.tmp"
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    with open(f"{path}.json.tmp", "w") as f:
        json.dump({"seq": seq, "subscriptions": len(index)}, f)
    os.replace(f"{path}.json.tmp", f"{path}.json")


def build_snapshot(open_state: StateOpener, shard: int, shards: int, path: str) -> None:
    """Build one shard's index from the stored queries and write its snapshot (run in a child
    process by :meth:`FilterTier.load`)."""
    state = open_state()
    try:
        seq = state.change_seq()  # before reading: later changes are applied again on restore
        index = SubscriptionIndex.build(
            (sub_id, query) for sub_id, query in state.queries() if sub_id % shards == shard)
        write_snapshot(index, path, seq)
    finally:
        state.close()
