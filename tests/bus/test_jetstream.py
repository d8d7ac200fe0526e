"""What the JetStream bus adds to the port's contract: durability, redelivery to another worker
when one dies, backpressure between separate connections, and waiting out a server outage.

Each test starts its own ``nats-server`` (it kills and restarts it) on a free loopback port.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import nats.js.errors
import pytest

from feedmesh.bus import BusError, Outgoing, jetstream
from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.bus.nats_server import LocalNats
from tests.eventually import eventually


@pytest.fixture
def server(tmp_path):
    nats = LocalNats(tmp_path / "nats").start()
    yield nats
    nats.stop()


async def connect(server: LocalNats, namespace: str = "fm", **options) -> JetStreamBus:
    return await JetStreamBus.connect(server.url, namespace=namespace, **options)


async def test_messages_and_groups_survive_a_server_crash(server):
    # The member had pulled a1 and a2 too; the crash loses its hold on them (or the server's
    # record of a nak), so they come back after the ack wait.
    bus = await connect(server, ack_wait_s=1.0)
    consumer = await bus.consumer("articles", "filter-0")
    seqs = [await bus.publish("articles", b"a%d" % n, msg_id=f"a{n}") for n in range(3)]
    first = await consumer.get(5.0)
    await first.ack()
    await bus.close()
    server.kill()  # kill -9: what JetStream acknowledged to the publisher is on disk
    server.start()
    bus = await connect(server, ack_wait_s=1.0)
    consumer = await bus.consumer("articles", "filter-0")  # the durable group, bound again
    got = []
    while len(got) < 2 and (delivery := await consumer.get(10.0)) is not None:
        got.append((delivery.seq, delivery.data))
        await delivery.ack()
    # the acked one is not redelivered; the two held ones come back in either order (redelivery
    # after a restart promises no order: CI once saw a2 before a1)
    assert sorted(got) == [(seqs[1], b"a1"), (seqs[2], b"a2")]
    assert await bus.publish("articles", b"a1", msg_id="a1") == seqs[1]  # ids remembered too
    await bus.close()


async def test_a_group_gets_what_was_published_while_its_members_were_away(server):
    bus = await connect(server)
    member = await bus.consumer("control", "reflector-0")
    await member.close()
    seq = await bus.publish("control", b"add subscription 7")
    assert not await bus.wait_acked("control", seq, timeout=0.1)
    member = await bus.consumer("control", "reflector-0")
    delivery = await member.get(5.0)
    assert (delivery.seq, delivery.data) == (seq, b"add subscription 7")
    await delivery.ack()
    assert await bus.wait_acked("control", seq, timeout=5.0)
    await bus.close()


async def test_a_dead_workers_delivery_goes_to_another_member(server):
    dying = await connect(server, ack_wait_s=1.0)
    living = await connect(server, ack_wait_s=1.0)
    victim = await dying.consumer("matches.0", "reflector-0")
    survivor = await living.consumer("matches.0", "reflector-0")
    await living.publish("matches.0", b"match 1")
    taken = await victim.get(5.0)
    assert taken is not None and taken.redeliveries == 0
    await dying._nc.close()  # the process dies holding it: no ack, no nak
    again = await survivor.get(10.0)
    assert again is not None and (again.data, again.seq) == (b"match 1", taken.seq)
    assert again.redeliveries == 1
    await again.ack()
    await living.close()


async def test_closing_a_member_hands_its_prefetched_messages_on(server):
    bus = await connect(server, batch=8, ack_wait_s=30.0)
    a = await bus.consumer("s", "g")
    b = await bus.consumer("s", "g")
    for n in range(4):
        await bus.publish("s", b"%d" % n)
    first = await a.get(5.0)  # pulls up to 8: the other three wait in a's hands
    await first.ack()
    await a.close()
    rest = []
    while len(rest) < 3 and (delivery := await b.get(5.0)) is not None:  # not 30 s later
        rest.append(delivery.data)
        await delivery.ack()
    assert sorted([*rest, first.data]) == [b"0", b"1", b"2", b"3"]
    await bus.close()


async def test_a_full_stream_holds_the_publisher_until_the_slowest_group_acks(server):
    publisher = await connect(server, capacity_bytes=4096)
    reader = await connect(server, capacity_bytes=4096)
    slow = await reader.consumer("articles", "filter-0")
    chunk = b"x" * 1000
    for _ in range(3):
        await publisher.publish("articles", chunk)
    blocked = asyncio.create_task(publisher.publish("articles", chunk + b"!"))
    await eventually(lambda: publisher.waiting_publishers() == 1)
    assert not blocked.done()
    for _ in range(2):
        await (await slow.get(5.0)).ack()
    seq = await asyncio.wait_for(blocked, 10.0)
    assert seq == 4 and publisher.waiting_publishers() == 0
    with pytest.raises(BusError, match="exceeds the bus's buffer"):
        await publisher.publish("articles", b"y" * 5000)
    await publisher.close()
    await reader.close()


async def test_publishing_waits_out_a_server_outage_without_doubling(server, caplog):
    bus = await connect(server)
    consumer = await bus.consumer("articles", "filter-0")
    await bus.publish("articles", b"before")
    caplog.set_level(logging.WARNING, logger="feedmesh.bus")
    server.stop()
    during = asyncio.create_task(bus.publish("articles", b"during"))
    await eventually(lambda: "unreachable" in caplog.text, timeout=10.0)
    assert not during.done()
    server.start()
    await asyncio.wait_for(during, 30.0)
    await eventually(lambda: "is back after" in caplog.text, timeout=10.0)
    got = []
    while (delivery := await consumer.get(1.0)) is not None:
        got.append(delivery.data)
        await delivery.ack()
    assert got == [b"before", b"during"]  # once each, in order
    await bus.close()


async def test_publishing_on_through_a_restart_lands_every_message_once(server, caplog):
    """Publishing every few milliseconds while the server stops and starts again: every
    message lands once, in order."""
    bus = await connect(server)
    consumer = await bus.consumer("articles", "filter-0")
    caplog.set_level(logging.WARNING, logger="feedmesh.bus")
    sent: list[int] = []

    async def keep_publishing() -> None:
        for n in range(300):
            await bus.publish("articles", str(n).encode())
            sent.append(n)
            await asyncio.sleep(0.005)

    publisher = asyncio.create_task(keep_publishing())
    await eventually(lambda: len(sent) >= 30)
    server.stop()
    await eventually(lambda: "unreachable" in caplog.text, timeout=10.0)
    server.start()
    await asyncio.wait_for(publisher, 60.0)  # raises what a publish raised
    got = []
    while (delivery := await consumer.get(1.0)) is not None:
        got.append(int(delivery.data))
        await delivery.ack()
    assert got == list(range(300))
    await bus.close()


async def test_a_batch_whose_answers_are_lost_waits_once_and_lands_once(server, monkeypatch):
    """After an outage none of the answers to what was sent before it comes: publish_many
    waits for them all together (not ANSWER_WAIT_S for each in turn, which stalled a crawler's
    commit loop for a minute), then publishes each again the careful way, stored once."""
    monkeypatch.setattr(jetstream, "ANSWER_WAIT_S", 1.0)
    bus = await connect(server)
    consumer = await bus.consumer("articles", "filter-0")
    lost = []

    async def dropped(msg) -> None:  # the server answered; the answer never reaches us
        lost.append(msg.subject)

    bus._on_answer = dropped  # before the first batch subscribes its answer inbox
    batch = [Outgoing("articles", b"m%d" % n, f"m{n}") for n in range(10)]
    started = time.monotonic()
    seqs = await asyncio.wait_for(bus.publish_many(batch), 30.0)
    assert time.monotonic() - started < 5.0  # one wait of 1 s, not ten
    assert len(lost) >= 10 and len(set(seqs)) == 10
    got = []
    while (delivery := await consumer.get(1.0)) is not None:
        got.append(delivery.data)
        await delivery.ack()
    assert got == [b"m%d" % n for n in range(10)]  # the second sending stored nothing twice
    await bus.close()


@pytest.mark.parametrize("answer", [
    nats.js.errors.NoStreamResponseError(),
    nats.js.errors.ServiceUnavailableError(code=503, err_code=0,
                                           description="JetStream system temporarily unavailable"),
])
async def test_a_restarting_jetstreams_answers_are_waited_out(server, caplog, answer):
    """While a server restarts, JetStream may answer a publish with 503, or not at all (no
    responders, which nats-py turns into NoStreamResponseError) before its streams are back: a
    window the real server opens only now and then (it crashed the crawler's loop once in the
    fault test), so here the client is made to give those answers once, on a real server."""
    bus = await connect(server)
    consumer = await bus.consumer("articles", "filter-0")
    caplog.set_level(logging.WARNING, logger="feedmesh.bus")
    real = bus._js.publish
    answers = [answer]

    async def restarting(*args, **kwargs):  # the client's publish
        if answers:
            raise answers.pop()
        return await real(*args, **kwargs)

    bus._js.publish = restarting
    assert await asyncio.wait_for(bus.publish("articles", b"x"), 10.0) >= 1
    assert "unreachable" in caplog.text
    delivery = await consumer.get(5.0)
    assert delivery is not None and delivery.data == b"x"
    await bus.close()


async def test_namespaces_keep_hubs_apart_on_one_server(server):
    one = await connect(server, namespace=f"a{uuid.uuid4().hex[:6]}")
    two = await connect(server, namespace=f"b{uuid.uuid4().hex[:6]}")
    c1 = await one.consumer("articles", "filter-0")
    c2 = await two.consumer("articles", "filter-0")
    await one.publish("articles", b"for one")
    assert (await c1.get(5.0)).data == b"for one"
    assert await c2.get(0.2) is None
    await one.close()
    await two.close()


async def test_bad_names_and_an_absent_server_are_clear_errors(server):
    bus = await connect(server)
    with pytest.raises(BusError, match="subject 'a b'"):
        await bus.publish("a b", b"x")
    with pytest.raises(BusError, match=r"group 'g\.1'"):
        await bus.consumer("s", "g.1")
    await bus.close()
    with pytest.raises(BusError, match=r"cannot reach the NATS server at nats://127\.0\.0\.1:9"):
        await JetStreamBus.connect("nats://127.0.0.1:9", connect_timeout=0.5)
