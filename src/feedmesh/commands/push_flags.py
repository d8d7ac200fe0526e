"""The flags of push (the WebSub hub of the private feeds, and webhooks), shared by the commands
that run a delivery worker: each :class:`~feedmesh.hub.push.PushSettings` field an operator may
want to change, its default shown in ``--help``, checked together with a message that names the
flags."""

from __future__ import annotations

import argparse

import msgspec

from feedmesh.fetch.settings import FetchSettings
from feedmesh.hub.push import PushSettings
from feedmesh.websub.delivery import RetryPolicy
from feedmesh.websub.hub_requests import LeaseBounds

__all__ = ["add_push_arguments", "push_guard", "push_settings", "worker_settings"]

_PUSH = PushSettings()


def _positive(kind: type[int] | type[float]):  # type: ignore[no-untyped-def]
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
    """The push flags; ``guard``: also ``--allow-network`` (a command that does not fetch
    feeds, whose only requests are push's)."""
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
    group.add_argument("--push-retries", metavar="N", type=integer, default=_PUSH.retry.max_failures,
                       help="failed deliveries in a row after which a WebSub subscription is "
                       "cancelled (a webhook's waiting entries dropped)")
    group.add_argument("--push-retry-first", metavar="S", type=number, default=_PUSH.retry.first_delay_s,
                       help="seconds before the first retry (then doubling)")
    group.add_argument("--push-retry-max", metavar="S", type=number, default=_PUSH.retry.max_delay_s,
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
    group.add_argument("--push-verifications", metavar="N", type=integer, default=_PUSH.max_verifications,
                       help="verifications of intent waiting at once (beyond: 429)")


def push_settings(args: argparse.Namespace) -> PushSettings:
    """The settings the flags give; ValueError naming the flags when they do not fit
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
        max_webhooks_per_subscription=args.webhooks_per_subscription)


def push_guard(args: argparse.Namespace) -> FetchSettings:
    """The address guard's settings of a command that takes ``--allow-network`` for push
    only."""
    return FetchSettings(allow_networks=tuple(args.allow_network))


def worker_settings(args: argparse.Namespace) -> PushSettings:
    """:func:`push_settings` for a process whose targets other processes save: read from the
    shared store every second."""
    return msgspec.structs.replace(push_settings(args), sync_interval_s=1.0)
