"""The Bus port: subjects, durable consumer groups, acknowledgements.

The semantics are NATS JetStream's, so that a JetStream implementation plugs in beside the
in-process one (:mod:`.memory`) without touching the tiers:

* a message is bytes published to a *subject*; the bus numbers each subject's messages
  (``seq``: 1, 2, 3, ... in publish order) and :meth:`Bus.publish` returns the number;
* a *group* is a durable consumer of one subject, named by its owner (``filter-0``); every group
  receives every message published after it was created (fan-out between groups, e.g. one per
  filter shard), and within a group each message goes to one member (work sharing);
* a consumer settles each delivery: :meth:`Delivery.ack` when the work it asked for is durably
  done, :meth:`Delivery.nak` to have it delivered again (``redeliveries`` counts how often it
  was). A delivery neither acked nor nakked holds its place (and, in the in-process bus, its bytes
  of buffer) until it is: JetStream redelivers it after its ack wait when a worker died;
* :meth:`Bus.publish_many` and :meth:`Bus.ack_many` do what publish and ack do, for many
  messages at once: a networked bus sends them together and waits for one answer, not one each;
* a publish carrying a ``msg_id`` already published within the bus's duplicate window is not
  delivered again (JetStream's ``Nats-Msg-Id``): the answer is the first one's ``seq``;
* :meth:`Bus.wait_acked` tells a publisher that every group of a subject has acknowledged every
  message up to a ``seq`` (JetStream: each consumer's ack floor). That is how the web layer knows a
  subscription change was *applied* by every tier before it answers a person, without polling
  queue depths.

* a message no member can process (a *poison* message: bytes that are not a message, or work
  that failed every attempt) is *parked* (:meth:`Bus.park`): kept aside for an operator, with
  who parked it and why, and settled, so it never blocks the group again. :meth:`Bus.parked`
  lists the newest.

Queue depths (:meth:`Bus.depths`) are for metrics only; no decision may rest on them.

What is delivered is bytes: the tiers encode and decode their own typed messages
(:mod:`feedmesh.hub.messages`), so every bus exercises the same encoding.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from feedmesh.errors import FeedmeshError

__all__ = ["Bus", "BusClosedError", "BusError", "Consumer", "Delivery", "Outgoing", "Parked"]


class BusError(FeedmeshError):
    """A bus operation failed (the message says which and why)."""


class BusClosedError(BusError):
    """The bus was closed: nothing more can be published."""


@dataclass(frozen=True, slots=True)
class Parked:
    """A message kept aside because no member could process it."""

    subject: str
    seq: int
    group: str
    """Who parked it (a tier's group name)."""
    reason: str
    data: bytes
    parked_at: float
    """Unix seconds."""


class Outgoing(NamedTuple):
    """One message of :meth:`Bus.publish_many`: what :meth:`Bus.publish` takes."""

    subject: str
    data: bytes
    msg_id: str | None = None


def reason_line(reason: str) -> str:
    """A parking reason as kept: one line of at most 500 characters."""
    return " ".join(reason.split())[:500] or "-"


class Delivery(Protocol):
    """One delivery of one message to one member of a group."""

    @property
    def subject(self) -> str: ...

    @property
    def data(self) -> bytes: ...

    @property
    def seq(self) -> int:
        """The message's number in its subject: its durable identity."""
        ...

    @property
    def msg_id(self) -> str | None:
        """The publisher's de-duplication id, if it gave one."""
        ...

    @property
    def redeliveries(self) -> int:
        """How many times this message was delivered to this group before (0: first time)."""
        ...

    @property
    def size(self) -> int:
        """Bytes of the message (what the group's buffer accounts)."""
        ...

    async def ack(self) -> None:
        """The work is durably done: never deliver this message to this group again."""
        ...

    async def nak(self, delay_s: float = 0.0) -> None:
        """Not done: deliver it again (to any member of the group) after ``delay_s``."""
        ...


class Consumer(Protocol):
    """A member of a durable group."""

    @property
    def subject(self) -> str: ...

    @property
    def group(self) -> str:
        """The durable name of the group this member belongs to."""
        ...

    def __aiter__(self) -> AsyncIterator[Delivery]:
        """Deliveries until the consumer or the bus is closed."""
        ...

    async def get(self, timeout: float | None = None) -> Delivery | None:
        """The next delivery; None when ``timeout`` passed or the consumer was closed. Safe to
        time out: nothing is lost or closed (unlike cancelling ``anext`` on the iterator)."""
        ...

    async def close(self) -> None: ...


class Bus(Protocol):
    async def publish(self, subject: str, data: bytes, *, msg_id: str | None = None) -> int:
        """Send ``data`` to every group of ``subject``; return its ``seq``. Waits while a
        group's buffer is full (backpressure)."""
        ...

    async def publish_many(self, messages: Sequence[Outgoing]) -> list[int]:
        """Publish each message as :meth:`publish` does, in order, and return their ``seq`` s;
        when it returns, every one is published. On a networked bus they leave together."""
        ...

    async def ack_many(self, deliveries: Sequence[Delivery]) -> None:
        """Acknowledge each delivery (of this bus; those already settled are skipped). On a
        networked bus the acknowledgements leave together and one answer confirms them all."""
        ...

    async def consumer(self, subject: str, group: str) -> Consumer:
        """A member of ``group`` (created when new) on ``subject``."""
        ...

    async def drop_group(self, subject: str, group: str) -> bool:
        """Delete durable ``group`` of ``subject`` and what it had not acknowledged (a member
        that left for good: the messages kept for it would otherwise fill the subject's
        bounds); its members still running stop receiving. False when there was none."""
        ...

    async def last_seq(self, subject: str) -> int:
        """The ``seq`` of the last message published to ``subject`` (0: none yet)."""
        ...

    async def wait_acked(self, subject: str, seq: int, *, timeout: float) -> bool:
        """Wait until every group of ``subject`` has acknowledged every message up to ``seq``;
        False when ``timeout`` seconds pass first."""
        ...

    async def park(self, delivery: Delivery, group: str, reason: str) -> None:
        """Keep ``delivery``'s message aside (with ``group`` and a one-line ``reason``) and
        settle it: it is never delivered to that group again. Parked messages are bounded (the
        oldest go first) and outlive nothing the bus itself does not."""
        ...

    async def parked(self, limit: int = 100) -> list[Parked]:
        """The newest parked messages, newest first."""
        ...

    def depths(self) -> dict[str, tuple[int, int]]:
        """``"subject/group" -> (messages, bytes)`` delivered or waiting, not yet acknowledged.
        For metrics only."""
        ...

    async def close(self) -> None:
        """Stop: consumers' iterations end, publishers waiting for room return."""
        ...
