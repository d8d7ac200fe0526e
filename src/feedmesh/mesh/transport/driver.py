"""The one live driver loop: a node of the mesh's dialect on a real clock.

It does for one node what the simulator (:class:`~feedmesh.mesh.sansio.EventLoop`) does for many:
after every input (a message received, a local call made through :meth:`NodeDriver.act`) it sends
what ``take()`` returns, hands on what ``take_deliveries()`` returns, and schedules ``fire`` at
``next_deadline()`` on a :class:`~feedmesh.mesh.transport.wheel.Wheel` (the loop's timer wheel for
a UDP endpoint, a wheel on the injected clock for the FeedEx HTTP transport). At most one wake-up
is pending per node; a later, earlier deadline schedules another, and the one it replaced is
ignored when it comes (nothing is cancelled). How a message leaves is the transport's: a datagram
after the link's latency, a POST on a kept-alive connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from feedmesh.mesh.sansio import DeliveringNode
from feedmesh.mesh.transport.wheel import Wheel

__all__ = ["NodeDriver"]

_INF = float("inf")


class NodeDriver:
    """Drives ``node``: ``send(destination, message)`` for each output, ``deliver(item)`` for each
    delivery, wake-ups on ``wheel``."""

    __slots__ = ("_timer_at", "closed", "deliver", "node", "send", "wheel")

    def __init__(self, node: DeliveringNode, wheel: Wheel, send: Callable[[Any, Any], None],
                 deliver: Callable[[Any], None] | None = None) -> None:
        self.node = node
        self.wheel = wheel
        self.send = send
        self.deliver = deliver
        self.closed = False
        self._timer_at = _INF

    def now(self) -> float:
        return self.wheel.now()

    def act(self, call: Callable[[Any, float], Any]) -> Any:
        """Run ``call(node, now)`` and carry out what it produced; its result."""
        result = call(self.node, self.wheel.now())
        self.flush()
        return result

    def receive(self, sender: Any, message: Any) -> None:
        self.node.receive(self.wheel.now(), sender, message)
        self.flush()

    def flush(self, sends: Iterable[tuple[Any, Any]] | None = None) -> None:
        """Send ``sends`` (default: what the node has; a transport that answers one message in a
        response body takes the node's sends itself, keeps the answer, passes the rest), hand on
        the deliveries, schedule the next wake-up."""
        if self.closed:
            return
        node = self.node
        send = self.send
        for destination, message in node.take() if sends is None else sends:
            send(destination, message)
        deliveries = node.take_deliveries()
        if deliveries and self.deliver is not None:
            for item in deliveries:
                self.deliver(item)
        deadline = node.next_deadline()
        if deadline is not None and deadline < self._timer_at:
            self._timer_at = deadline
            self.wheel.call_at(deadline, self._wake, deadline)

    def close(self) -> None:
        """Stop driving: nothing more is sent, fired or handed on."""
        self.closed = True
        self._timer_at = _INF

    def _wake(self, at: float) -> None:
        if at != self._timer_at:
            return                 # an earlier deadline replaced this one, and has run
        self._timer_at = _INF
        if not self.closed:
            self.node.fire(self.wheel.now())
            self.flush()
