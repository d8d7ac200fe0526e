"""The storage ports: one per kind of state, each with what it guarantees. The embedded default
implements them on SQLite (:mod:`.sqlite`, :mod:`.sqlite_hub`, :mod:`.sqlite_reflector`); a
distributed deployment implements the same ports on PostgreSQL. Every implementation passes the
same contract suite (``tests/store/``).

:class:`IngestStore`: feeds, their fetch state, their entries (the crawler's state).
    Writes are *intents* (:class:`FeedUpdate`: "this fetch happened, with this outcome, and these
    entries were in the document"), applied atomically: a feed's new fetch state (validators,
    document hash) and the entries it brought are committed in the same transaction, so a crash
    can never leave validators that claim "seen" for entries that were not stored (which would
    lose them behind 304s), nor store entries twice. Deduplication runs inside that transaction
    against the stored truth.

    **Entry ids are in commit order**: an entry committed after another has a larger id, so
    :meth:`IngestStore.entries_after` from a watermark returns exactly what was committed since
    (the hub replays from it what the reflectors had not stored before a crash). SQLite gives this
    for free (one writer, AUTOINCREMENT). A store whose ids come from a sequence shared by
    concurrent writers (PostgreSQL) does not: a transaction that took id 10 may commit after one
    that took id 11, and a reader between the two commits would move its watermark past 10. Such
    an implementation must serialize id assignment with the commit (e.g. take ids under a lock
    held to commit) or provide ``entries_after`` by a commit-ordered position.

:class:`HubState`: accounts, subscriptions, who follows which source, and the subscription
    change log. Every change to a subscription is appended to the change log *in the same
    transaction*, and the log's sequence numbers only grow, so a filter shard that built its index
    at change ``seq`` catches up with :meth:`HubState.changed_since`. A subscription's ``reflector``
    is its owner (the reflector that serves its feed); it changes only when its owner moves.

:class:`FeedOwnership`: which named crawler fetches which feed (``feedmesh crawler --name``), kept
    beside the feeds in the store the crawlers share. Each feed has one owner and an *epoch*
    that grows by one each time the feed changes hands. A move is either *staged* (the owner is
    running: it stops starting fetches of the feed, lets those in flight commit, then
    :meth:`FeedOwnership.release` hands the feed to the next owner) or a *transfer* (the owner
    is gone: the feed changes hands at once). A feed is claimed once: of two crawlers that claim
    a new feed at the same time, the first claim wins and both read the same owner back.

:class:`ReflectorLog`: one reflector's durable state: one copy of each entry it holds, the log of
    matches not yet in a checkpoint, the checkpoint, and per filter shard the last entry stored
    (its *watermark*). :meth:`ReflectorLog.store` commits items, log rows and watermarks
    together and is idempotent per (entry, shard), so a replayed article is never logged twice;
    the checkpoint is replaced atomically (a crash leaves the old one or the new one).

Exceptions: every port raises :class:`StoreError` (a message naming the store, the operation and
the cause; the cause chained), never the driver's own exceptions; a full disk is a
:class:`StorageFullError`, a storage that refuses writes a :class:`StorageReadOnlyError`, a
store server that cannot be reached a :class:`StoreUnavailableError`, so that callers can answer
each for what it is (the web layer: 503 ``storage_full``; the tiers wait out the last, never
counting it against a message, :mod:`feedmesh.hub.deliveries`).
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import msgspec
import numpy as np

from feedmesh.errors import FeedmeshError
from feedmesh.fetch.state import FeedFetchState
from feedmesh.model import Entry, FeedInfo, WebSubLease

__all__ = [
    "Account",
    "FeedOwner",
    "FeedOwnership",
    "FeedRow",
    "FeedUpdate",
    "FollowedSource",
    "HubState",
    "IngestStore",
    "IngestedEntry",
    "Posting",
    "PushAttempt",
    "PushTarget",
    "ReflectedItem",
    "ReflectorLog",
    "StorageFullError",
    "StorageReadOnlyError",
    "StoreError",
    "StoreUnavailableError",
    "Subscription",
    "storage_error",
]


class StoreError(FeedmeshError):
    """A storage operation failed (the message names the operation and the cause)."""


class StorageFullError(StoreError):
    """The disk, or the database's size limit, is full: nothing of the operation was written."""


