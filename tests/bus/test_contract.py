"""What every Bus implementation must do (the port's docstring, :mod:`feedmesh.bus.ports`).

Parametrized by the ``bus`` fixture (tests/bus/conftest.py): a new implementation adds a
fixture parameter, not tests.
"""

from __future__ import annotations

import asyncio

import pytest

from feedmesh.bus import BusClosedError, Outgoing
from tests.eventually import eventually


async def drain(consumer, count: int, timeout: float = 5.0) -> list:
    got = []
    for _ in range(count):
        delivery = await consumer.get(timeout)
        assert delivery is not None, f"only {len(got)} of {count} deliveries arrived"
        got.append(delivery)
    return got


async def test_every_group_gets_every_message_and_members_share(bus):
    a = await bus.consumer("articles", "filter-0")
    b = await bus.consumer("articles", "filter-1")
    b2 = await bus.consumer("articles", "filter-1")
    for n in range(4):
        await bus.publish("articles", b"m%d" % n)
    got_a = [d.data for d in await drain(a, 4)]
    assert got_a == [b"m0", b"m1", b"m2", b"m3"]  # one member sees them in publish order
    shared = []
    for member in (b, b2):
        while (delivery := await member.get(0.05)) is not None:
            shared.append(delivery.data)
            await delivery.ack()
        if len(shared) == 4:
            break
    assert sorted(shared) == [b"m0", b"m1", b"m2", b"m3"]  # each went to one member only
    assert b.group == b2.group == "filter-1" and a.subject == "articles"


