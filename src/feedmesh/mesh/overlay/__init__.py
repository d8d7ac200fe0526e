"""The overlay: Pastry key-based routing and Scribe multicast trees, as sans-IO state machines.

Front door: :class:`ScribeNode` (one overlay node; Pastry inside) and :class:`Simulator` (drives
many of them with a latency matrix, on the mesh's one event loop). Both nodes speak the mesh's one
dialect (:mod:`feedmesh.mesh.sansio`). A real transport does what the simulator does: hands each
node ``receive(now, sender, message)`` and ``fire(now)`` at ``next_deadline()``, and sends what
``take()`` returns.

Modules, bottom-up: ``ids`` < ``messages``, ``tables`` < ``pastry`` < ``scribe`` < ``sim`` <
``scenario`` (the SCRIBE-RSS experiment the benchmark runs).
"""

from feedmesh.mesh.overlay.ids import Handle, group_id, node_id, republication_topic
from feedmesh.mesh.overlay.pastry import PastryConfig, PastryNode
from feedmesh.mesh.overlay.scribe import Delivery, ScribeConfig, ScribeNode
from feedmesh.mesh.overlay.sim import LatencyMatrix, Simulator

__all__ = [
    "Delivery", "Handle", "LatencyMatrix", "PastryConfig", "PastryNode", "ScribeConfig",
    "ScribeNode", "Simulator", "group_id", "node_id", "republication_topic",
]
