"""Feeds rendered once per version and compressed once, shared by every reader."""

from __future__ import annotations

import asyncio
import gzip

import pytest

from feedmesh.hub.web.rendered import RenderedFeeds


class Renderer:
    def __init__(self, size: int = 1000) -> None:
        self.calls = 0
        self.size = size
        self.gate: asyncio.Event | None = None

    async def __call__(self) -> bytes:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        return bytes([self.calls % 256]) * self.size


async def test_one_rendering_per_version_and_format():
    feeds, render = RenderedFeeds(), Renderer()
    first = await feeds.get(1, "rss2.0", (0, 5), render)
    again = await feeds.get(1, "rss2.0", (0, 5), render)
    assert again is first and render.calls == 1
    assert gzip.decompress(first.gzipped) == first.body
    await feeds.get(1, "atom1.0", (0, 5), render)  # another format: its own rendering
    await feeds.get(1, "rss2.0", (0, 6), render)   # a new version: rendered again
    await feeds.get(1, "rss2.0", (1, 6), render)   # a new URL generation too
    assert render.calls == 4 and feeds.renders == 4


async def test_readers_asking_at_once_share_one_rendering():
    feeds, render = RenderedFeeds(), Renderer()
    render.gate = asyncio.Event()
    readers = [asyncio.create_task(feeds.get(7, "rss2.0", (0, 1), render)) for _ in range(50)]
    await asyncio.sleep(0)  # every reader is waiting now (the event is not set)
    render.gate.set()
    answers = await asyncio.gather(*readers)
    assert render.calls == 1 and all(a is answers[0] for a in answers)


async def test_a_failed_rendering_fails_its_readers_and_is_tried_again():
    feeds = RenderedFeeds()

    async def broken() -> bytes:
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        await feeds.get(1, "rss2.0", (0, 1), broken)
    render = Renderer()
    assert (await feeds.get(1, "rss2.0", (0, 1), render)).body and render.calls == 1


async def test_memory_is_bounded_least_recently_served_first():
    feeds = RenderedFeeds(max_bytes=10_000)
    render = Renderer(size=3000)  # ~3 KB plain + a little gzipped each
    for sub_id in range(1, 4):
        await feeds.get(sub_id, "rss2.0", (0, 1), render)
    await feeds.get(1, "rss2.0", (0, 1), render)  # 1 is now the most recently served
    await feeds.get(4, "rss2.0", (0, 1), render)  # over the bound: 2 goes first
    assert feeds.bytes <= 10_000
    calls = render.calls
    await feeds.get(1, "rss2.0", (0, 1), render)
    assert render.calls == calls  # still held
    await feeds.get(2, "rss2.0", (0, 1), render)
    assert render.calls == calls + 1  # dropped, rendered again


async def test_a_hub_renders_a_feed_once_for_all_its_readers(hub_env, ann):
    from tests.hub.web.conftest import filled_subscription, unchanged

    sub = await filled_subscription(hub_env, ann, entries=3)
    url = sub["feed_urls"]["rss"]
    renders = hub_env.hub.metrics.feed_renders

    async def read_many() -> tuple[float, list[bytes]]:
        before = renders._value.get()
        bodies = []
        for encoding in ("gzip", "identity", "gzip", "identity", "gzip"):
            async with hub_env.session.get(url, headers={"Accept-Encoding": encoding}) as r:
                assert r.status == 200
                bodies.append(await r.read())  # decoded by the client either way
        return renders._value.get() - before, bodies

    rendered, bodies = await unchanged(hub_env, sub["id"], read_many)
    assert rendered <= 1 and len(set(bodies)) == 1  # five readers, one rendering, same bytes
