"""The mesh's one dialect, its one timer structure, its one event loop and its one live driver."""

from __future__ import annotations

from typing import Any

from feedmesh.clock import ManualClock
from feedmesh.mesh.feedex import FeedExNode
from feedmesh.mesh.overlay import PastryNode, ScribeNode
from feedmesh.mesh.overlay.ids import Handle
from feedmesh.mesh.sansio import DeliveringNode, EventLoop, MeshNode, Timers
from feedmesh.mesh.transport.driver import NodeDriver
from feedmesh.mesh.transport.wheel import ClockWheel
from tests.eventually import eventually


def test_timers_fire_in_time_order_ties_in_the_order_set():
    timers = Timers()
    timers.add(2.0, "b")
    timers.add(1.0, "a")
    timers.add(2.0, "c")
    timers.add(2.0, "b")   # add: the same token twice fires twice
    assert timers.next_deadline() == 1.0
    assert timers.due(0.5) == []
    assert timers.due(2.0) == ["a", "b", "c", "b"]
    assert timers.next_deadline() is None and timers.pop_due(9.0) is None


def test_a_set_token_has_one_deadline_and_a_replaced_one_never_surfaces():
    timers = Timers()
    timers.set(5.0, "flush")
    timers.set(9.0, "flush")        # replaces the 5.0
    timers.set(3.0, ("query", b"q"))
    timers.cancel(("query", b"q"))
    assert timers.at("flush") == 9.0 and timers.at(("query", b"q")) is None
    assert timers.next_deadline() == 9.0    # neither the replaced 5.0 nor the cancelled 3.0
    assert timers.due(8.0) == []
    assert timers.due(9.0) == ["flush"] and timers.at("flush") is None


def test_the_event_loop_runs_events_in_order_and_keeps_one_wake_up_per_node():
    loop = EventLoop()
    seen: list[tuple[float, Any]] = []
    loop.at(2.0, lambda t, a, b, c, d: seen.append((t, a)), "second")
    loop.at(1.0, lambda t, a, b, c, d: seen.append((t, a)), "first")
    loop.at(2.0, lambda t, a, b, c, d: seen.append((t, a)), "third")   # a tie: in order
    fired: list[tuple[float, str]] = []
    loop.wake("n", 1.5, lambda t, key: fired.append((t, key)))
    loop.wake("n", 1.2, lambda t, key: fired.append((t, key)))   # earlier: replaces 1.5
    loop.wake("n", 1.8, lambda t, key: fired.append((t, key)))   # later: one is pending
    loop.run_until(2.0, inclusive=False)
    assert seen == [(1.0, "first")] and fired == [(1.2, "n")]
    loop.run_until(2.0)
    assert seen == [(1.0, "first"), (2.0, "second"), (2.0, "third")]
    # 3 events and 2 wake-ups run (the replaced 1.5 comes and is skipped; 1.8 never queued)
    assert fired == [(1.2, "n")] and loop.now == 2.0 and loop.events == 5


def test_every_node_kind_is_a_node_of_the_dialect():
    handle = Handle(1, ("127.0.4.1", 1))
    for node in (PastryNode(handle), ScribeNode(handle), FeedExNode(("127.0.8.1", 8400))):
        assert isinstance(node, MeshNode), node
    assert isinstance(ScribeNode(handle), DeliveringNode)
    assert isinstance(FeedExNode(("127.0.8.1", 8400)), DeliveringNode)


class _Echo:
    """A node of the dialect: answers each message, and fires a tick every second."""

    def __init__(self) -> None:
        self.out: list[tuple[str, Any]] = []
        self.delivered: list[Any] = []
        self.next = 1.0
        self.fired: list[float] = []

    def receive(self, now: float, sender: str, message: Any) -> None:
        self.out.append((sender, ("echo", message)))
        self.delivered.append(message)

    def fire(self, now: float) -> None:
        self.fired.append(now)
        self.next = now + 1.0
        self.out.append(("tick", now))

    def next_deadline(self) -> float | None:
        return self.next

    def take(self) -> list[tuple[str, Any]]:
        out, self.out = self.out, []
        return out

    def take_deliveries(self) -> list[Any]:
        out, self.delivered = self.delivered, []
        return out


async def test_the_driver_sends_delivers_and_fires_on_a_clock_wheel():
    clock = ManualClock(0.0)
    wheel = ClockWheel(clock)
    node = _Echo()
    sent: list[tuple[str, Any]] = []
    delivered: list[Any] = []
    driver = NodeDriver(node, wheel, lambda to, m: sent.append((to, m)), delivered.append)
    try:
        driver.receive("a", "hello")
        assert sent == [("a", ("echo", "hello"))] and delivered == ["hello"]
        await eventually(lambda: len(node.fired) >= 3)
        assert node.fired[:3] == [1.0, 2.0, 3.0]    # on the injected clock, each at its time
        assert ("tick", 1.0) in sent
        driver.close()
        fired = len(node.fired)
        driver.receive("b", "late")
        assert ("b", ("echo", "late")) not in sent and len(node.fired) == fired
    finally:
        await wheel.close()


async def test_a_clock_wheel_runs_the_other_callbacks_when_one_fails():
    clock = ManualClock(0.0)
    wheel = ClockWheel(clock)
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("a node's bug")

    try:
        wheel.call_at(1.0, broken)
        wheel.call_at(1.0, ran.append, "after")
        await eventually(lambda: ran == ["after"])
    finally:
        await wheel.close()
    assert wheel.pending() == 0
