"""What Pastry nodes say to each other: frozen records a transport encodes and a simulator passes.

Every message travels with its sender's :class:`~feedmesh.mesh.overlay.ids.Handle` beside it (the
transport's envelope), so bodies do not repeat it. ``Route`` carries an application payload hop by
hop toward the node whose id is numerically closest to ``key``; each hop acknowledges with
``RouteAck`` so a dead next hop is noticed and routed around.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from feedmesh.mesh.overlay.ids import Handle

__all__ = [
    "Announce", "JoinDone", "JoinPayload", "LeafPing", "LeafReply", "LeafRequest", "Leaving",
    "Pong", "Probe", "Route", "RouteAck", "RowRequest", "StateRows",
]


@dataclass(frozen=True, slots=True)
class Route:
    key: int
    payload: Any
    origin: Handle
    hop_id: int
    hops: int = 0


@dataclass(frozen=True, slots=True)
class RouteAck:
    hop_id: int


@dataclass(frozen=True, slots=True)
class JoinPayload:
    """Routed toward the joiner's own id: every hop sends the joiner its rows, the last its
    leaves."""

    joiner: Handle


@dataclass(frozen=True, slots=True)
class StateRows:
    handles: tuple[Handle, ...]


@dataclass(frozen=True, slots=True)
class JoinDone:
    leaves: tuple[Handle, ...]


@dataclass(frozen=True, slots=True)
class Announce:
    """A node that finished joining tells the nodes in its state that it exists."""


@dataclass(frozen=True, slots=True)
class LeafPing:
    """Keep-alive to a leaf; carries the sender's leaves now and then so leaf sets converge."""

    leaves: tuple[Handle, ...] | None = None


@dataclass(frozen=True, slots=True)
class LeafRequest:
    pass


@dataclass(frozen=True, slots=True)
class LeafReply:
    leaves: tuple[Handle, ...]


@dataclass(frozen=True, slots=True)
class RowRequest:
    """Lazy table repair: "send me your row ``row``" (answered with ``StateRows``)."""

    row: int


@dataclass(frozen=True, slots=True)
class Leaving:
    """A graceful departure: the receiver drops the sender at once."""


@dataclass(frozen=True, slots=True)
class Probe:
    sent_at: float


@dataclass(frozen=True, slots=True)
class Pong:
    sent_at: float
