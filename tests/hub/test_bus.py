"""The in-process bus: fan-out between groups, sharing within one, and byte-bounded backpressure."""

from __future__ import annotations

import asyncio

from feedmesh.hub.bus import MemoryBus
from feedmesh.hub.messages import Article, SubscriptionRemoved, decode, encode
from feedmesh.model import Entry


def article(n: int, body: str = "") -> Article:
    return Article(entry_id=n, feed_id=1, feed_url="http://x/feed", feed_title="X",
                   entry=Entry(key=f"k{n}", title=f"t{n}", summary=body), first_seen_at=float(n))


async def test_every_group_gets_every_message_and_members_share():
    bus = MemoryBus()
    a = await bus.consumer("articles", "filter-0")
    b = await bus.consumer("articles", "filter-1")
    b2 = await bus.consumer("articles", "filter-1")
    for n in range(4):
        await bus.publish("articles", article(n))
    got_a = [(await a.get(0.1)).message.entry_id for _ in range(4)]
    got_b = [(await b.get(0.1)).message.entry_id for _ in range(2)]
    got_b2 = [(await b2.get(0.1)).message.entry_id for _ in range(2)]
    assert got_a == [0, 1, 2, 3]
    assert sorted(got_b + got_b2) == [0, 1, 2, 3]
    assert await a.get(0.01) is None  # a timed-out get loses nothing and closes nothing
    await bus.publish("articles", article(9))
    assert (await a.get(0.1)).message.entry_id == 9


async def test_publisher_waits_while_the_buffer_is_full():
    bus = MemoryBus(capacity_bytes=2000)
    consumer = await bus.consumer("articles", "g")
    size = len(encode(article(0, "x" * 600)))
    published = []

    async def publisher() -> None:
        for n in range(10):
            await bus.publish("articles", article(n, "x" * 600))
            published.append(n)

    task = asyncio.create_task(publisher())
    await asyncio.sleep(0.05)
    assert len(published) == 2000 // size  # blocked on the third message
    _, held = bus.depths()["articles/g"]
    assert held <= 2000
    received = []
    while len(received) < 10:
        delivery = await consumer.get(1.0)
        received.append(delivery.message.entry_id)
        await delivery.ack()  # acknowledging frees room for the publisher
    await task
    assert received == list(range(10))


async def test_one_oversized_message_still_goes_through_alone():
    bus = MemoryBus(capacity_bytes=100)
    consumer = await bus.consumer("articles", "g")
    await asyncio.wait_for(bus.publish("articles", article(1, "y" * 5000)), 1.0)
    delivery = await consumer.get(1.0)
    assert delivery.message.entry.summary == "y" * 5000


async def test_messages_without_consumers_are_counted_as_dropped():
    bus = MemoryBus()
    await bus.publish("nobody", SubscriptionRemoved(sub_id=1, reflector=0))
    assert bus.dropped == {"nobody": 1}


def test_messages_round_trip_through_msgpack():
    message = article(5, "<p>body</p>")
    assert decode(encode(message)) == message
