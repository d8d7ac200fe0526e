"""``feedmesh demo``: a farm of synthetic feeds in a child process on loopback (its clock
accelerated, so feeds post every few seconds), and the embedded hub crawling it, with a demo
account that follows every farm feed and holds a few example subscriptions."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Awaitable, Callable

import msgspec

from feedmesh.compose.embedded import embedded_hub
from feedmesh.compose.lifecycle import bind, run_roles
from feedmesh.compose.settings import CrawlSettings, FetchSettings, HubSettings
from feedmesh.farm import FarmConfig, FarmProcess
from feedmesh.feeds.opml import parse_opml
from feedmesh.hub.front.facade import HubFacade
from feedmesh.store import Subscription

__all__ = ["EXAMPLE_QUERIES", "Demo", "run_demo"]

EXAMPLE_QUERIES = ("(people AND time) OR government", "market OR economy", '"new york" OR london')


class Demo(msgspec.Struct, kw_only=True):
    """What the demo shows: the hub (its facade), where it is, the demo account's token, its
    subscriptions and their private feed URLs."""

    hub: HubFacade
    base: str
    token: str = ""
    subs: list[Subscription] = []
    feeds: list[tuple[str, str]] = []
    """(query, RSS URL) of each demo subscription."""


async def run_demo(*, data_dir: str, feeds: int, speed: float, interval_s: float, port: int,
                   show: Callable[[Demo, asyncio.Event], Awaitable[object]],
                   started: Callable[[int], object] = lambda feeds: None) -> int:
    """Run the farm and the hub until SIGINT or SIGTERM, or until ``show(demo, stop)`` (the
    live view, given the demo once its account exists) returns."""
    started(feeds)
    with FarmProcess(FarmConfig(feeds=feeds, seed=1, speed=speed)) as farm:
        settings = HubSettings(
            # Every feed every interval: the farm's clock runs 120x, the hub's is real, and a
            # learned schedule on real time would wait hours for feeds that post every minute.
            data_dir=data_dir, crawl_interval_s=interval_s, schedule=None,
            fetch=FetchSettings(allow_networks=("127.0.0.0/8",), per_host_connections=8),
            crawl=CrawlSettings())
        sock = bind("127.0.0.1", port)
        try:
            hub = embedded_hub(settings)
        except BaseException:
            sock.close()
            raise
        demo = Demo(hub=hub.front, base=f"http://127.0.0.1:{sock.getsockname()[1]}")

        async def account() -> None:
            front = hub.front
            made, demo.token = await front.create_account("demo")
            opml = parse_opml(await asyncio.to_thread(_read, farm.opml_url))
            await front.follow_sources(made.id, opml.outlines)
            demo.subs = [await front.add_subscription(made.id, name="", query=query, keep=10)
                         for query in EXAMPLE_QUERIES]
            demo.feeds = [(sub.query, f"{demo.base}/f/{front.feed_token(sub)}.rss")
                          for sub in demo.subs]

        return await run_roles(hub.with_web(demo.base), http=sock, closers=hub.closers(),
                               announce=account, until=lambda stop: show(demo, stop))


def _read(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.read()
