"""What only the in-process bus does: byte-bounded buffers whose wait is the backpressure."""

from __future__ import annotations

import asyncio

import pytest

from feedmesh.bus import BusClosedError
from feedmesh.bus.memory import MemoryBus
from tests.eventually import eventually


async def test_publisher_waits_while_the_buffer_is_full():
    bus = MemoryBus(capacity_bytes=2000)
    consumer = await bus.consumer("articles", "g")
    published = []

    async def publisher() -> None:
        for n in range(10):
            await bus.publish("articles", bytes([n]) * 600)
            published.append(n)

    task = asyncio.create_task(publisher())
    # Three messages fit in 2,000 bytes; the fourth waits for room.
    await eventually(lambda: bus.waiting_publishers() == 1)
    assert published == [0, 1, 2] and bus.depths()["articles/g"] == (3, 1800)
    received = []
    while len(received) < 10:
        delivery = await consumer.get(1.0)
        received.append(delivery.data[0])
        await delivery.ack()  # acknowledging frees room for the publisher
    await task
    assert received == list(range(10))


async def test_an_unacknowledged_delivery_keeps_its_bytes_held():
    bus = MemoryBus(capacity_bytes=1000)
    consumer = await bus.consumer("s", "g")
    await bus.publish("s", b"x" * 800)
    delivery = await consumer.get(1.0)
    blocked = asyncio.create_task(bus.publish("s", b"y" * 800))
    await eventually(lambda: bus.waiting_publishers() == 1)
    assert bus.depths()["s/g"] == (1, 800)  # the delivered message still holds its 800 bytes
    await delivery.nak()  # a nak keeps them held too: the message is queued again
    assert bus.waiting_publishers() == 1
    again = await consumer.get(1.0)
    await again.ack()
    await asyncio.wait_for(blocked, 5.0)


async def test_one_oversized_message_still_goes_through_alone():
    bus = MemoryBus(capacity_bytes=100)
    consumer = await bus.consumer("articles", "g")
    await asyncio.wait_for(bus.publish("articles", b"y" * 5000), 1.0)
    delivery = await consumer.get(1.0)
    assert delivery.data == b"y" * 5000


async def test_messages_without_groups_are_counted_as_dropped():
    bus = MemoryBus()
    await bus.publish("nobody", b"lost")
    assert bus.dropped == {"nobody": 1}


async def test_a_group_created_later_starts_after_what_was_published():
    bus = MemoryBus()
    await bus.consumer("s", "early")
    old = await bus.publish("s", b"old")
    late = await bus.consumer("s", "late")
    new = await bus.publish("s", b"new")
    assert (await late.get(1.0)).seq == new > old


async def test_closing_releases_a_publisher_waiting_for_room():
    bus = MemoryBus(capacity_bytes=10)
    await bus.consumer("s", "g")
    await bus.publish("s", b"x" * 10)
    blocked = asyncio.create_task(bus.publish("s", b"y" * 10))
    await eventually(lambda: bus.waiting_publishers() == 1)
    await bus.close()
    with pytest.raises(BusClosedError, match="while publishing to s"):
        await asyncio.wait_for(blocked, 5.0)


async def test_the_bus_carries_bytes_only():
    bus = MemoryBus()
    with pytest.raises(TypeError, match="bytes, not str"):
        await bus.publish("s", "text")  # type: ignore[arg-type]