async def test_seq_numbers_each_subject_in_publish_order(bus):
    consumer = await bus.consumer("s", "g")
    seqs = [await bus.publish("s", b"x%d" % n) for n in range(5)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    assert await bus.last_seq("s") == seqs[-1]
    assert await bus.last_seq("never-used") == 0
    assert [d.seq for d in await drain(consumer, 5)] == seqs


async def test_a_timed_out_get_loses_nothing(bus):
    consumer = await bus.consumer("s", "g")
    assert await consumer.get(0.01) is None
    await bus.publish("s", b"late")
    delivery = await consumer.get(5.0)
    assert delivery is not None and delivery.data == b"late"


async def test_bytes_arrive_as_sent(bus):
    consumer = await bus.consumer("s", "g")
    payload = bytes(range(256)) * 40
    await bus.publish("s", payload)
    delivery = (await drain(consumer, 1))[0]
    assert delivery.data == payload and delivery.size == len(payload)


async def test_a_nak_redelivers_and_counts(bus):
    consumer = await bus.consumer("s", "g")
    await bus.publish("s", b"work")
    first = (await drain(consumer, 1))[0]
    assert first.redeliveries == 0
    await first.nak()
    second = (await drain(consumer, 1))[0]
    assert (second.data, second.seq, second.redeliveries) == (b"work", first.seq, 1)
    await second.nak(delay_s=0.05)
    third = (await drain(consumer, 1))[0]
    assert third.redeliveries == 2
    await third.ack()
    assert await consumer.get(0.05) is None  # acknowledged: never again


async def test_an_acknowledged_message_is_settled_once(bus):
    consumer = await bus.consumer("s", "g")
    seq = await bus.publish("s", b"once")
    delivery = (await drain(consumer, 1))[0]
    await delivery.ack()
    await delivery.ack()  # a second ack is harmless
    await delivery.nak()  # and a nak after an ack changes nothing
    assert await consumer.get(0.05) is None
    assert await bus.wait_acked("s", seq, timeout=1.0)


async def test_a_repeated_msg_id_is_delivered_once(bus):
    consumer = await bus.consumer("s", "g")
    first = await bus.publish("s", b"entry 7", msg_id="entry-7")
    again = await bus.publish("s", b"entry 7", msg_id="entry-7")
    other = await bus.publish("s", b"entry 8", msg_id="entry-8")
    assert again == first and other > first
    got = await drain(consumer, 2)
    assert [d.data for d in got] == [b"entry 7", b"entry 8"]
    assert got[0].msg_id == "entry-7"
    assert await consumer.get(0.05) is None


async def test_publish_many_is_publish_in_order(bus):
    a = await bus.consumer("matches.0", "reflector-0")
    b = await bus.consumer("matches.1", "reflector-1")
    earlier = await bus.publish("matches.0", b"x", msg_id="articles.1.0")
    seqs = await bus.publish_many([
        Outgoing("matches.0", b"x again", "articles.1.0"),  # a copy of what was sent: dropped
        Outgoing("matches.0", b"y", "articles.2.0"),
        Outgoing("matches.1", b"z"),
        Outgoing("matches.0", b"w"),
        Outgoing("matches.0", b"y again", "articles.2.0"),  # a copy within the batch too
    ])
    assert seqs == [earlier, earlier + 1, 1, earlier + 2, earlier + 1]
    assert [d.data for d in await drain(a, 3)] == [b"x", b"y", b"w"]
    assert [d.data for d in await drain(b, 1)] == [b"z"]
    assert await a.get(0.05) is None
    assert await bus.publish_many([]) == []


async def test_publish_many_waits_for_room_and_loses_nothing(bus):
    consumer = await bus.consumer("s", "g")
    batch = [Outgoing("s", bytes([n]) * 4000) for n in range(40)]  # 160 KB, room for 64 KB
    publishing = asyncio.create_task(bus.publish_many(batch))
    got = []
    while len(got) < len(batch):
        delivery = await consumer.get(10.0)
        assert delivery is not None, f"only {len(got)} of {len(batch)} arrived"
        got.append(delivery)
        await delivery.ack()
    seqs = await asyncio.wait_for(publishing, 10.0)
    assert sorted(seqs) == [d.seq for d in got] == list(range(1, 41))
    assert sorted(d.data for d in got) == sorted(m.data for m in batch)
    assert await consumer.get(0.05) is None


async def test_ack_many_settles_each_once(bus):
    consumer = await bus.consumer("s", "g")
    seqs = await bus.publish_many([Outgoing("s", bytes([n])) for n in range(6)])
    got = await drain(consumer, 6)
    await got[0].ack()  # settled before: skipped
    await got[1].nak()  # handed back before: skipped, so it comes again
    await bus.ack_many(got)
    await bus.ack_many([])
    again = (await drain(consumer, 1))[0]
    assert (again.seq, again.redeliveries) == (seqs[1], 1)
    assert not await bus.wait_acked("s", seqs[-1], timeout=0.05)  # the nakked one is open
    await bus.ack_many([again])
    assert await bus.wait_acked("s", seqs[-1], timeout=2.0)
    assert await consumer.get(0.05) is None


async def test_wait_acked_waits_for_every_group(bus):
    fast = await bus.consumer("control", "filter-0")
    slow = await bus.consumer("control", "reflector-0")
    seq = await bus.publish("control", b"add 1")
    assert not await bus.wait_acked("control", seq, timeout=0.05)  # nobody acked yet
    await (await drain(fast, 1))[0].ack()
    assert not await bus.wait_acked("control", seq, timeout=0.05)  # one group still has it
    waiter = asyncio.create_task(bus.wait_acked("control", seq, timeout=5.0))
    await (await drain(slow, 1))[0].ack()
    assert await waiter


async def test_wait_acked_needs_every_earlier_message_too(bus):
    consumer = await bus.consumer("s", "g")
    first = await bus.publish("s", b"1")
    second = await bus.publish("s", b"2")
    d1, d2 = await drain(consumer, 2)
    await d2.ack()  # out of order: message 1 is still open
    assert not await bus.wait_acked("s", second, timeout=0.05)
    await d1.ack()
    assert await bus.wait_acked("s", second, timeout=1.0)
    assert await bus.wait_acked("s", first, timeout=1.0)


async def test_close_ends_iteration_and_refuses_publishing(bus):
    consumer = await bus.consumer("s", "g")
    received = []

    async def read() -> None:
        async for delivery in consumer:
            received.append(delivery.data)
            await delivery.ack()

    reader = asyncio.create_task(read())
    await bus.publish("s", b"before")
    await eventually(lambda: received == [b"before"])
    await bus.close()
    await asyncio.wait_for(reader, 5.0)  # the iteration ended
    with pytest.raises(BusClosedError):
        await bus.publish("s", b"after")


async def test_depths_show_what_is_not_yet_acknowledged(bus):
    consumer = await bus.consumer("s", "g")
    await bus.publish("s", b"12345")
    # Depths are metrics: a bus may refresh them in the background, so they are awaited.
    # Bytes are at least the payload's (a server's stored size adds its own headers).
    await eventually(lambda: bus.depths().get("s/g", (0, 0))[0] == 1
                     and bus.depths()["s/g"][1] >= 5)
    delivery = (await drain(consumer, 1))[0]
    await asyncio.sleep(0)
    assert bus.depths()["s/g"][0] == 1  # delivered, not yet acknowledged
    await delivery.ack()
    await eventually(lambda: bus.depths()["s/g"] == (0, 0))


async def test_a_parked_message_is_kept_aside_and_never_delivered_again(bus):
    consumer = await bus.consumer("articles", "filter-0")
    seq = await bus.publish("articles", b"\xff not a message")
    await bus.publish("articles", b"fine")
    poison = (await drain(consumer, 1))[0]
    await bus.park(poison, "filter-0", "bad_message: not\nMessagePack")
    after = (await drain(consumer, 1))[0]
    assert after.data == b"fine"  # the poison does not block what follows
    await after.ack()
    assert await consumer.get(0.05) is None
    assert await bus.wait_acked("articles", seq, timeout=5.0)  # parking settled it
    parked = await bus.parked()
    assert [(p.subject, p.seq, p.group, p.data) for p in parked] == [
        ("articles", seq, "filter-0", b"\xff not a message")]
    assert parked[0].reason.startswith("bad_message: not") and "\n" not in parked[0].reason
    await bus.publish("articles", b"second poison")
    second = (await drain(consumer, 1))[0]
    await bus.park(second, "filter-0", "handler raised")
    assert [p.data for p in await bus.parked()] == [b"second poison", b"\xff not a message"]
    assert [p.data for p in await bus.parked(limit=1)] == [b"second poison"]


async def test_a_dropped_group_holds_nothing_back(bus):
    stays = await bus.consumer("feeds", "crawler-stays")
    await bus.consumer("feeds", "crawler-left")  # a member that will never read again
    seq = await bus.publish("feeds", b"owners changed")
    await (await drain(stays, 1))[0].ack()
    # what the departed group has not acknowledged keeps the message ...
    assert not await bus.wait_acked("feeds", seq, timeout=0.05)
    await eventually(lambda: any(key.endswith("/crawler-left") and held[0]
                                 for key, held in bus.depths().items()), timeout=10)
    # ... until the group is dropped
    assert await bus.drop_group("feeds", "crawler-left")
    assert await bus.wait_acked("feeds", seq, timeout=5.0)
    await eventually(lambda: not any(key.endswith("/crawler-left")
                                     for key in bus.depths()), timeout=10)
    assert not await bus.drop_group("feeds", "crawler-left")  # gone already
    assert not await bus.drop_group("never-used", "anyone")
    # the group that stays still gets what comes next
    await bus.publish("feeds", b"next")
    assert [d.data for d in await drain(stays, 1)] == [b"next"]
