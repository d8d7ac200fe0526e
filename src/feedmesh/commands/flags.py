"""The flags commands share, and how they become settings (:mod:`feedmesh.compose.settings`).

Each ``add_*`` declares a group of flags, its default shown in ``--help`` (defaults that come
from the environment are read by :mod:`feedmesh.environment`); each ``*_settings`` turns the parsed
flags into the settings the roles are built from, checked together, with a ValueError that names
the flags when they do not fit. No command imports another: what two commands share is here.
"""

from __future__ import annotations

import argparse

import msgspec

from feedmesh import environment
from feedmesh.compose.settings import (
    POLICY_NAMES,
    SIGNATURE_METHODS,
    BusSettings,
    CrawlSettings,
    FetchSettings,
    HubSettings,
    LeaseBounds,
    Listen,
    PushSettings,
    ReflectorSettings,
    RetryPolicy,
    SchedulerSettings,
    ServeSettings,
    SubscriberSettings,
    WebLimits,
    parse_shard,
)

__all__ = ["add_bus", "add_data", "add_fetch_arguments", "add_log_level", "add_push_arguments",
           "add_reflector_token", "add_serve_arguments", "add_state", "add_store", "add_web_limits",
           "bus_settings", "fetch_settings", "parse_address", "parse_shard", "push_guard",
           "push_settings", "serve_settings", "web_limits", "worker_settings"]

_PUSH = PushSettings()
_LIMITS = WebLimits()


