"""Typed records that the stages of feedmesh hand to each other.

Every record is a frozen ``msgspec.Struct``: cheap to build, immutable once built, and encodable to
JSON or MessagePack unchanged (the bus and the store carry them as they are).

Time has two shapes, each for a reason:

* instants the *publisher* declares (``Entry.published``, ``Entry.updated``, ``FeedInfo.updated``)
  are timezone-aware ``datetime`` objects in UTC, because they come from documents and go back into
  documents;
* instants *we* observe (``fetched_at``, ``first_seen_at``, ...) are float seconds since the Unix
  epoch read from an injected :class:`feedmesh.clock.Clock`, because the scheduler and simulator do
  arithmetic on them by the million.

The identity of an entry (``Entry.key``) and its content hash are computed in exactly one place,
:mod:`feedmesh.feeds.identity`.
"""

from __future__ import annotations

import enum
from datetime import datetime

import msgspec

__all__ = [
    "Enclosure",
    "Entry",
    "FeedInfo",
    "FetchError",
    "FetchOutcome",
    "FetchResult",
    "MeshSubscribe",
    "ParseProblem",
    "ParsedFeed",
    "Person",
    "WebSubLease",
]


class Person(msgspec.Struct, frozen=True, omit_defaults=True):
    """An author or contributor."""

    name: str = ""
    email: str = ""
    uri: str = ""


class Enclosure(msgspec.Struct, frozen=True, omit_defaults=True):
    """A media attachment (RSS ``<enclosure>``, Atom ``rel="enclosure"``, JSON Feed attachment)."""

    url: str
    type: str = ""
    length: int | None = None


class Entry(msgspec.Struct, frozen=True, omit_defaults=True):
    """One article of a feed, normalized.

    ``summary`` and ``content`` hold *sanitized* HTML (safe to serve to a browser); ``title`` is
    plain text. URLs are absolute (resolved against xml:base / the document URL).
    """

    key: str
    """Stable identity within its feed (see :func:`feedmesh.feeds.identity.entry_key`)."""
    content_hash: str = ""
    """Hash of what a reader sees (title, link, summary, content); changes when the entry is
    edited."""
    guid: str = ""
    """The id the publisher declared (RSS guid, Atom id, JSON Feed id), verbatim; may be empty."""
    title: str = ""
    link: str = ""
    published: datetime | None = None
    updated: datetime | None = None
    authors: tuple[Person, ...] = ()
    summary: str = ""
    content: str = ""
    enclosures: tuple[Enclosure, ...] = ()
    categories: tuple[str, ...] = ()
    language: str = ""
    republished_by: str = ""
    """The mesh only: the key of the republisher that signed the record this entry came in (a
    feed writer shows it as ``fm:republishedBy``, in the feedmesh namespace, never as a
    category a reader would display)."""
    backlog: bool = False
    """The mesh only: taken from the feed's document as it stood when the peer followed it
    (what the feed already held), not news that arrived afterwards (``fm:backlog``)."""


class MeshSubscribe(msgspec.Struct, frozen=True, omit_defaults=True):
    """A feed's SCRIBE-RSS ``<subscribe>`` element: its updates are also multicast, signed, on the
    mesh (issue 14). The key is inline (``public_key``) or a URI plus its fingerprint."""

    group: str = ""
    """The feed's canonical URL, whose SHA-1 is the Scribe group ("" = the feed's own URL)."""
    public_key: str = ""
    """Base64 Ed25519 public key (32 bytes) that starts the feed's signed log."""
    key_url: str = ""
    """Where the key can be fetched, when it is not inline."""
    fingerprint: str = ""
    """``sha256:<hex>`` of the raw key bytes found at ``key_url``."""
    bootstrap: tuple[str, ...] = ()
    """``host:port`` overlay nodes to join through."""
    republication: bool = False
    """Signed by a republisher with its own key, not by the publisher."""
    rotations: tuple[str, ...] = ()
    """Signed key rotation statements from ``public_key`` (the identity) on, oldest first: a
    subscriber that bootstraps after a rotation learns the current key from them."""


class FeedInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """Feed-level metadata, including the publisher's hints to pollers."""

    format: str = ""
    """One of ``rss0.90 rss0.91 rss0.92 rss2.0 rss1.0 atom0.3 atom1.0 json1.0 json1.1 cdf``
    (or "")."""
    title: str = ""
    link: str = ""
    description: str = ""
    """Sanitized HTML, like ``Entry.summary`` (the title is plain text)."""
    language: str = ""
    updated: datetime | None = None
    authors: tuple[Person, ...] = ()
    self_link: str = ""
    hub_links: tuple[str, ...] = ()
    """WebSub hubs (``<link rel="hub">``, JSON Feed ``hubs``)."""
    ttl_minutes: int | None = None
    skip_hours: tuple[int, ...] = ()
    """Hours of the day (0-23, GMT) the publisher asks us not to poll."""
    skip_days: tuple[str, ...] = ()
    """Day names (``Monday`` .. ``Sunday``) the publisher asks us not to poll."""
    update_period: str = ""
    """``sy:updatePeriod``: hourly, daily, weekly, monthly or yearly."""
    update_frequency: int | None = None
    """``sy:updateFrequency``: times per ``update_period``."""
    update_base: datetime | None = None
    """``sy:updateBase``: the instant the ``update_period`` schedule is counted from."""
    icon: str = ""
    subscribe: MeshSubscribe | None = None
    """The feed is multicast on the mesh (SCRIBE-RSS ``<subscribe>``); None when it is not."""
    prev_archive: str = ""
    """RFC 5005 ``prev-archive``: the archive document holding the entries just older than
    these (JSON Feed: ``next_url``)."""
    current_link: str = ""
    """RFC 5005 ``current``: the subscription document an archive document belongs to."""
    archive: bool = False
    """This document is an archive page (RFC 5005 section 4, ``<fh:archive/>``): what it holds
    does not change as the feed gets new entries."""


