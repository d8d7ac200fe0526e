"""A peer node on a person's machine (issue 13): the edge around the pure FeedEx core.

The front door. :class:`Peer` (:mod:`.daemon`) runs the archive (:mod:`.archive`: own fetches on
a ``schedule/`` policy, every entry kept in SQLite), the exchange protocols (:mod:`.exchange`:
FeedEx, over :mod:`.transport`, its aiohttp driver, which calls peers on the kept-alive
connections of :mod:`.channel`; :mod:`.multicast`: SCRIBE-RSS's signed records on a UDP overlay
node, whose keys :mod:`.trust` decides on) and the local proxy and API (:mod:`.proxy`, loopback
only). :class:`TrackerServer` (:mod:`.tracker`) serves the tracker core. Layers, bottom-up::

    channel
    entries, transport, trust
    tracker, archive, exchange
    proxy, multicast
    daemon

Errors: a peer's bad bytes never raise out of a handler (refused with a status and a FeedEx
``error``); :class:`ConnectionError` from an archive download names the holder and why;
``ValueError`` for a local address that is not loopback.
"""

from .archive import Archive
from .daemon import Peer, PeerSettings, load_neighbours
from .exchange import Exchange, FeedExExchange
from .multicast import MulticastSettings, ScribeExchange
from .proxy import LocalProxy, check_loopback
from .tracker import TrackerServer
from .transport import Archived, FeedExTransport, TransportSettings
from .trust import TrustSettings

__all__ = ["Archive", "Archived", "Exchange", "FeedExExchange", "FeedExTransport", "LocalProxy",
           "MulticastSettings", "Peer", "PeerSettings", "ScribeExchange", "TrackerServer",
           "TransportSettings", "TrustSettings", "check_loopback", "load_neighbours"]
