"""The subscription index: match one article against every subscription, while they change.

State is a compact immutable main index (:class:`CompiledIndex`), a small :class:`DeltaIndex` of
subscriptions added since the last compaction, and a set of main-index subscriptions removed (or
replaced) since then. ``match()`` is main minus removed, plus delta, so a result never includes a
removed subscription and always includes an added one, whatever the compaction is doing.

Compaction merges all three into a new main index (re-choosing every access predicate from the
current term statistics). :meth:`SubscriptionIndex.compact_in_background` builds it in a worker
thread from a frozen snapshot while adds, removes and matches continue on the event loop; those
changes are logged and replayed onto the new state when it is swapped in.

All methods are synchronous and called from one thread (the event loop); only the build itself
runs elsewhere, on data no other code touches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from feedmesh.match.article import Article, TokenizedArticle, article_from_entry, tokenize_article
from feedmesh.match.index import snapshot
from feedmesh.match.index.bulk import bulk_table
from feedmesh.match.index.compiled import (
    CompiledIndex,
    ConjunctionTable,
    build_compiled,
    concat_tables,
    sorted_unique,
)
from feedmesh.match.index.compiler import compile_query, sync_statistics
from feedmesh.match.index.delta import DeltaIndex
from feedmesh.match.index.kernels import BACKENDS, MatchScratch, default_backend, phrase_holds
from feedmesh.match.index.prepare import PreparedArticle, prepare_article
from feedmesh.match.index.settings import IndexSettings, IndexStats, check_sub_id
from feedmesh.match.index.statistics import TermStatistics
from feedmesh.match.index.term_table import TermTable, new_term_table, prepare_packed
from feedmesh.match.index.vocabulary import PhraseTables, Vocabulary
from feedmesh.match.packed import PACKED_VERSION, PackedTokens
from feedmesh.match.query import Query, parse_query
from feedmesh.model import Entry

__all__ = ["SubscriptionIndex"]

class _CompactionJob:
    """What a compaction needs, frozen at its start so a worker thread can build from it."""

    def __init__(self, index: SubscriptionIndex) -> None:
        self.main = index._main
        self.removed = np.array(sorted(index._removed), dtype=np.int64)
        self.delta_table = index._delta.to_table()
        self.estimates = index.statistics.estimates()
        self.kinds = index.vocabulary.kinds.view().copy()
        self.term_count = len(index.vocabulary)

    def build(self) -> CompiledIndex:
        table = concat_tables([self.main.to_table(without=self.removed), self.delta_table])
        return build_compiled(table, self.estimates, self.kinds, self.term_count)


class SubscriptionIndex:
    """Subscriptions (id -> query) that articles are matched against. See the module docstring."""

    def __init__(
        self,
        settings: IndexSettings | None = None,
        statistics: TermStatistics | None = None,
    ) -> None:
        self.settings = settings or IndexSettings()
        backend = default_backend() if self.settings.backend == "auto" else self.settings.backend
        if backend not in BACKENDS:
            raise ValueError(f"unknown or unavailable backend {backend!r}; have {sorted(BACKENDS)}")
        self.backend = backend
        self._kernel = BACKENDS[backend]
        self.vocabulary = Vocabulary()
        self.statistics = statistics or TermStatistics()
        self._main = CompiledIndex.empty()
        self._largest_id = 0
        self._delta = DeltaIndex()
        self._removed: set[int] = set()
        self._removed_array: np.ndarray | None = None
        self._scratch = MatchScratch()
        self._log: list[tuple[int, Query | None]] | None = None  # changes during a compaction
        self._compaction: asyncio.Task[None] | None = None
        self._observed_at_build = 0
        self._term_table: TermTable | None = None

    # --- changes -------------------------------------------------------------------------------

    def add(self, sub_id: int, query: Query | str) -> Query:
        """Add ``sub_id`` (or replace its query). Returns the parsed query."""
        sub_id = check_sub_id(sub_id)
        if isinstance(query, str):
            query = parse_query(query, self.settings.query_limits)
        conjunctions = compile_query(query, self.vocabulary, self.statistics)
        self._forget(sub_id)
        self._delta.add(sub_id, conjunctions)
        if self._log is not None:
            self._log.append((sub_id, query))
        return query

    def remove(self, sub_id: int) -> bool:
        """Remove ``sub_id``; False (and nothing changes) if it was not in the index."""
        sub_id = check_sub_id(sub_id)
        found = self._forget(sub_id)
        if found and self._log is not None:
            self._log.append((sub_id, None))
        return found

    def _forget(self, sub_id: int) -> bool:
        if self._delta.remove(sub_id):
            return True
        if sub_id not in self._removed and self._main.contains(sub_id):
            self._removed.add(sub_id)
            self._removed_array = None
            return True
        return False

    def __contains__(self, sub_id: object) -> bool:
        if isinstance(sub_id, bool) or not isinstance(sub_id, (int, np.integer)):
            return False
        sub_id = int(sub_id)
        return sub_id in self._delta or (
            sub_id not in self._removed and self._main.contains(sub_id)
        )

    def __len__(self) -> int:
        return self._main.subscription_count - len(self._removed) + len(self._delta)

    def ids(self) -> np.ndarray:
        """Every subscription id the index holds, sorted (int64): what any match is a subset
        of."""
        members = self._main.members.astype(np.int64)
        if self._removed:
            members = members[~np.isin(members, self._removed_ids())]
        if len(self._delta):
            added = np.fromiter(self._delta.ids(), dtype=np.int64, count=len(self._delta))
            members = sorted_unique(np.concatenate([members, added]))
        return members

    # --- matching ------------------------------------------------------------------------------

    def match_entry(self, entry: Entry, feed_url: str, feed_language: str = "",
                    tokens: PackedTokens | None = None) -> np.ndarray:
        """Sorted unique ids (int64) of the subscriptions a feed's entry matches: the one way
        the hub's tiers match what the crawler stored. ``tokens``, the crawler's packed form of
        this very entry, saves tokenizing it when its version is known (else it is ignored)."""
        if tokens is not None and tokens.version == PACKED_VERSION:
            ids = self.match_packed(tokens)
        else:
            ids = self.match(article_from_entry(entry, feed_url, feed_language))
        return np.asarray(ids, dtype=np.int64)

    def match(self, article: Article | TokenizedArticle, *, observe: bool = True) -> np.ndarray:
        """Sorted unique ids (int32) of the subscriptions ``article`` matches.

        ``observe`` counts the article's terms in the statistics that choose access predicates.
        """
        tokenized = article if isinstance(article, TokenizedArticle) else tokenize_article(article)
        return self._match_prepared(prepare_article(tokenized, self.vocabulary), observe)

    def match_packed(self, packed: PackedTokens, *, observe: bool = True) -> np.ndarray:
        """:meth:`match` for an article tokenized and packed upstream
        (:mod:`feedmesh.match.packed`): the same ids. Raises ValueError when ``packed`` is not
        whole."""
        table = self._term_table
        if table is None or table.vocabulary is not self.vocabulary:
            table = self._term_table = new_term_table(self.vocabulary)
        return self._match_prepared(prepare_packed(packed, self.vocabulary, table), observe)

    def match_packed_many(self, packed: Sequence[PackedTokens]) -> list[np.ndarray]:
        """:meth:`match_packed` for a batch of articles (each of the crawler's packed form and
        version): the same sorted unique ids (int32) for each, the per-call work (scratch,
        phrase tables, the term statistics) done once for the batch. Raises ValueError when
        one of ``packed`` is not whole (then nothing is counted: match them one by one)."""
        table = self._term_table
        if table is None or table.vocabulary is not self.vocabulary:
            table = self._term_table = new_term_table(self.vocabulary)
        prepared = [prepare_packed(tokens, self.vocabulary, table) for tokens in packed]
        if not prepared:
            return []
        self._scratch.fit(len(self.vocabulary), self._largest_id)
        phrases = self.vocabulary.phrase_tables()
        found = [self._match_one(article, phrases) for article in prepared]
        self.statistics.observe_many([article.terms for article in prepared])
        return found

    def _match_prepared(self, prepared: PreparedArticle, observe: bool) -> np.ndarray:
        self._scratch.fit(len(self.vocabulary), self._largest_id)
        ids = self._match_one(prepared, self.vocabulary.phrase_tables())
        if observe:
            self.statistics.observe(prepared.terms)
        return ids

    def _match_one(self, prepared: PreparedArticle, phrases: PhraseTables) -> np.ndarray:
        """One article's ids, the scratch fitted to the vocabulary and ids beforehand."""
        scratch = self._scratch
        main = self._main
        while True:
            ids, needed = self._kernel(
                main.buffer, main.header, phrases.of_term, phrases.field, phrases.start,
                phrases.words, prepared.terms, prepared.seq, prepared.bounds, scratch.present_bits,
                scratch.phrase_state, scratch.id_bits, scratch.work, scratch.spare,
            )
            if not needed:
                break
            scratch.grow_work(needed)
        if self._removed and len(ids):
            removed = self._removed_ids()
            position = np.minimum(np.searchsorted(removed, ids), len(removed) - 1)
            ids = ids[removed[position] != ids]
        if len(self._delta):
            extra = self._delta.match(set(prepared.terms.tolist()), self._phrase_checker(prepared))
            if extra:
                added = np.fromiter(extra, dtype=np.int32, count=len(extra))
                ids = sorted_unique(np.concatenate([ids, added]))
        return ids

    def _removed_ids(self) -> np.ndarray:
        if self._removed_array is None:
            self._removed_array = np.array(sorted(self._removed), dtype=np.int32)
        return self._removed_array

    def _phrase_checker(self, prepared: PreparedArticle) -> Callable[[int], bool]:
        tables = self.vocabulary.phrase_tables()
        memo: dict[int, bool] = {}

        def holds(term_id: int) -> bool:
            answer = memo.get(term_id)
            if answer is None:
                phrase = int(tables.of_term[term_id])
                if phrase < 0:
                    answer = False
                else:
                    field = int(tables.field[phrase])
                    words = tables.words[tables.start[phrase] : tables.start[phrase + 1]]
                    answer = phrase_holds(
                        words, prepared.seq, int(prepared.bounds[field]),
                        int(prepared.bounds[field + 1]),
                    )
                memo[term_id] = answer
            return answer

        return holds

    # --- compaction ----------------------------------------------------------------------------

    def maintenance_due(self) -> bool:
        """Whether a compaction would pay off now (delta large, many removals, stale estimates)."""
        settings = self.settings
        return (
            len(self._delta) >= settings.delta_limit
            or len(self._removed)
            > settings.removed_fraction * max(1, self._main.subscription_count)
            or (
                self._main.subscription_count > 0
                and self.statistics.observations - self._observed_at_build
                >= settings.reestimate_after
            )
        )

    def compact(self) -> None:
        """Merge delta and removals into a new main index now (blocking)."""
        if self._compaction is not None:
            raise RuntimeError("a background compaction is running; await it instead")
        job = _CompactionJob(self)
        self._install(job.build(), [])

    async def compact_in_background(self) -> None:
        """Build the new main index in a worker thread; the index stays usable meanwhile.

        Concurrent calls share one compaction. Cancelling a caller does not cancel the compaction
        (it finishes and is installed), so the index is never left half-swapped.
        """
        if self._compaction is None:
            self._compaction = asyncio.ensure_future(self._compact_async())
        await asyncio.shield(self._compaction)

    async def _compact_async(self) -> None:
        job = _CompactionJob(self)
        self._log = []
        try:
            built = await asyncio.to_thread(job.build)
            log, self._log = self._log, None
            self._install(built, log)
        finally:
            self._log = None
            self._compaction = None  # cleared by the task itself: callers may have been cancelled

    def _install(self, main: CompiledIndex, replay: list[tuple[int, Query | None]]) -> None:
        self._main = main
        self._largest_id = int(main.members[-1]) if main.subscription_count else 0
        self._delta = DeltaIndex()
        self._removed = set()
        self._removed_array = None
        self._observed_at_build = self.statistics.observations
        for sub_id, query in replay:
            if query is None:
                self.remove(sub_id)
            else:
                self.add(sub_id, query)

    # --- snapshots ------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The serialized index (compacting first if anything is pending); see :mod:`.snapshot`.

        Raises RuntimeError while a background compaction runs (await it first).
        """
        if len(self._delta) or self._removed:
            self.compact()
        prior, observed = self.statistics.arrays()
        return snapshot.dump(
            self._main, self.vocabulary, prior, observed, self.statistics.articles
        )

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        settings: IndexSettings | None = None,
        statistics: TermStatistics | None = None,
        *,
        validate: bool = True,
    ) -> SubscriptionIndex:
        """An index restored from :meth:`to_bytes` output, without copying its arrays.

        ``data`` may be bytes, an ``mmap`` or a shared-memory buffer: worker processes that load the
        same shared buffer share its pages (keep the buffer alive and unmodified meanwhile).
        Raises :class:`~feedmesh.match.errors.IndexSnapshotError` for anything but an intact
        snapshot.
        """
        loaded = snapshot.load(data, validate=validate)
        index = cls(settings, statistics)
        index.vocabulary = loaded.vocabulary
        index.statistics.restore(loaded.prior, loaded.observed, loaded.articles_observed)
        index._install(loaded.main, [])
        return index

    # --- bulk build and introspection --------------------------------------------------------

    @classmethod
    def build(
        cls,
        items: Iterable[tuple[int, Query | str]],
        settings: IndexSettings | None = None,
        statistics: TermStatistics | None = None,
    ) -> SubscriptionIndex:
        """An index holding ``items`` (id, query), built straight into a main index.

        Much faster than ``add()`` one by one: no delta, one vectorized build; identical query
        texts are parsed once. A repeated id raises :class:`SubscriptionIdError`.
        """
        index = cls(settings, statistics)
        table = bulk_table(items, index.vocabulary, index.settings.query_limits)
        sync_statistics(index.vocabulary, index.statistics)
        index._install(index._build_from(table), [])
        return index

    def _build_from(self, table: ConjunctionTable) -> CompiledIndex:
        return build_compiled(
            table, self.statistics.estimates(), self.vocabulary.kinds.view(), len(self.vocabulary)
        )

    def stats(self) -> IndexStats:
        # Per term: its str object (~50 bytes + text), a dict entry (~50 bytes) and the list slot.
        vocabulary_bytes = sum(108 + len(text) for text in self.vocabulary.texts)
        return IndexStats(
            subscriptions=len(self),
            main_subscriptions=self._main.subscription_count,
            delta_subscriptions=len(self._delta),
            removed_pending=len(self._removed),
            conjunctions=self._main.conjunction_count,
            terms=len(self.vocabulary),
            index_bytes=self._main.nbytes,
            vocabulary_bytes=vocabulary_bytes + 8 * 3 * len(self.vocabulary),  # + per-term arrays
        )