def parse_address(value: str, what: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``http://HOST:PORT`` -> (host, port); ValueError says what is wrong."""
    text = value.strip()
    if text.startswith("http://"):
        text = text[len("http://"):].rstrip("/")
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{what} must be HOST:PORT (e.g. 127.0.3.1:8400), got {value!r}")
    return host.strip("[]"), int(port)


# -- where a process keeps and finds things ---------------------------------------------------

def add_data(parser: argparse.ArgumentParser, default: str = "var",
             help: str = "directory of the hub's files") -> None:
    parser.add_argument("--data", default=environment.get("FEEDMESH_DATA", default),
                        help=f"{help} (default $FEEDMESH_DATA or ./{default})")


def add_store(parser: argparse.ArgumentParser,
              help: str = "keep the hub's state in this PostgreSQL database (postgresql://...) "
                          "instead of SQLite files in --data") -> None:
    parser.add_argument("--store", default=environment.get("FEEDMESH_STORE"), metavar="URL",
                        help=help)


def add_log_level(parser: argparse.ArgumentParser, default: str = "info") -> None:
    parser.add_argument("--log-level", default=default,
                        choices=("debug", "info", "warning", "error"),
                        help="the least severe log lines written to standard error")


def add_bus(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """``--bus`` and ``--bus-namespace``: where the hub's processes meet."""
    if required:
        parser.add_argument("--bus", required=True, metavar="URL",
                            help="the NATS JetStream server the hub's processes meet on, "
                            "nats://HOST:PORT")
    else:
        parser.add_argument("--bus", default=environment.get("FEEDMESH_BUS", "memory"),
                            metavar="URL", help="where the tiers meet: 'memory' (this process) "
                            "or a NATS JetStream server, nats://HOST:PORT")
    parser.add_argument("--bus-namespace", default="feedmesh", metavar="NAME",
                        help="the hub's streams' prefix on that server")
    parser.add_argument("--bus-credentials", metavar="FILE",
                        default=environment.get("FEEDMESH_BUS_CREDENTIALS", ""),
                        help="this role's NATS nkey seed, a file 0600 (default "
                        "$FEEDMESH_BUS_CREDENTIALS; none: connect without credentials)")


def add_reflector_token(parser: argparse.ArgumentParser) -> None:
    """``--reflector-token-file``: what a client of the reflectors' API proves itself with."""
    parser.add_argument("--reflector-token-file", metavar="FILE",
                        default=environment.get("FEEDMESH_REFLECTOR_TOKEN_FILE", ""),
                        help="the bearer token the reflectors' API asks for, a file 0600 "
                        "(default $FEEDMESH_REFLECTOR_TOKEN_FILE; none: send no token)")


def bus_settings(args: argparse.Namespace) -> BusSettings:
    return BusSettings(url=args.bus, namespace=args.bus_namespace,
                       credentials=args.bus_credentials)


def add_state(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state", required=True, metavar="HUB_DB_OR_URL",
                        help="the hub's accounts and subscriptions: the hub.db of its data "
                        "folder, or its postgresql:// URL")


# -- fetching and push ------------------------------------------------------------------------

def add_fetch_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-network", action="append", default=[], metavar="CIDR",
                        help="allow fetching from this private block (e.g. 127.0.0.0/8 for a "
                             "local farm); repeatable")
    parser.add_argument("--timeout", type=float, default=5.0, help="per-fetch deadline, seconds")
    parser.add_argument("--per-host", type=int, default=2,
                        help="requests in flight per host (default 2)")


def fetch_settings(args: argparse.Namespace) -> FetchSettings:
    return FetchSettings(allow_networks=tuple(args.allow_network), total_timeout_s=args.timeout,
                         connect_timeout_s=min(5.0, args.timeout),
                         per_host_connections=args.per_host)


def _positive(kind: type[int | float]):  # type: ignore[no-untyped-def]
    def read(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{' whole' if kind is int else ''}"
                                             " number") from exc
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value
    read.__name__ = kind.__name__
    return read


def add_push_arguments(parser: argparse.ArgumentParser, *, guard: bool = False) -> None:
    """The flags of push (the WebSub hub of the private feeds, and webhooks): each
    :class:`PushSettings` field an operator may want to change. ``guard``: also
    ``--allow-network`` (a command that does not fetch feeds, whose only requests are push's)."""
    group = parser.add_argument_group("push (WebSub hub of the private feeds, webhooks; "
                                      "docs/websub-hub.md)")
    integer, number = _positive(int), _positive(float)
    if guard:
        group.add_argument("--allow-network", action="append", default=[], metavar="CIDR",
                           help="allow verifications and deliveries to this private block "
                           "(e.g. 127.0.0.0/8 for callbacks on this machine); repeatable")
    group.add_argument("--push-rate", metavar="N", type=number, default=_PUSH.max_deliveries_per_s,
                       help="deliveries per second to WebSub subscribers and webhooks, all "
                       "together (beyond it, entries coalesce into later deliveries)")
    group.add_argument("--push-concurrency", metavar="N", type=integer, default=_PUSH.max_in_flight,
                       help="deliveries in flight at once, all targets together")
    group.add_argument("--push-timeout", metavar="S", type=number, default=_PUSH.timeout_s,
                       help="seconds per verification or delivery, connection included")
    group.add_argument("--push-retries", metavar="N", type=integer,
                       default=_PUSH.retry.max_failures,
                       help="failed deliveries in a row after which a WebSub subscription is "
                       "cancelled (a webhook's waiting entries dropped)")
    group.add_argument("--push-retry-first", metavar="S", type=number,
                       default=_PUSH.retry.first_delay_s,
                       help="seconds before the first retry (then doubling)")
    group.add_argument("--push-retry-max", metavar="S", type=number,
                       default=_PUSH.retry.max_delay_s,
                       help="the longest wait between retries, seconds")
    group.add_argument("--lease-default", metavar="S", type=integer, default=_PUSH.lease.default_s,
                       help="WebSub lease granted when a subscriber asks for none, seconds")
    group.add_argument("--lease-min", metavar="S", type=integer, default=_PUSH.lease.min_s,
                       help="the shortest WebSub lease granted, seconds")
    group.add_argument("--lease-max", metavar="S", type=integer, default=_PUSH.lease.max_s,
                       help="the longest WebSub lease granted, seconds")
    group.add_argument("--websub-per-feed", metavar="N", type=integer,
                       default=_PUSH.max_subscribers_per_feed,
                       help="WebSub subscribers one private feed may have")
    group.add_argument("--webhooks-per-subscription", metavar="N", type=integer,
                       default=_PUSH.max_webhooks_per_subscription,
                       help="webhooks one subscription may have")
    group.add_argument("--push-verifications", metavar="N", type=integer,
                       default=_PUSH.max_verifications,
                       help="verifications of intent waiting at once (beyond: 429)")
    group.add_argument("--websub-signature", metavar="METHOD", choices=SIGNATURE_METHODS,
                       default=_PUSH.websub_signature,
                       help="X-Hub-Signature method of a new WebSub subscriber's deliveries, "
                       f"one of {', '.join(SIGNATURE_METHODS)} (default %(default)s; a feed's "
                       "owner may choose another per subscriber, e.g. sha1 for an older "
                       "PubSubHubbub 0.4 subscriber)")


def push_settings(args: argparse.Namespace) -> PushSettings:
    """The settings the push flags give; ValueError naming the flags when they do not fit
    together."""
    if not args.lease_min <= args.lease_default <= args.lease_max:
        raise ValueError(f"--lease-min ({args.lease_min}) <= --lease-default "
                         f"({args.lease_default}) <= --lease-max ({args.lease_max}) must hold")
    if args.push_retry_first > args.push_retry_max:
        raise ValueError(f"--push-retry-first ({args.push_retry_first:g} s) must not exceed "
                         f"--push-retry-max ({args.push_retry_max:g} s)")
    return PushSettings(
        lease=LeaseBounds(default_s=args.lease_default, min_s=args.lease_min,
                          max_s=args.lease_max),
        retry=RetryPolicy(first_delay_s=args.push_retry_first, max_delay_s=args.push_retry_max,
                          max_failures=args.push_retries),
        timeout_s=args.push_timeout, max_in_flight=args.push_concurrency,
        max_deliveries_per_s=args.push_rate, max_verifications=args.push_verifications,
        max_subscribers_per_feed=args.websub_per_feed,
        max_webhooks_per_subscription=args.webhooks_per_subscription,
        websub_signature=args.websub_signature)


def push_guard(args: argparse.Namespace) -> FetchSettings:
    """The address guard's settings of a command that takes ``--allow-network`` for push
    only."""
    return FetchSettings(allow_networks=tuple(args.allow_network))


def worker_settings(args: argparse.Namespace) -> PushSettings:
    """:func:`push_settings` for a process whose targets other processes save: read from the
    shared store every second."""
    return msgspec.structs.replace(push_settings(args), sync_interval_s=1.0)


# -- the web layer ------------------------------------------------------------------------------

def add_web_limits(parser: argparse.ArgumentParser, *, per_process: bool = False) -> None:
    each = " (per process)" if per_process else ""
    parser.add_argument("--feed-rate", type=float, default=_LIMITS.feed_rate_per_s,
                        help=f"polls per second allowed per personalized feed{each}")
    parser.add_argument("--feed-burst", type=int, default=_LIMITS.feed_burst,
                        help="polls of one personalized feed allowed at once, above the rate")
    parser.add_argument("--hub-rate", type=float, default=_LIMITS.hub_rate_per_s,
                        help="WebSub subscription requests (POST /hub) per second per client "
                        f"address{each}")
    parser.add_argument("--hub-burst", type=int, default=_LIMITS.hub_burst,
                        help="WebSub subscription requests allowed at once, above the rate")


def web_limits(args: argparse.Namespace) -> WebLimits:
    return WebLimits(feed_rate_per_s=args.feed_rate, feed_burst=args.feed_burst,
                     hub_rate_per_s=args.hub_rate, hub_burst=args.hub_burst)


# -- the crawling hub (serve, crawler) ------------------------------------------------------------

def add_serve_arguments(parser: argparse.ArgumentParser, *, crawler: bool = False) -> None:
    """``feedmesh serve``'s flags; ``crawler``: also ``feedmesh crawler``'s own (which share of
    the feeds, by name or modulo, and from which address)."""
    add_data(parser, help="directory of the SQLite files")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address the web server listens on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=8080,
                        help="port the web server listens on (0: any free one)")
    parser.add_argument("--base-url", default="",
                        help="public URL of this hub, used in feed links (default http://HOST:PORT)")
    parser.add_argument("--public-url", default=environment.get("FEEDMESH_PUBLIC_URL"),
                        metavar="URL", help="URL at which publishers' WebSub hubs reach this "
                        "server (callbacks PUBLIC_URL/websub/ID); without it feeds are only "
                        "polled (docs/websub.md)")
    parser.add_argument("--websub-secret-over-http", action="store_true",
                        help="send hub.secret to http:// hubs too (WebSub 5.1: over HTTPS only; "
                             "without it such subscriptions have no secret)")
    parser.add_argument("--policy", default="feedmesh",
                        choices=("interval", *sorted(POLICY_NAMES)),
                        help="when to fetch each feed: a learned policy (default feedmesh, see "
                             "docs/scheduling.md) or 'interval' (every feed every --interval)")
    parser.add_argument("--budget", type=float, default=96.0,
                        help="fetches per feed per day for a learned policy (96: Cobra's 15 min)")
    parser.add_argument("--interval", type=float, default=900.0,
                        help="seconds between crawl cycles with --policy interval")
    parser.add_argument("--filters", type=int, default=1, help="filter shards")
    parser.add_argument("--reflectors", type=int, default=1,
                        help="reflectors, each serving the feeds of part of the accounts")
    parser.add_argument("--delivery", choices=("ids", "article"), default="ids",
                        help="filter -> reflector: matching ids, or the article to re-match")
    parser.add_argument("--opml", default="", metavar="FILE_OR_URL",
                        help="source feeds to add at start-up")
    parser.add_argument("--soft-memory-mb", type=int, default=0,
                        help="above this resident size, reflectors drop entry bodies")
    parser.add_argument("--hard-memory-mb", type=int, default=0,
                        help="above this resident size, reflectors drop new entries")
    parser.add_argument("--no-backlog", action="store_true",
                        help="do not match the entries a source held before it was followed")
    add_web_limits(parser)
    add_bus(parser, required=False)
    add_store(parser)
    parser.add_argument("--external-filters", action="store_true",
                        help="run no filter here: the --filters shards are `feedmesh filter` "
                        "processes on the same --bus (NATS)")
    parser.add_argument("--external-reflectors", default="", metavar="URL,URL,...",
                        help="run no reflector here: the --reflectors are `feedmesh reflector` "
                        "processes on the same --bus (NATS), answering at these URLs, in order")
    add_reflector_token(parser)
    add_log_level(parser)
    parser.add_argument("--republish", default="", metavar="KEY_DIR",
                        help="multicast what the crawler finds new on the SCRIBE-RSS mesh, "
                             "signed with this key folder (`feedmesh keys make --dir`) and "
                             "marked as republications; source feeds with their <subscribe> "
                             "element at /mesh/opml")
    parser.add_argument("--republish-listen", default="127.0.0.1:7000", metavar="HOST:PORT",
                        help="with --republish: the hub's UDP address on the overlay")
    parser.add_argument("--republish-bootstrap", default="", metavar="HOST:PORT",
                        help="with --republish: an overlay node to join through (default: "
                             "start a new ring)")
    add_push_arguments(parser)
    add_fetch_arguments(parser)
    if crawler:
        parser.add_argument("--shard", default=None, metavar="I/N",
                            help="which share of the feeds: ids equal to I modulo N")
        parser.add_argument("--name", default="", metavar="NAME",
                            help="crawl the feeds the ownership table gives NAME (feedmesh map "
                            "--apply assigns and moves them while crawlers run); not with "
                            "--shard")
        parser.add_argument("--source-address", default="", metavar="IP",
                            help="every fetch leaves from this local address (e.g. 127.0.1.2)")


