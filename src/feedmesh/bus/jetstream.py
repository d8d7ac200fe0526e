"""The distributed deployment's :class:`~.ports.Bus`: NATS JetStream, through nats-py.

How the port maps onto JetStream:

* each bus subject (``articles``, ``control``, ``matches.3``) is one stream, ``{ns}_{subject}``
  capturing the NATS subject ``{ns}.{subject}``, so the stream's sequence number *is* the
  subject's ``seq``. The namespace ``ns`` lets several hubs share one server;
* streams keep messages on disk with *interest* retention: a message stays until every group
  (durable consumer) has acknowledged it, and a message published before any group exists is
  not kept (as the in-process bus drops it). So "every group acked every message up to ``seq``"
  is exactly "the stream's first sequence is past ``seq``", which :meth:`wait_acked` asks;
* a group is a durable pull consumer named after it (explicit acks, new messages from its
  creation on); members of a group pull from the same durable, which shares the work;
* backpressure: a stream is bounded in bytes with *discard new*, so a publisher whose message
  does not fit is refused by the server and waits here, retrying, until the slowest group has
  acknowledged enough: the in-process bus's byte-bounded buffer, across processes. Each group's
  unacknowledged deliveries are bounded too (``max_ack_pending``);
* a publish carries ``Nats-Msg-Id`` so the server's duplicate window drops a repeat. A publish
  without the caller's ``msg_id`` still gets one of ours, so retrying it after a lost answer
  (the server down, a timeout) cannot store it twice;
* a delivery neither acked nor nakked within ``ack_wait_s`` is delivered again (the worker
  died): the redelivery count is JetStream's ``num_delivered - 1``.

While the server is unreachable, publishing and consuming wait (one log line when it goes, one
when it is back) rather than fail: nats-py reconnects by itself, and JetStream kept the streams.
A server that *refuses* (credentials it does not know, a subject these credentials may not
use: bus/nats_auth.py) is not waited for: that is a :class:`BusError` saying what was refused.

Several servers (a cluster's, their URLs separated by commas) are one bus: the client is
connected to one of them and moves to another when it goes; streams made with ``replicas=3``
live on three servers, so one of them killed loses nothing and the stream's leader moves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import api

from feedmesh.bus.nats_link import Denials, dial, server_urls
from feedmesh.bus.ports import (
    BusClosedError,
    BusError,
    Consumer,
    Delivery,
    Outgoing,
    Parked,
    reason_line,
)

__all__ = ["JetStreamBus"]

log = logging.getLogger("feedmesh.bus")

_SUBJECT = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")
_OWN_ID = "Feedmesh-Own-Id"  # header: the Nats-Msg-Id is ours, not the publisher's
_STREAM_FULL = {10077, 10078}  # maximum bytes / messages exceeded
ANSWER_WAIT_S = 5.0
"""How long :meth:`JetStreamBus.publish_many` waits for the server's answers to a batch, all
together; what is still unanswered then is published again the careful way."""
_UNREACHABLE = (nats.errors.TimeoutError, nats.errors.NoRespondersError,
                nats.errors.ConnectionReconnectingError, nats.errors.OutboundBufferLimitError,
                nats.errors.StaleConnectionError, nats.errors.ConnectionClosedError,
                # JetStream answers 503 while the server starts or stops
                nats.js.errors.ServiceUnavailableError,
                # a publish nobody answered (no responders) while JetStream restarts: the
                # streams are made before anything is published to them, so not a missing one
                nats.js.errors.NoStreamResponseError,
                asyncio.TimeoutError, ConnectionError)


class _JetStreamDelivery:
    __slots__ = ("_msg", "_own_id", "_settled", "redeliveries", "seq", "subject")

    def __init__(self, subject: str, msg: Msg) -> None:
        meta = msg.metadata
        self._msg = msg
        self._settled = False
        self._own_id = bool(msg.headers and msg.headers.get(_OWN_ID))
        self.subject = subject
        self.seq = meta.sequence.stream
        self.redeliveries = max(0, meta.num_delivered - 1)

    @property
    def data(self) -> bytes:
        return self._msg.data

    @property
    def msg_id(self) -> str | None:
        if self._own_id or not self._msg.headers:
            return None
        return self._msg.headers.get("Nats-Msg-Id")

    @property
    def size(self) -> int:
        return len(self._msg.data)

    @property
    def settled(self) -> bool:
        return self._settled

    async def ack_async(self) -> None:
        """Acknowledge without waiting for the server's answer (see ``ack_many``)."""
        if self._settled:
            return
        self._settled = True
        with contextlib.suppress(*_UNREACHABLE):
            await self._msg.ack()

    async def ack(self) -> None:
        if self._settled:
            return
        self._settled = True
        # A lost ack only means one more delivery, which the tiers' keyed writes absorb.
        with contextlib.suppress(*_UNREACHABLE):
            await self._msg.ack_sync(timeout=5.0)

    async def nak(self, delay_s: float = 0.0) -> None:
        if self._settled:
            return
        self._settled = True
        with contextlib.suppress(*_UNREACHABLE):
            await self._msg.nak(delay=delay_s if delay_s > 0 else None)


