"""The one dialect every mesh node speaks, the one timer structure and the one simulator core.

Every protocol core of the mesh (Pastry, Scribe, FeedEx) is a :class:`MeshNode`: messages and the
current time in (``receive(now, sender, message)``, ``fire(now)`` once ``next_deadline()`` has
come), messages out (``take()``: ``(destination, message)`` pairs), and what the node hands its
own side (deliveries, query results) by ``take_deliveries()``. A node keeps its deadlines in a
:class:`Timers`. The discrete-event simulators of the overlay and of FeedEx are scenarios on the
one :class:`EventLoop`; the live drivers (UDP endpoints, the FeedEx HTTP transport) drive a node
the same way on a real clock. Pure: no sockets, no event loop, no clock read. Modules, bottom-up:
``dialect`` (the protocols), ``timers``, ``simulator``.
"""

from feedmesh.mesh.sansio.dialect import DeliveringNode, MeshNode
from feedmesh.mesh.sansio.simulator import EventLoop
from feedmesh.mesh.sansio.timers import Timers

__all__ = ["DeliveringNode", "EventLoop", "MeshNode", "Timers"]