class ParseProblem(msgspec.Struct, frozen=True, omit_defaults=True):
    """Why a document could not be read (cleanly). The parser returns it; it never raises.

    ``kind`` is one of a closed vocabulary so that callers can branch on it:
    ``not_a_feed`` (HTML page, unknown root, empty, binary), ``malformed`` (syntax error; entries
    recovered where possible), ``encoding`` (declared charset wrong or undecodable bytes),
    ``forbidden`` (DTD with entities, external entity, entity expansion), ``too_large`` (a work cap
    was hit; what fit is returned), ``invalid`` (well-formed but breaks the format's rules, e.g. an
    entry without any usable field), ``internal`` (a feedmesh bug caught by the parser's safety net;
    never expected, always worth a report).
    """

    kind: str
    message: str
    line: int | None = None
    column: int | None = None


class ParsedFeed(msgspec.Struct, frozen=True, omit_defaults=True):
    """The parser's answer: what it could read, and the first problem it met (if any)."""

    feed: FeedInfo
    entries: tuple[Entry, ...] = ()
    error: ParseProblem | None = None
    encoding: str = ""
    warnings: tuple[ParseProblem, ...] = ()
    """Problems that cost nothing but one optional element (a malformed ``<subscribe>``)."""

    @property
    def is_feed(self) -> bool:
        """False when the bytes were not a feed at all (as opposed to a feed with problems)."""
        return self.error is None or self.error.kind != "not_a_feed"


class FetchOutcome(enum.StrEnum):
    """How a fetch ended. The scheduler and metrics branch on this, never on message text."""

    OK = "ok"  # 200 with a body
    NOT_MODIFIED = "not_modified"  # 304
    DELTA = "delta"  # 226 IM Used: the body holds only what changed (RFC 3229 + feed)
    GONE = "gone"  # 410: deactivate the feed
    NOT_FOUND = "not_found"  # 404
    CLIENT_ERROR = "client_error"  # other 4xx
    RATE_LIMITED = "rate_limited"  # 429, or 503 with Retry-After
    SERVER_ERROR = "server_error"  # 5xx
    TIMEOUT = "timeout"  # connect or total deadline passed
    TOO_LARGE = "too_large"  # body or decompressed size cap
    REDIRECT_ERROR = "redirect_error"  # loop or too many hops
    BLOCKED = "blocked"  # address guard refused the destination
    DNS_ERROR = "dns_error"
    CONNECTION_ERROR = "connection_error"
    PROTOCOL_ERROR = "protocol_error"  # malformed HTTP, bad encoding of the transfer
    INVALID_URL = "invalid_url"


class FetchError(msgspec.Struct, frozen=True):
    """A typed fetch failure with a precise, human-readable message (what, where, why)."""

    outcome: FetchOutcome
    message: str


class FetchResult(msgspec.Struct, frozen=True, omit_defaults=True):
    """Everything one fetch learned, success or not."""

    url: str
    """The URL we asked for."""
    outcome: FetchOutcome
    fetched_at: float
    elapsed_s: float = 0.0
    status: int | None = None
    final_url: str = ""
    """Where the body came from after redirects ("" when no redirect happened)."""
    permanent_redirect: str = ""
    """Target of a 301/308 chain (only permanent hops), for the caller to confirm and store."""
    body: bytes = b""
    content_type: str = ""
    etag: str = ""
    last_modified: str = ""
    wire_bytes: int = 0
    """Bytes received on the wire (headers excluded), before decompression."""
    decoded_bytes: int = 0
    retry_after_s: float | None = None
    """Seconds to wait, from Retry-After (either form) on 429/503."""
    max_age_s: float | None = None
    """Cache-Control max-age (or Expires - Date), a hint for the scheduler."""
    error: FetchError | None = None
    links: str = ""
    """The ``Link:`` header values of the final response, joined with commas (WebSub discovery
    reads the hub and the topic's ``self`` URL from them)."""

    @property
    def ok(self) -> bool:
        return self.outcome in (FetchOutcome.OK, FetchOutcome.DELTA)


class WebSubLease(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One push subscription of ours at a publisher's WebSub hub, as it is kept and persisted.

    Its states and what moves it between them are :mod:`feedmesh.websub.lease`'s to decide.
    """

    callback_id: str
    """Random and unguessable: the last segment of the callback URL the hub calls."""
    feed_id: int
    topic: str
    hub: str
    secret: str = ""
    """The ``hub.secret`` given with the subscription: deliveries must be signed with it."""
    state: str = "subscribing"
    """``subscribing``, ``active``, ``denied`` (resubscribed after a backoff) or
    ``unsubscribing``."""
    awaiting: bool = False
    """A request went to the hub and its verification of intent is expected by ``next_at``."""
    lease_s: float = 0.0
    """Lease the hub granted at the last verification."""
    expires_at: float = 0.0
    next_at: float = 0.0
    """When to act next: send a request, renew, or stop waiting for a verification."""
    attempts: int = 0
    """Consecutive failures (refused request, no verification, denial): the backoff's count."""
    last_error: str = ""
    updated_at: float = 0.0