def serve_settings(args: argparse.Namespace, *, web: bool = True) -> ServeSettings:
    """``feedmesh serve``'s (``web``) or ``feedmesh crawler``'s settings from their flags."""
    fetch = fetch_settings(args)
    shard, name = (0, 1), ""
    if not web:
        if args.name and args.shard is not None:
            raise ValueError(f"--name {args.name} and --shard {args.shard} are exclusive: a "
                             "crawler takes its feeds from the ownership table by name, or by "
                             "id modulo n")
        shard, name = parse_shard(args.shard or "0/1"), args.name
        if args.source_address:
            fetch = msgspec.structs.replace(fetch, source_address=args.source_address)
    hub = HubSettings(
        data_dir=args.data, filters=args.filters, reflectors=args.reflectors,
        external_filters=args.external_filters, crawler_shard=shard, crawler_name=name,
        external_reflectors=tuple(url.strip() for url in args.external_reflectors.split(",")
                                  if url.strip()),
        crawl_interval_s=args.interval, delivery=args.delivery, fetch=fetch,
        reflector_token_file=args.reflector_token_file,
        schedule=(None if args.policy == "interval" else
                  SchedulerSettings(policy=args.policy, budget_per_feed_per_day=args.budget)),
        forward_backlog=not args.no_backlog, public_url=args.public_url,
        websub=SubscriberSettings(secret_over_http=args.websub_secret_over_http),
        # A PostgreSQL transaction is round trips: fetches that found nothing new share one
        # for up to a quarter second (what is new is still committed at once).
        crawl=CrawlSettings(quiet_batch_interval_s=0.25 if args.store else 0.0),
        push=push_settings(args),
        reflector=ReflectorSettings(soft_memory_bytes=args.soft_memory_mb << 20,
                                    hard_memory_bytes=args.hard_memory_mb << 20))
    return ServeSettings(hub=hub, bus=bus_settings(args), store=args.store,
                         listen=Listen(args.host, args.port), base_url=args.base_url, web=web,
                         limits=web_limits(args), opml=args.opml, republish=args.republish,
                         republish_listen=args.republish_listen,
                         republish_bootstrap=args.republish_bootstrap)
