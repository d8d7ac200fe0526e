"""The feed farm: synthetic feeds with real-world statistics and faults, served on loopback.

Every later test, benchmark and demo crawls the farm. What it offers:

* :class:`FarmConfig` - feeds, seed, speed, origin, hosts, fault mix and per-feed overrides,
  format / validator / compression mixes;
* :class:`FarmModel` - the pure model: ``document(feed_id, t)`` (bytes and validators at farm time
  ``t``), ``posts(feed_id, start, end)`` (ground truth), ``spec(feed_id)``;
* :class:`FarmServer` - the HTTP server (``async with FarmServer(config) as farm``), with its
  :class:`RequestLog`, ``truth()`` and ``stats()``;
* :class:`FarmProcess` - the same in a child process (``with FarmProcess(config) as farm``);
* :mod:`feedmesh.farm.testing` - pytest fixtures (imported separately: it needs pytest);
* :class:`Fault` and :data:`DEFAULT_FAULT_MIX` - the misbehaviours.

HTTP endpoints: ``/feeds/<id>``, ``/opml``, ``/_farm/requests?since=N``, ``/_farm/truth/<id>``,
``/_farm/spec/<id>``, ``/_farm/stats`` (see :mod:`feedmesh.farm.control`).
"""

from feedmesh.farm.catalog import FeedSpec
from feedmesh.farm.config import FarmConfig, FarmConfigError, host_address
from feedmesh.farm.documents import FarmModel, FeedDocument
from feedmesh.farm.faults import DEFAULT_FAULT_MIX, Fault, FaultSpecError
from feedmesh.farm.posting import Post
from feedmesh.farm.process import FarmProcess, FarmProcessError
from feedmesh.farm.requestlog import FarmRequest, RequestLog
from feedmesh.farm.server import FarmServer

__all__ = [
    "DEFAULT_FAULT_MIX",
    "FarmConfig",
    "FarmConfigError",
    "FarmModel",
    "FarmProcess",
    "FarmProcessError",
    "FarmRequest",
    "FarmServer",
    "Fault",
    "FaultSpecError",
    "FeedDocument",
    "FeedSpec",
    "Post",
    "RequestLog",
    "host_address",
]