class _JetStreamConsumer:
    """One member of a durable group: pulls small batches and hands them out one at a time."""

    def __init__(self, bus: JetStreamBus, subject: str, group: str, sub: Any) -> None:
        self._bus = bus
        self._subject = subject
        self._group = group
        self._sub = sub
        self._ready: deque[Msg] = deque()
        self._closed = False

    @property
    def subject(self) -> str:
        return self._subject

    @property
    def group(self) -> str:
        return self._group

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Delivery]:
        while True:
            delivery = await self.get(None)
            if delivery is None:
                return
            yield delivery

    async def get(self, timeout: float | None = None) -> Delivery | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ready:
            if self._closed or self._bus.closed:
                return None
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return None
            asked = time.monotonic()
            try:
                # Ask for up to `batch` messages; the server answers with what it has at once
                # and otherwise holds the request until one arrives or it expires.
                msgs = await self._sub.fetch(self._bus.batch, timeout=max(0.01, min(left, 1.0)))
            except TimeoutError:  # nothing came in time (nats' and asyncio's alike); an outage
                self._bus.check_refused(asked, f"consuming {self._subject} as {self._group}")
                continue          # is noticed by the connection's own callbacks
            except _UNREACHABLE as error:
                if self._closed or self._bus.closed:
                    return None
                self._bus.note_unreachable(f"consuming {self._subject} as {self._group}", error)
                await asyncio.sleep(0.2)
                continue
            self._bus.note_reachable()
            self._ready.extend(msgs)
        return _JetStreamDelivery(self._subject, self._ready.popleft())

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Fetched but not handed out: let another member have them now rather than after
        # the ack wait.
        for msg in self._ready:
            with contextlib.suppress(*_UNREACHABLE):
                await msg.nak()
        self._ready.clear()
        with contextlib.suppress(*_UNREACHABLE, nats.errors.BadSubscriptionError):
            await self._sub.unsubscribe()


