"""The bus that joins the hub's tiers: the port (:mod:`.ports`, JetStream's semantics), its
in-process implementation (:mod:`.memory`, the embedded default) and the distributed
deployment's, on NATS JetStream (:mod:`.jetstream`, connecting through :mod:`.nats_link`;
:mod:`.nats_server` starts a server, :mod:`.nats_cluster` three of them joined; :mod:`.nats_auth`
gives each role a key and its permissions). Both are constructed by the composition root,
:mod:`feedmesh.compose`, only, and pass one contract suite (tests/bus/test_contract.py).

Exceptions drawn from this package::

    Exception
     └── BusError              a bus operation failed
          └── BusClosedError   the bus was closed (publishing to it, or waiting for room in it)
"""

from feedmesh.bus.ports import (
    Bus,
    BusClosedError,
    BusError,
    Consumer,
    Delivery,
    Outgoing,
    Parked,
)

__all__ = ["Bus", "BusClosedError", "BusError", "Consumer", "Delivery", "Outgoing", "Parked"]
