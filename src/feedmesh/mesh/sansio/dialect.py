"""What a mesh node is to whoever drives it: a socket transport or the simulator.

``A`` is how the node names a peer (an overlay :class:`~feedmesh.mesh.overlay.Handle`, a FeedEx
``(host, port)``), ``M`` a message. Every input returns nothing; every output waits in the node
until the driver takes it, so the driver decides when and how it leaves (a datagram after the
link's latency, a POST on a kept-alive connection, a simulated delivery).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ["DIALECT", "DeliveringNode", "MeshNode"]

A = TypeVar("A")
M = TypeVar("M")

DIALECT = ("receive", "fire", "next_deadline", "take")
"""The four methods of the dialect (tests/test_architecture.py holds every node class to them)."""


@runtime_checkable
class MeshNode(Protocol[A, M]):
    """A sans-IO protocol node."""

    def receive(self, now: float, sender: A, message: M) -> None:
        """``message`` came from ``sender`` (as the transport knows it, never as claimed)."""

    def fire(self, now: float) -> None:
        """Run what is due: the driver calls this once ``now >= next_deadline()``."""

    def next_deadline(self) -> float | None:
        """When :meth:`fire` wants to run next; None: nothing is pending."""

    def take(self) -> list[tuple[A, M]]:
        """The messages to send since the last call, ``(destination, message)``, in order."""


@runtime_checkable
class DeliveringNode(MeshNode[A, M], Protocol):
    """A node that also hands things to its own side (records, entries, query results)."""

    def take_deliveries(self) -> list[Any]:
        """What the node delivered since the last call, in order."""