class JetStreamBus:
    """The Bus port on a NATS JetStream server at ``url``.

    Constructing it connects nothing (the composition root builds it before the event loop
    runs); the first use connects, waiting up to ``connect_timeout`` seconds for the server.
    :meth:`connect` constructs and connects at once.

    ``url`` names one server, or several (a cluster's) separated by commas.
    ``capacity_bytes`` bounds each subject's stream (the slowest group's unacknowledged
    messages); ``duplicate_window_s`` is how long a ``msg_id`` is remembered; ``ack_wait_s``
    how long a delivery may stay unsettled before it goes to another member.
    ``credentials``: the path of this role's nkey seed file (0600; bus/nats_auth.py), for a
    server that asks for one. ``replicas``: how many servers of a cluster hold each stream
    this bus creates (3 on a three-node cluster; 1 on a lone server).
    """

    def __init__(self, url: str, *, namespace: str = "feedmesh",
                 capacity_bytes: int = 64 * 1024 * 1024, duplicate_window_s: float = 600.0,
                 ack_wait_s: float = 30.0, max_ack_pending: int = 1000, batch: int = 32,
                 name: str = "feedmesh", connect_timeout: float = 30.0,
                 parked_bytes: int = 64 * 1024 * 1024,
                 parked_age_s: float = 14 * 86400.0, credentials: str | Path | None = None,
                 replicas: int = 1) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", namespace):
            raise BusError(f"bus namespace {namespace!r}: use letters, digits, '-' and '_'")
        if not 1 <= replicas <= 5:
            raise BusError(f"bus replicas {replicas}: JetStream keeps 1 to 5 copies of a stream")
        self.url = url
        self.urls = server_urls(url)
        self.credentials = credentials
        self.replicas = replicas
        self._denials = Denials()
        self.namespace = namespace
        self.capacity_bytes = capacity_bytes
        self.duplicate_window_s = duplicate_window_s
        self.ack_wait_s = ack_wait_s
        self.max_ack_pending = max_ack_pending
        self.batch = batch
        self.name = name
        self.connect_timeout = connect_timeout
        self.parked_bytes = parked_bytes
        self.parked_age_s = parked_age_s
        self.closed = False
        self._nc: Any = None
        self._js: Any = None
        self._opening: asyncio.Lock | None = None
        self._streams: set[str] = set()
        """The hub's streams known to exist (those :meth:`depths` watches)."""
        self._parked_ready = False
        self._consumers: list[_JetStreamConsumer] = []
        self._depths: dict[str, tuple[int, int]] = {}
        self._depth_task: asyncio.Task[None] | None = None
        self._unreachable_since: float | None = None
        self._waiting = 0
        self._answers: dict[str, asyncio.Future[int | None]] = {}
        self._answer_prefix: str | None = None
        self._answer_count = 0

    @classmethod
    async def connect(cls, url: str, **options: Any) -> JetStreamBus:
        """A bus connected to the server at ``url`` (options as the constructor's)."""
        bus = cls(url, **options)
        await bus.open()
        return bus

    async def open(self) -> None:
        """Connect, unless connected: waits up to ``connect_timeout`` for the server."""
        if self._nc is not None:
            return
        if self.closed:
            raise BusClosedError(f"bus closed: cannot connect to {self.url}")
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._nc is None:
                self._nc = await self._dial()
                self._js = self._nc.jetstream()

    async def _dial(self) -> Any:
        async def disconnected() -> None:
            self.note_unreachable("the connection", ConnectionError("disconnected"))

        async def reconnected() -> None:
            self.note_reachable()

        return await dial(self.urls, name=self.name, credentials=self.credentials,
                          timeout=self.connect_timeout, denials=self._denials,
                          disconnected=disconnected, reconnected=reconnected)

    def check_refused(self, since: float, doing: str, subject: str | None = None) -> None:
        """Raise BusError when the server refused ``subject`` (ever), or any subject since
        ``since`` (monotonic): an unanswered request that was refused, not an outage."""
        refused = subject if subject is not None and self._denials.refused(subject) else \
            self._denials.since(since)
        if refused is not None:
            whose = f"the credentials in {self.credentials}" if self.credentials else \
                "a client without credentials"
            raise BusError(f"bus: the NATS server refused {doing}: {whose} may not use "
                           f"{refused}")

    # -- health ----------------------------------------------------------------------------

    def note_unreachable(self, doing: str, error: BaseException) -> None:
        if self._unreachable_since is None and not self.closed:
            self._unreachable_since = time.monotonic()
            log.warning("bus: NATS server at %s unreachable while %s (%s); waiting for it",
                        self.url, doing, type(error).__name__)

    def note_reachable(self) -> None:
        # A message fetched just before the connection dropped is not the server being back.
        if self._nc is not None and not self._nc.is_connected:
            return
        if self._unreachable_since is not None:
            gone = time.monotonic() - self._unreachable_since
            self._unreachable_since = None
            log.warning("bus: NATS server at %s is back after %.1f s", self.url, gone)

    # -- names -----------------------------------------------------------------------------

    def _names(self, subject: str) -> tuple[str, str]:
        if not _SUBJECT.fullmatch(subject):
            raise BusError(f"bus subject {subject!r}: use dot-separated tokens of letters, "
                           "digits, '-' and '_'")
        return f"{self.namespace}.{subject}", f"{self.namespace}_{subject.replace('.', '_')}"

    async def _call(self, doing: str, call: Any) -> Any:
        """Run a JetStream API call, waiting out an unreachable server (not a refusal)."""
        while True:
            if self.closed:
                raise BusClosedError(f"bus closed while {doing}")
            asked = time.monotonic()
            try:
                result = await call()
            except _UNREACHABLE as error:
                self.check_refused(asked, doing)
                self.note_unreachable(doing, error)
                await asyncio.sleep(0.25)
                continue
            self.note_reachable()
            return result

    async def _ensure(self, config: api.StreamConfig, *, create: bool = True) -> bool:
        """Whether the stream ``config.name`` exists, made from ``config`` when missing (unless
        not ``create``)."""
        await self.open()

        async def find_or_add() -> bool:
            try:
                await self._js.stream_info(config.name)
            except nats.js.errors.NotFoundError:
                if not create:
                    return False
                await self._js.add_stream(config)
            return True

        return await self._call(f"opening stream {config.name}", find_or_add)

    async def _stream(self, subject: str, *, create: bool = True) -> str | None:
        nats_subject, stream = self._names(subject)
        if stream in self._streams:
            return stream
        if not await self._ensure(api.StreamConfig(
                name=stream, subjects=[nats_subject], retention=api.RetentionPolicy.INTEREST,
                discard=api.DiscardPolicy.NEW, storage=api.StorageType.FILE,
                max_bytes=self.capacity_bytes, duplicate_window=self.duplicate_window_s,
                num_replicas=self.replicas),
                create=create):
            return None
        self._streams.add(stream)
        return stream

    # -- the port --------------------------------------------------------------------------

    async def _target(self, subject: str, data: bytes) -> tuple[str, str]:
        """The NATS subject and stream of a publish of ``data`` to ``subject``, once checked."""
        if self.closed:
            raise BusClosedError(f"bus closed: cannot publish to {subject}")
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"the bus carries bytes, not {type(data).__name__}")
        if len(data) > self.capacity_bytes:
            raise BusError(f"a message of {len(data)} bytes to {subject} exceeds the bus's "
                           f"buffer of {self.capacity_bytes} bytes per subject")
        nats_subject, _ = self._names(subject)
        stream = await self._stream(subject)
        assert stream is not None
        return nats_subject, stream

    @staticmethod
    def _headers(msg_id: str | None) -> dict[str, str]:
        return {"Nats-Msg-Id": msg_id} if msg_id is not None else {
            "Nats-Msg-Id": uuid.uuid4().hex, _OWN_ID: "1"}

    async def publish(self, subject: str, data: bytes, *, msg_id: str | None = None) -> int:
        nats_subject, stream = await self._target(subject, data)
        return await self._publish_one(subject, nats_subject, stream, data,
                                       self._headers(msg_id))

    async def _publish_one(self, subject: str, nats_subject: str, stream: str, data: bytes,
                           headers: dict[str, str]) -> int:
        """Publish and wait for the server's answer, waiting out a full stream or an
        unreachable server (the ``Nats-Msg-Id`` in ``headers`` makes retrying safe)."""
        pause = 0.002
        waiting = False
        try:
            while True:
                if self.closed:
                    raise BusClosedError(f"bus closed while publishing to {subject}")
                asked = time.monotonic()
                self.check_refused(asked, f"publishing to {subject}", nats_subject)
                try:
                    ack = await self._js.publish(nats_subject, bytes(data), stream=stream,
                                                 headers=dict(headers), timeout=5.0)
                except nats.js.errors.APIError as error:
                    if error.err_code not in _STREAM_FULL:
                        if isinstance(error, nats.js.errors.ServiceUnavailableError):
                            # a 503 that is not a full stream: JetStream restarting
                            self.note_unreachable(f"publishing to {subject}", error)
                            await asyncio.sleep(0.25)
                            continue
                        raise BusError(f"bus: publishing to {subject} refused by NATS: "
                                       f"{error.description} (code {error.err_code})") from error
                    # The slowest group has not acknowledged enough: wait for room.
                    if not waiting:
                        waiting = True
                        self._waiting += 1
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 0.1)
                    continue
                except _UNREACHABLE as error:
                    self.check_refused(asked, f"publishing to {subject}", nats_subject)
                    self.note_unreachable(f"publishing to {subject}", error)
                    await asyncio.sleep(0.25)
                    continue
                self.note_reachable()
                return int(ack.seq)
        finally:
            if waiting:
                self._waiting -= 1

    async def publish_many(self, messages: Sequence[Outgoing]) -> list[int]:
        """Every message is sent at once, each with a reply subject of ours, then the server's
        answers are collected (no round trip each); a message refused or unanswered (a full
        stream, the server gone) is published again the careful way, as :meth:`publish` does,
        under the same ``Nats-Msg-Id``, so it is never stored twice. (Not nats-py's
        ``publish_async``: its futures never resolve when the server refuses a message.)"""
        targets = [(subject, *await self._target(subject, data), data, self._headers(msg_id))
                   for subject, data, msg_id in messages]
        if not targets:
            return []
        prefix = await self._answer_inbox()
        loop = asyncio.get_running_loop()
        answers: list[tuple[str, asyncio.Future[int | None]] | None] = []
        try:
            for _, nats_subject, stream, data, headers in targets:
                self._answer_count += 1
                reply = f"{prefix}.{self._answer_count}"
                answer: asyncio.Future[int | None] = loop.create_future()
                self._answers[reply] = answer
                try:
                    await self._nc.publish(nats_subject, bytes(data), reply=reply,
                                           headers={**headers, "Nats-Expected-Stream": stream})
                except _UNREACHABLE:
                    answers.append(None)
                else:
                    answers.append((reply, answer))
            seqs = []
            # One deadline for all the answers: after an outage none of those sent before it
            # comes, and waiting for each in turn would stall the publisher 5 s a message.
            deadline = loop.time() + ANSWER_WAIT_S
            for (subject, nats_subject, stream, data, headers), sent in zip(targets, answers,
                                                                           strict=True):
                seq = None
                if sent is not None:
                    if sent[1].done():
                        seq = sent[1].result()
                    elif (left := deadline - loop.time()) > 0:
                        with contextlib.suppress(TimeoutError):
                            seq = await asyncio.wait_for(asyncio.shield(sent[1]), left)
                if seq is not None:
                    self.note_reachable()
                    seqs.append(seq)
                else:
                    seqs.append(await self._publish_one(subject, nats_subject, stream, data,
                                                        headers))
            return seqs
        finally:
            for sent in answers:
                if sent is not None:
                    self._answers.pop(sent[0], None)

    async def _answer_inbox(self) -> str:
        """The subject prefix under which the server answers :meth:`publish_many` (subscribed
        once; nats-py subscribes again after a reconnection)."""
        if self._answer_prefix is None:
            await self.open()
            prefix = self._nc.new_inbox()
            await self._nc.subscribe(f"{prefix}.*", cb=self._on_answer)
            self._answer_prefix = prefix
        return self._answer_prefix

    async def _on_answer(self, msg: Msg) -> None:
        answer = self._answers.pop(msg.subject, None)
        if answer is None or answer.done():
            return
        try:
            reply = json.loads(msg.data) if msg.data else {}
        except ValueError:
            reply = {}
        # An error, no responders (a status header, no body) or anything unexpected: None,
        # and the message is published again the careful way.
        seq = reply.get("seq") if isinstance(reply, dict) and "error" not in reply else None
        answer.set_result(int(seq) if isinstance(seq, int) else None)

    async def ack_many(self, deliveries: Sequence[Delivery]) -> None:
        """All but the last acknowledgement are sent without waiting; the last waits for the
        server's answer, which comes after it processed those sent before it on this
        connection. A lost acknowledgement only means one more delivery."""
        pending = [d for d in deliveries
                   if isinstance(d, _JetStreamDelivery) and not d.settled]
        for delivery in pending[:-1]:
            await delivery.ack_async()
        if pending:
            await pending[-1].ack()

    async def consumer(self, subject: str, group: str) -> Consumer:
        if self.closed:
            raise BusClosedError(f"bus closed: cannot consume {subject}")
        if not re.fullmatch(r"[A-Za-z0-9_-]+", group):
            raise BusError(f"bus group {group!r}: use letters, digits, '-' and '_'")
        nats_subject, _ = self._names(subject)
        stream = await self._stream(subject)
        config = self._group_config(nats_subject, group)

        async def subscribe() -> Any:
            return await self._js.pull_subscribe(nats_subject, durable=group, stream=stream,
                                                 config=config)

        sub = await self._call(f"joining group {group} of {subject}", subscribe)
        member = _JetStreamConsumer(self, subject, group, sub)
        self._consumers.append(member)
        if self._depth_task is None:
            self._depth_task = asyncio.get_running_loop().create_task(self._watch_depths())
        return member

    def _group_config(self, nats_subject: str, group: str) -> api.ConsumerConfig:
        return api.ConsumerConfig(
            durable_name=group, deliver_policy=api.DeliverPolicy.NEW,
            ack_policy=api.AckPolicy.EXPLICIT, ack_wait=self.ack_wait_s,
            max_ack_pending=self.max_ack_pending, filter_subject=nats_subject)

    async def prepare(self, subjects: Sequence[str],
                      groups: Sequence[tuple[str, str]] = ()) -> None:
        """Set-up, with the admin's credentials: make the streams of ``subjects`` and the
        parked stream, and the durable ``groups`` ((subject, group) pairs) that are missing,
        so that roles allowed only to find them (bus/nats_auth.py) find them."""
        for subject in {*subjects, *(s for s, _ in groups)}:
            await self._stream(subject)
        await self._parked_stream()
        for subject, group in groups:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", group):
                raise BusError(f"bus group {group!r}: use letters, digits, '-' and '_'")
            nats_subject, stream = self._names(subject)

            async def make(stream: str = stream, nats_subject: str = nats_subject,
                           group: str = group) -> None:
                try:
                    await self._js.consumer_info(stream, group)
                except nats.js.errors.NotFoundError:
                    await self._js.add_consumer(stream, self._group_config(nats_subject, group))

            await self._call(f"making group {group} of {subject}", make)

    async def drop_group(self, subject: str, group: str) -> bool:
        stream = await self._stream(subject, create=False)
        if stream is None:
            return False

        async def delete() -> bool:
            try:
                return bool(await self._js.delete_consumer(stream, group))
            except nats.js.errors.NotFoundError:
                return False

        return await self._call(f"deleting group {group} of {subject}", delete)

    async def last_seq(self, subject: str) -> int:
        stream = await self._stream(subject, create=False)
        if stream is None:
            return 0
        info = await self._call(f"reading stream {stream}", lambda: self._js.stream_info(stream))
        return int(info.state.last_seq)

    async def wait_acked(self, subject: str, seq: int, *, timeout: float) -> bool:
        stream = await self._stream(subject, create=False)
        if stream is None:
            return True
        deadline = time.monotonic() + timeout
        pause = 0.002
        while True:
            # Interest retention: a message is removed once every group acknowledged it, and
            # the stream's first sequence is the oldest message some group still holds.
            try:
                info = await self._js.stream_info(stream)
            except _UNREACHABLE as error:
                self.note_unreachable(f"reading stream {stream}", error)
            else:
                if info.state.first_seq > seq or info.state.messages == 0:
                    return True
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                return False
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, 0.05)

    async def _parked_stream(self) -> str:
        stream = f"{self.namespace}__parked"
        if not self._parked_ready:
            # Not the hub's flow: kept for an operator, by age and size, read by nobody.
            await self._ensure(api.StreamConfig(
                name=stream, subjects=[f"{self.namespace}._parked"],
                retention=api.RetentionPolicy.LIMITS, discard=api.DiscardPolicy.OLD,
                storage=api.StorageType.FILE, max_bytes=self.parked_bytes,
                max_age=self.parked_age_s, num_replicas=self.replicas))
            self._parked_ready = True
        return stream

    async def park(self, delivery: Delivery, group: str, reason: str) -> None:
        stream = await self._parked_stream()
        headers = {"Feedmesh-Subject": delivery.subject, "Feedmesh-Seq": str(delivery.seq),
                   "Feedmesh-Group": group, "Feedmesh-Reason": reason_line(reason),
                   "Feedmesh-Parked-At": repr(time.time()),
                   # parked at most once, whoever parks it again
                   "Nats-Msg-Id": f"parked.{delivery.subject}.{delivery.seq}.{group}"}

        async def keep() -> None:
            await self._js.publish(f"{self.namespace}._parked", bytes(delivery.data),
                                   stream=stream, headers=headers, timeout=5.0)

        await self._call(f"parking {delivery.subject} #{delivery.seq}", keep)
        await delivery.ack()

    async def parked(self, limit: int = 100) -> list[Parked]:
        stream = await self._parked_stream()
        info = await self._call(f"reading stream {stream}", lambda: self._js.stream_info(stream))
        found: list[Parked] = []
        seq = info.state.last_seq
        while seq >= max(1, info.state.first_seq) and len(found) < limit:
            try:
                msg = await self._js.get_msg(stream, seq)
            except nats.js.errors.NotFoundError:
                seq -= 1
                continue
            h = msg.headers or {}
            found.append(Parked(subject=h.get("Feedmesh-Subject", ""),
                                seq=int(h.get("Feedmesh-Seq", "0")),
                                group=h.get("Feedmesh-Group", ""),
                                reason=h.get("Feedmesh-Reason", ""), data=msg.data or b"",
                                parked_at=float(h.get("Feedmesh-Parked-At", "0"))))
            seq -= 1
        return found

    def depths(self) -> dict[str, tuple[int, int]]:
        """Refreshed every half second in the background: for metrics only. Bytes are the
        group's share of its stream's stored bytes (messages x the stream's mean size)."""
        return dict(self._depths)

    def waiting_publishers(self) -> int:
        """Publishers in this process waiting for room in a stream (backpressure at work)."""
        return self._waiting

    async def refresh_depths(self) -> None:
        """Read every known stream's groups' depths now (what the background loop does)."""
        with contextlib.suppress(*_UNREACHABLE, nats.js.errors.APIError):
            await self.open()
            depths: dict[str, tuple[int, int]] = {}
            for stream in list(self._streams):
                groups = await self._js.consumers_info(stream)
                info = await self._js.stream_info(stream)
                mean = info.state.bytes / info.state.messages if info.state.messages else 0
                subject = info.config.subjects[0][len(self.namespace) + 1:]
                for group in groups:
                    held = int(group.num_pending or 0) + int(group.num_ack_pending or 0)
                    depths[f"{subject}/{group.name}"] = (held, round(held * mean))
            self._depths = depths

    async def _watch_depths(self) -> None:
        while not self.closed:
            await self.refresh_depths()
            await asyncio.sleep(0.5)

    async def close(self) -> None:
        if self.closed:
            return
        for member in list(self._consumers):
            await member.close()
        self.closed = True
        if self._depth_task is not None:
            self._depth_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._depth_task
        if self._nc is not None:
            with contextlib.suppress(*_UNREACHABLE):
                await self._nc.close()