class StorageReadOnlyError(StoreError):
    """The storage refuses to be written (a read-only folder, file or file system)."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached now: its server is down or restarting, or the connection
    broke. The same operation may succeed later, unchanged; a write that broke during its
    commit may have been committed (the caller must not assume it was not)."""


_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def storage_error(message: str, cause: BaseException | None = None, *, full: bool = False,
                  read_only: bool = False, unavailable: bool = False) -> StoreError:
    """The :class:`StoreError` for a failure: full, read-only or unavailable when the caller
    says so (or the cause is an OSError whose errno says full or read-only), else a plain
    one."""
    if isinstance(cause, OSError):
        full = full or cause.errno in _FULL_ERRNOS
        read_only = read_only or cause.errno in _READ_ONLY_ERRNOS
    if full:
        return StorageFullError(message)
    if read_only:
        return StorageReadOnlyError(message)
    if unavailable:
        return StoreUnavailableError(message)
    return StoreError(message)


class FeedRow(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    source_url: str
    """The URL as first added (the fetch state's ``url`` follows confirmed permanent redirects)."""
    state: FeedFetchState
    title: str = ""
    info: FeedInfo | None = None
    added_at: float = 0.0


class FeedUpdate(msgspec.Struct, frozen=True, kw_only=True):
    """The intent of one fetch, applied atomically by :meth:`Store.apply`."""

    feed_id: int
    state: FeedFetchState
    seen_at: float
    info: FeedInfo | None = None
    entries: tuple[Entry, ...] = ()
    """Every entry of the document (or delta); the store keeps the new and updated ones."""
    backlog: bool = False
    """The feed's first document: its entries were not *posted* at ``seen_at``, so the scheduler
    must not learn posting times from them."""
    owner: str = ""
    """Fencing, for a named crawler: the intent is applied only while the feed ownership table
    gives the feed to ``owner`` at ``epoch`` (checked in the same transaction); otherwise it is
    dropped whole, as if the fetch had not happened (the feed changed hands meanwhile). Empty:
    not fenced."""
    epoch: int = 0


class IngestedEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An entry the store found new or updated; what the filter tier receives."""

    id: int
    feed_id: int
    entry: Entry
    first_seen_at: float
    updated: bool = False
    backlog: bool = False
    """Found in the feed's first document: already published before we followed the feed."""


class Posting(msgspec.Struct, frozen=True, array_like=True):
    """One observed posting: when we first saw it, and when the publisher says it was posted."""

    first_seen_at: float
    published: float | None
    backlog: bool


class IngestStore(Protocol):
    """The crawler's state. See the module docstring for the guarantees."""

    def add_feeds(self, urls: Iterable[str], now: float) -> list[FeedRow]:
        """Add the URLs not yet known (as given, trimmed); return the rows of all of them, new
        and old, in the order given."""
        ...

    def feeds(self, *, active_only: bool = False) -> list[FeedRow]: ...
    def feed(self, feed_id: int) -> FeedRow | None: ...
    def remove_feed(self, feed_id: int) -> None: ...

    def apply(self, updates: Sequence[FeedUpdate],
              fenced: list[int] | None = None) -> list[IngestedEntry]:
        """Commit a batch of fetch intents atomically; return the entries that were new or
        updated (in the order met), with their ids. An intent fenced off (``owner`` and
        ``epoch`` no longer the feed's in the ownership table) is dropped, and its feed id
        appended to ``fenced`` when given (the caller says so: nothing is dropped unseen)."""
        ...

    def entries(self, feed_id: int, limit: int = 50) -> list[IngestedEntry]:
        """A feed's newest entries, newest first."""
        ...

    def recent_entries(self, limit: int = 100) -> list[IngestedEntry]:
        """The newest entries of every feed, newest first."""
        ...

    def entries_after(self, after_id: int, limit: int = 500) -> list[IngestedEntry]:
        """Entries committed after entry ``after_id``, oldest first."""
        ...

    def max_entry_id(self) -> int: ...
    def entry_count(self) -> int: ...

    def postings(self, feed_id: int, since: float = 0.0) -> list[Posting]:
        """When a feed's entries were first seen (and dated), oldest first: what the scheduler
        learns a feed's rhythm from."""
        ...

    def all_postings(self, since: float = 0.0) -> dict[int, list[Posting]]: ...
    def prune_postings(self, before: float, limit: int = 10_000) -> int:
        """Forget postings first seen before ``before``, the oldest first, at most ``limit`` of
        them (a short write: call again while it returns ``limit``); how many went."""
        ...
    def close(self) -> None: ...


class Account(msgspec.Struct, frozen=True):
    id: int
    name: str
    created_at: float


class Subscription(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    account_id: int
    name: str
    query: str
    keep: int
    reflector: int
    """The reflector that owns it (serves its feed)."""
    generation: int
    """Bumped when its owner asks for a new private URL (the old one stops working)."""
    created_at: float
    changed_at: float


class FollowedSource(msgspec.Struct, frozen=True, kw_only=True):
    """A source feed as an account follows it: the title, folder and site it gave it."""

    feed_id: int
    title: str = ""
    added_at: float = 0.0
    category: str = ""
    """The folders the account keeps it in, outermost first, joined with "/" (as in OPML)."""
    html_url: str = ""


class PushTarget(msgspec.Struct, frozen=True, kw_only=True):
    """Somewhere a subscription's new entries are pushed: a WebSub subscriber's callback (kind
    ``websub``: the updated feed, in the format of the ``topic`` it subscribed to, until
    ``expires_at``) or a webhook its owner set (kind ``webhook``: the new entries as JSON; no
    topic, no expiry). ``secret`` signs each body (empty: unsigned). A WebSub subscription is
    keyed by ``(topic, url)``, a webhook by ``(sub_id, url)``: subscribing again updates it."""

    id: int = 0
    sub_id: int
    kind: str
    url: str
    topic: str = ""
    format: str = ""
    secret: str = ""
    lease_seconds: int = 0
    expires_at: float | None = None
    created_at: float = 0.0
    delivered_before: float = 0.0
    """The delivery worker's durable mark: every entry a reflector stored (``stored_at``) before
    this time has been delivered (or given up on); 0: nothing yet. It only moves forward; after
    a restart the worker resends what its reflector holds from the mark on (at least once)."""
    signature: str = "sha256"
    """The HMAC method of a WebSub subscriber's ``X-Hub-Signature`` (one of
    :data:`feedmesh.websub.signature.METHODS`): chosen when it subscribes (the hub's default),
    changed by its feed's owner, kept when it subscribes again. Webhooks always sign sha256."""


class PushAttempt(msgspec.Struct, frozen=True, kw_only=True):
    """One delivery to a push target, as its owner sees it in the delivery log."""

    target_id: int
    at: float
    attempt: int
    """1 for a first try, 2 after one failure, ..."""
    status: int
    """The HTTP status answered (0: none: refused, unreachable, timed out)."""
    error: str = ""
    entries: int = 0
    elapsed_ms: float = 0.0


class HubState(Protocol):
    """Accounts, subscriptions, follows and the subscription change log. See the module
    docstring for the guarantees."""

    # accounts
    def create_account(self, name: str, now: float) -> tuple[Account, str]:
        """The new account and its API token (``fm_<id>_<secret>``; only a hash is kept)."""
        ...

    def rotate_token(self, account_id: int) -> str: ...

    def authenticate(self, token: str) -> Account | None:
        """The token's account, or None (unknown, revoked or malformed), in constant time."""
        ...

    # subscriptions
    def add_subscription(self, account_id: int, *, name: str, query: str, keep: int,
                         reflector: int, now: float) -> Subscription: ...

    def add_subscriptions(self, rows: Iterable[tuple[int, str, str, int, int]],
                          now: float) -> None:
        """Bulk insert ``(account_id, name, query, keep, reflector)`` rows (provisioning and
        benchmarks); queries must already be valid."""
        ...

    def subscription(self, sub_id: int) -> Subscription | None: ...
    def subscriptions(self, account_id: int | None = None) -> list[Subscription]: ...
    def count_subscriptions(self, account_id: int) -> int: ...

    def subscription_columns(self) -> dict[str, np.ndarray]:
        """Every subscription's ``id, keep, reflector, generation, created_at`` as numpy
        columns, by id: what start-up needs, without a Python object per subscription."""
        ...

    def queries(self, ids: Iterable[int] | None = None) -> Iterator[tuple[int, str]]:
        """``(id, query)`` of the given subscriptions (all when None), streamed by id."""
        ...

    def change_subscription(self, sub_id: int, *, now: float, name: str | None = None,
                            query: str | None = None, keep: int | None = None,
                            new_url: bool = False) -> Subscription | None: ...

    def delete_subscription(self, sub_id: int) -> bool: ...

    # the change log
    def change_seq(self) -> int:
        """The sequence number of the last change to any subscription (0: none yet)."""
        ...

    def changed_since(self, seq: int) -> list[int]:
        """Ids of the subscriptions added, changed or deleted after change ``seq``."""
        ...

    # who follows which source feed
    def follow_source(self, account_id: int, feed_id: int, title: str, now: float, *,
                      category: str = "", html_url: str = "") -> bool:
        """Record the follow; False (and nothing changed) when the account already followed
        the feed."""
        ...

    def unfollow_source(self, account_id: int, feed_id: int) -> bool: ...

    def sources(self, account_id: int) -> list[FollowedSource]:
        """The account's sources, in the order it added them."""
        ...

    def followers(self) -> dict[int, int]:
        """Feed id -> number of accounts following it."""
        ...

    # where subscriptions are pushed (deleted with their subscription)
    def save_push_target(self, target: PushTarget) -> PushTarget:
        """Insert the target, or update the one with the same key (WebSub: topic and url;
        webhook: subscription and url: secret, lease, expiry and format change); with its id."""
        ...

    def push_targets(self, sub_id: int | None = None) -> list[PushTarget]:
        """The targets of one subscription (all when None), by id."""
        ...

    def mark_push_targets(self, marks: Mapping[int, float]) -> None:
        """Move targets' ``delivered_before`` marks forward (never back); targets deleted
        meanwhile are skipped."""
        ...

    def set_push_signature(self, target_id: int, signature: str) -> PushTarget | None:
        """Set a target's ``signature`` method (the caller checks it is one); the target as
        it is now, or None when there is no such target."""
        ...

    def delete_push_target(self, target_id: int) -> bool: ...

    def record_push_attempts(self, attempts: Sequence[PushAttempt], keep: int = 20) -> None:
        """Append to the delivery log, keeping each target's newest ``keep`` attempts."""
        ...

    def push_attempts(self, target_id: int, limit: int = 20) -> list[PushAttempt]:
        """A target's newest attempts, newest first."""
        ...

    # our push subscriptions at publishers' WebSub hubs
    def websub_leases(self) -> list[WebSubLease]:
        """Every push subscription kept, by callback id."""
        ...

    def save_websub_leases(self, changed: Sequence[WebSubLease], deleted: Sequence[str]) -> None:
        """Insert or replace ``changed`` (by callback id) and delete the ``deleted`` callback
        ids, in one transaction."""
        ...

    def close(self) -> None: ...


class ReflectedItem(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True):
    """One entry as a reflector keeps it (one copy, however many subscriptions hold it)."""

    entry_id: int
    feed_id: int
    feed_url: str
    feed_title: str
    first_seen_at: float
    stored_at: float
    entry: Entry
    matched_at: float = 0.0
    """When the filter matched it: splits the intra-hub latency into its two legs."""
    degraded: bool = False
    """The body was dropped under memory pressure (title and link kept)."""


class ReflectorLog(Protocol):
    """One reflector's durable state. See the module docstring for the guarantees."""

    def store(self, rows: Sequence[tuple[ReflectedItem, bytes, int]],
              watermarks: Mapping[int, int]) -> int:
        """Commit ``(item, matching subscription ids encoded, filter shard)`` rows and the
        shards' watermarks (each only ever rises) together; a row of an (entry, shard) already
        logged is not logged again. Returns the log sequence number of the last row (0: none)."""
        ...

    def log_after(self, seq: int) -> Iterator[tuple[int, int, bytes]]:
        """``(seq, entry_id, encoded ids)`` of the log rows after ``seq``, in order."""
        ...

    def write_checkpoint(self, arrays: Mapping[str, np.ndarray], upto_seq: int) -> None:
        """Replace the checkpoint, atomically, with ``arrays`` (which include every log row up
        to ``upto_seq``). Uses no database connection: any thread may run it."""
        ...

    def read_checkpoint(self) -> tuple[dict[str, np.ndarray], int] | None:
        """The checkpoint's arrays and the log position they include; None when there is
        none yet."""
        ...

    def truncate_log(self, upto_seq: int, limit: int = 500) -> int:
        """Delete up to ``limit`` log rows up to ``upto_seq`` (in one short transaction);
        returns how many."""
        ...

    def unheld_items(self, live: np.ndarray) -> np.ndarray:
        """The ids of stored items that are not in ``live`` (sorted)."""
        ...

    def delete_items(self, entry_ids: np.ndarray) -> int:
        """Delete these items, except those the log still refers to; returns how many."""
        ...

    def items(self, entry_ids: Sequence[int]) -> list[ReflectedItem]:
        """The stored items of ``entry_ids``, in that order (missing ones skipped)."""
        ...

    def watermarks(self) -> dict[int, int]: ...
    def set_watermarks(self, marks: Mapping[int, int]) -> None: ...

    def counts(self) -> tuple[int, int]:
        """(items stored, log rows not yet checkpointed)."""
        ...

    def close(self) -> None: ...


class FeedOwner(msgspec.Struct, frozen=True, kw_only=True):
    """Who fetches one feed (:class:`FeedOwnership`)."""

    feed_id: int
    owner: str
    epoch: int
    """1 when first claimed; one more each time the feed changes hands."""
    next_owner: str = ""
    """A staged move: the crawler the owner hands the feed to once its fetches of it are
    committed ("": none)."""


class FeedOwnership(Protocol):
    """Feed id -> crawler name, with an epoch per feed. See the module docstring."""

    def owners(self) -> dict[int, FeedOwner]:
        """Every feed's owner, by feed id."""
        ...

    def owned_by(self, owner: str) -> dict[int, FeedOwner]:
        """The feeds ``owner`` holds now (staged moves away from it included)."""
        ...

    def claim(self, choices: Mapping[int, str]) -> dict[int, FeedOwner]:
        """Give each feed that has no owner yet the one chosen for it (epoch 1); a feed already
        owned keeps its owner. The rows of every given feed, as they are after."""
        ...

    def stage(self, moves: Mapping[int, str]) -> int:
        """Plan moves that the current owners hand over (:meth:`release`): each feed's
        ``next_owner`` becomes its target; a feed whose target is its owner has any staged move
        cancelled; a feed without owner is given its target at once. How many feeds now have
        a move staged (their owner is not their target)."""
        ...

    def transfer(self, moves: Mapping[int, str]) -> int:
        """Move feeds at once, their owners being gone: owner = target, epoch + 1, any staged
        move dropped (feeds already with their target are left alone; unowned ones are given
        it). How many changed hands."""
        ...

    def release(self, owner: str, feed_ids: Iterable[int]) -> dict[int, FeedOwner]:
        """``owner`` hands over those of ``feed_ids`` it holds with a staged move: each goes to
        its ``next_owner``, epoch + 1. The rows that changed hands."""
        ...

    def staged(self) -> dict[int, FeedOwner]:
        """The feeds with a move staged and not yet released."""
        ...

    def close(self) -> None: ...
