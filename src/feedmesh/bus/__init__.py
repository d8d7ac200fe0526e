"""The bus that joins the hub's tiers: the port (:mod:`.ports`, JetStream's semantics) and its
in-process implementation (:mod:`.memory`, the embedded default; constructed by the composition
root, :mod:`feedmesh.compose`, only). A NATS JetStream implementation of the same port is the
distributed deployment's.

Exceptions drawn from this package::

    Exception
     └── BusError              a bus operation failed
          └── BusClosedError   the bus was closed (publishing to it, or waiting for room in it)
"""

from feedmesh.bus.ports import Bus, BusClosedError, BusError, Consumer, Delivery

__all__ = ["Bus", "BusClosedError", "BusError", "Consumer", "Delivery"]
