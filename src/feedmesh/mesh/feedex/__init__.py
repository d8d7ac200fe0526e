"""FeedEx (Jun and Ahamad, WWW 2006): peers exchange the new entries of the feeds they follow.

The front door. Pure, sans-IO cores only: :class:`FeedExNode` (the peer's protocol state machine),
:class:`Tracker` (the list server), the wire format (:mod:`.messages`), and the discrete-event
simulation that drives many nodes on the mesh's one event loop (:mod:`.sim`). The node speaks the
mesh's one dialect (:mod:`feedmesh.mesh.sansio`): a transport feeds it the messages it receives,
fires it at ``next_deadline()`` and carries out what ``take()`` and ``take_deliveries()`` give.
Layers, bottom-up::

    settings, messages, didcache, subsets
    events, peers, tracker, phases, plans, audit
    queries
    node
    sim

Errors: :class:`~.messages.MessageError` (bytes that are not a valid message),
:class:`~.settings.FeedExSettingsError` (a setting out of range).
"""

from .didcache import BloomFilter, DidCache
from .events import Deliver, Event, QueryResult, Send, bundle_did
from .messages import MessageError, decode, encode
from .node import FeedExNode
from .settings import FeedExSettings, FeedExSettingsError
from .tracker import Tracker

__all__ = [
           "BloomFilter",
           "Deliver",
           "DidCache",
           "Event",
           "FeedExNode",
           "FeedExSettings",
           "FeedExSettingsError",
           "MessageError",
           "QueryResult",
           "Send",
           "Tracker",
           "bundle_did",
           "decode",
           "encode",
]
