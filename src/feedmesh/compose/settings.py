"""The settings of every role, and of the parts a command may set, in one place: a command reads
its flags into these (:mod:`feedmesh.commands.flags`), and :mod:`feedmesh.compose` builds the
roles from them. Each is a frozen struct that checks itself when made (a ValueError naming the
setting); the parts' own settings are re-exported here, so that a command needs nothing else.
"""

from __future__ import annotations

import msgspec

from feedmesh.crawl import CrawlSettings
from feedmesh.fetch import FetchSettings
from feedmesh.hub.push.service import PushSettings
from feedmesh.hub.tiers.crawling import CRAWLER_NAME, crawler_group
from feedmesh.hub.tiers.reflector import ReflectorSettings
from feedmesh.hub.web.limits import WebLimits
from feedmesh.schedule import POLICY_NAMES, SchedulerSettings
from feedmesh.websub.delivery import RetryPolicy
from feedmesh.websub.hub_requests import LeaseBounds
from feedmesh.websub.lease import SubscriberSettings
from feedmesh.websub.signature import METHODS as SIGNATURE_METHODS

__all__ = [
    "POLICY_NAMES",
    "SIGNATURE_METHODS",
    "BusSettings",
    "CrawlSettings",
    "FetchSettings",
    "FilterSettings",
    "HubSettings",
    "LeaseBounds",
    "Listen",
    "PushSettings",
    "ReflectorRoleSettings",
    "ReflectorSettings",
    "RetryPolicy",
    "SchedulerSettings",
    "ServeSettings",
    "SubscriberSettings",
    "UpSettings",
    "WebLimits",
    "WebSettings",
    "crawler_groups",
    "parse_shard",
]


def parse_shard(text: str, flag: str = "--shard") -> tuple[int, int]:
    """``"i/n"`` -> (i, n), with 0 <= i < n <= 64; a ValueError that says so otherwise."""
    try:
        i, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"{flag} {text!r}: write it as i/n, e.g. 0/2") from None
    if not 0 <= i < n <= 64:
        raise ValueError(f"{flag} {text!r}: need 0 <= i < n <= 64")
    return i, n


def crawler_groups(crawlers: str) -> list[str]:
    """The ``feeds`` groups of ``--crawlers``: N shards, or the crawlers' names."""
    if crawlers.strip().isdigit():
        count = int(crawlers)
        if not 1 <= count <= 64:
            raise ValueError("--crawlers must be in 1..64")
        return [crawler_group(shard) for shard in range(count)]
    names = [name.strip() for name in crawlers.split(",") if name.strip()]
    if not names:
        raise ValueError(f"--crawlers {crawlers!r}: give a count or the crawlers' names")
    return [crawler_group(name) for name in names]


class Listen(msgspec.Struct, frozen=True):
    """An address a role's HTTP server listens on (port 0: any free one)."""

    host: str = "127.0.0.1"
    port: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.port < 65536:
            raise ValueError(f"port {self.port}: need 0..65535")

    @classmethod
    def parse(cls, text: str, flag: str = "--listen") -> Listen:
        host, _, port = text.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"{flag} {text!r}: write it as HOST:PORT, e.g. 127.0.0.1:8301")
        return cls(host.strip("[]"), int(port))


class BusSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Where a hub's processes meet: ``memory`` (this process) or a NATS JetStream server
    (``nats://HOST:PORT``), its streams prefixed with ``namespace``."""

    url: str = "memory"
    namespace: str = "feedmesh"
    credentials: str = ""
    """This role's NATS nkey seed file (0600; bus/nats_auth.py), for a server that asks for
    one; empty: connect without credentials."""

    @property
    def in_process(self) -> bool:
        return self.url in ("", "memory")

    def __post_init__(self) -> None:
        if not self.in_process and not self.url.startswith(("nats://", "tls://")):
            raise ValueError(f"bus {self.url!r}: use 'memory' or a NATS URL such as "
                             "nats://127.0.0.1:4222")


class HubSettings(msgspec.Struct, frozen=True, kw_only=True):
    data_dir: str = "var"
    reflector_token_file: str = ""
    """A file 0600 holding the bearer token the external reflectors' API asks for (empty:
    none)."""
    filters: int = 1
    reflectors: int = 1
    crawl_interval_s: float = 900.0
    delivery: str = "ids"
    bus_buffer_bytes: int = 1024 * 1024
    """Per upstream, per group: Cobra's 1 MB buffers."""
    schedule: SchedulerSettings | None = SchedulerSettings(policy="feedmesh",
                                                           budget_per_feed_per_day=96.0)
    """The live fetch policy (Cobra crawled every 15 minutes: 96 fetches a feed a day is the
    budget); None: every feed every ``crawl_interval_s``, each cycle spread over it."""
    starting_entries: int = 500
    """A new subscription starts with the newest of these most recent stored entries that it
    matches (the preview searches the same)."""
    forward_backlog: bool = True
    """Match the entries a source already held when it was first crawled. Off for big hubs:
    100,000 new sources would otherwise push a million old articles through the filters."""
    external_filters: bool = False
    """The ``filters`` shards run as ``feedmesh filter`` processes (on a NATS bus): this hub runs
    none of them, but creates their groups before it publishes, so nothing is lost while one is
    not running yet."""
    crawler_shard: tuple[int, int] = (0, 1)
    """``(i, n)``: this hub's crawler fetches the feeds whose id is ``i`` modulo ``n``; the
    others are for the ``feedmesh crawler --shard`` processes of the other shares."""
    crawler_name: str = ""
    """This hub's crawler fetches the feeds the feed ownership table gives this name
    (``feedmesh crawler --name``; hub/tiers/owners.py), which may move while it runs; instead of
    ``crawler_shard``'s modulo split."""
    external_reflectors: tuple[str, ...] = ()
    """The ``reflectors`` run as ``feedmesh reflector`` processes (on a NATS bus), reached at
    these URLs, one per reflector in order: this hub holds no feed; it asks them."""
    fetch: FetchSettings = FetchSettings()
    crawl: CrawlSettings = CrawlSettings()
    reflector: ReflectorSettings = ReflectorSettings()
    public_url: str = ""
    """Where publishers' WebSub hubs reach this hub's web server (``--public-url``): callbacks
    are ``PUBLIC_URL/websub/<id>``. Empty: no push subscription is made (docs/websub.md)."""
    websub: SubscriberSettings = SubscriberSettings()
    push: PushSettings = PushSettings()
    """The WebSub hub of the private feeds and the webhooks (:mod:`.push`); served only with
    the reflectors in this process."""

    def __post_init__(self) -> None:
        if self.public_url and not self.public_url.startswith(("http://", "https://")):
            raise ValueError(f"public URL {self.public_url!r}: give an http:// or https:// URL "
                             "that publishers' hubs can reach")
        if not 1 <= self.filters <= 64 or not 1 <= self.reflectors <= 64:
            raise ValueError("HubSettings: filters and reflectors must be in 1..64")
        if self.crawl_interval_s <= 0:
            raise ValueError("HubSettings.crawl_interval_s must be > 0")
        if not 0 <= self.crawler_shard[0] < self.crawler_shard[1] <= 64:
            raise ValueError(f"HubSettings.crawler_shard {self.crawler_shard}: need 0 <= i < n "
                             "<= 64")
        if self.crawler_name and self.crawler_shard != (0, 1):
            raise ValueError("a crawler takes its feeds by name (the ownership table) or by "
                             "share (i/n), not both")
        if self.crawler_name and not CRAWLER_NAME.fullmatch(self.crawler_name):
            raise ValueError(f"crawler name {self.crawler_name!r}: use 1-64 letters, digits, "
                             "'-' or '_', starting with a letter")
        if self.external_reflectors and len(self.external_reflectors) != self.reflectors:
            raise ValueError(f"{self.reflectors} reflectors need {self.reflectors} URLs, got "
                             f"{len(self.external_reflectors)}")






class ServeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``feedmesh serve`` and ``feedmesh crawler``: the crawling hub (:class:`HubSettings`), where
    it keeps its state and meets its tiers, and what its HTTP server serves."""

    hub: HubSettings = HubSettings()
    bus: BusSettings = BusSettings()
    store: str = ""
    """The hub's PostgreSQL database (``postgresql://...``); empty: SQLite files in the data
    folder."""
    listen: Listen = Listen("127.0.0.1", 8080)
    base_url: str = ""
    """The hub's public URL, in feed links (default ``http://HOST:PORT``)."""
    web: bool = True
    """Serve people (the web layer); False: ``/metrics`` and ``/api/stats`` only (a crawler)."""
    limits: WebLimits = WebLimits()
    opml: str = ""
    """Feeds to add at start-up, from a file or URL."""
    republish: str = ""
    """A mesh key folder: the crawler also republishes what it finds new (SCRIBE-RSS)."""
    republish_listen: str = "127.0.0.1:7000"
    republish_bootstrap: str = ""

    def __post_init__(self) -> None:
        if self.store and not self.store.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"--store {self.store!r}: give a postgresql:// URL (or nothing, "
                             "for SQLite files in --data)")
        if self.hub.external_filters and self.bus.in_process:
            raise ValueError("filters in processes of their own (--external-filters) need a "
                             "NATS bus to meet them on: --bus nats://HOST:PORT")
        if self.hub.external_reflectors and self.bus.in_process:
            raise ValueError("reflectors in processes of their own (--external-reflectors) "
                             "need a NATS bus to meet them on: --bus nats://HOST:PORT")


class UpSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``feedmesh up``: a hub as several processes on this machine (the flags of the same
    names; :mod:`feedmesh.compose.processes`)."""

    data: str = "var-up"
    topology: str = ""
    filters: int = 2
    filter_replicas: int = 1
    crawlers: int = 1
    by_locality: bool = False
    reflectors: int = 1
    web: int = 1
    host: str = "127.0.0.1"
    port: int = 8080
    nats: str = ""
    nats_cluster: int = 0
    """Start this many NATS servers as one JetStream cluster (3: R3 streams); 0: one server."""
    store: str = ""
    opml: str = ""
    allow_network: list[str] = []
    republish: str = ""
    crawl_interval: float = 0.0
    per_host: int = 0
    no_backlog: bool = False
    delivery: str = "ids"


class FilterSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``feedmesh filter``: one filter shard in a process of its own."""

    bus: BusSettings
    state: str
    """The hub's accounts and subscriptions: its hub.db, or its postgresql:// URL."""
    shard: tuple[int, int] = (0, 1)
    data_dir: str = "var"
    """Where the shard's index snapshot is kept."""
    delivery: str = "ids"
    metrics: Listen | None = None

    def __post_init__(self) -> None:
        if self.bus.in_process:
            raise ValueError("--bus: a filter in its own process needs a NATS server, "
                             "nats://HOST:PORT")


class ReflectorRoleSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``feedmesh reflector``: one reflector in a process of its own, with the delivery worker of
    its subscriptions' WebSub subscribers and webhooks."""

    bus: BusSettings
    state: str
    shard: tuple[int, int] = (0, 1)
    store: str = ""
    """The match log's PostgreSQL database; empty: a SQLite file in ``data_dir``."""
    data_dir: str = "var"
    listen: Listen = Listen("127.0.0.1", 8301)
    delivery: str = "ids"
    reflector: ReflectorSettings = ReflectorSettings()
    push: PushSettings = PushSettings()
    guard: FetchSettings = FetchSettings()
    """The address guard of push's requests (``--allow-network``)."""
    token_file: str = ""
    """A file 0600 holding the bearer token its API asks of every caller (empty: none)."""

    def __post_init__(self) -> None:
        if self.bus.in_process:
            raise ValueError("--bus: a reflector in its own process needs a NATS server, "
                             "nats://HOST:PORT")


class WebSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``feedmesh web``: the web layer in a process of its own."""

    bus: BusSettings
    reflectors: tuple[str, ...]
    """Every reflector process's URL, in order."""
    crawlers: tuple[str, ...] = ("crawler-0",)
    """The crawlers' groups of ``feeds``, each told of new feeds."""
    data_dir: str = "var"
    store: str = ""
    listen: Listen = Listen("127.0.0.1", 8080)
    base_url: str = ""
    limits: WebLimits = WebLimits()
    push: PushSettings = PushSettings(sync_interval_s=1.0)
    guard: FetchSettings = FetchSettings()
    starting_entries: int = 500
    reflector_token_file: str = ""
    """A file 0600 holding the bearer token the reflectors' API asks for (empty: none)."""

    def __post_init__(self) -> None:
        if self.bus.in_process:
            raise ValueError("a web process of its own meets the other processes on a NATS "
                             "bus: --bus nats://HOST:PORT")
        if not self.reflectors:
            raise ValueError("--reflectors: give the URL of every reflector process, in order")
