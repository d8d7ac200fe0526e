"""FeedEx (Jun and Ahamad, WWW 2006): peers exchange the new entries of the feeds they follow.

The front door. Pure, sans-IO cores only: :class:`FeedExNode` (the peer's protocol state machine),
:class:`Tracker` (the list server), the wire format (:mod:`.messages`), and the discrete-event
simulator that drives many nodes on a simulated clock (:mod:`.sim`). A transport feeds a node the
messages it receives and carries out what the node returns. Layers, bottom-up::

    settings, messages, didcache, subsets
    events, peers, tracker, phases
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
