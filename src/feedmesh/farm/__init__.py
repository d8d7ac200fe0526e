"""The feed farm: synthetic feeds with real-world statistics and faults, served on loopback.

Every later test, benchmark and demo crawls the farm. What it offers:

* :class:`FarmConfig` - feeds, seed, speed, origin, hosts, fault mix and per-feed overrides,
  format / validator / compression mixes (``feedmesh farm --help`` for the command line);
* :class:`FarmModel` - the pure model: ``document(feed_id, t)`` (bytes and validators at farm time
  ``t``), ``posts(feed_id, start, end)`` (ground truth), ``spec(feed_id)`` (format, validators,
  delta, compression, fault, rate...);
* :class:`FarmServer` - the HTTP server, with its :class:`RequestLog`, ``truth()`` and ``stats()``;
* :class:`FarmProcess` - the same in a child process (``with FarmProcess(config) as farm``);
* :mod:`feedmesh.farm.testing` - pytest fixtures (imported separately: it needs pytest);
* :class:`Fault` and :data:`DEFAULT_FAULT_MIX` - the misbehaviours;
* :class:`Geography` - emulated wide-area delays by (client address, host) region.

In a test (``farm`` fixture, or directly)::

    config = FarmConfig(feeds=50, faults="none", fault_overrides={3: "timeout"})
    async with FarmServer(config) as farm:
        await crawl(farm.opml_url)                        # every feed URL, titles, formats
        assert all(r.if_none_match for r in farm.requests(feed=7)[1:])   # politeness
        posted = farm.truth(7)                            # Post(time, block, index).key, ...
        guids = [farm.model.guid(7, p) for p in posted]   # what the documents call them

Pass ``clock=ManualClock(t)`` to FarmServer to move farm time by hand (new posts appear as the
clock passes their times), or ``speed=`` for an accelerated real clock.

HTTP endpoints: ``/feeds/<id>`` (``/moved``, ``/loop`` for redirect faults), ``/opml``,
``/_farm/requests?since=N``, ``/_farm/truth/<id>``, ``/_farm/spec/<id>``, ``/_farm/stats``
(see :mod:`feedmesh.farm.control`). Statistics: :mod:`~feedmesh.farm.posting` (when feeds post),
:mod:`~feedmesh.farm.catalog` (sizes, mixes). Faults: :mod:`~feedmesh.farm.faults`.

Layers, top to bottom. A module imports farm modules only from layers below its own (imports
under ``TYPE_CHECKING`` and inside functions included); modules on one line are independent of
each other. This package's ``__init__`` is the front door above them all; no farm module imports
it. The ``farm-layers`` contract of ``.importlinter`` writes this list down, and
``tests/test_architecture.py`` holds the code to it::

    cli | testing
    server | process
    routes | control
    reply
    documents
    content
    catalog
    config | posting
    faultbodies | faults | geography | http | peerlist | rand | requestlog | words

From the bottom: pure building blocks (random draws, words, HTTP parsing, faults and their bodies,
the request log, the recent FeedEx clients listed to each other); settings and when feeds post;
what each feed is; what its entries say; the documents and their validators (the pure model); the
reply type; the decisions for feed and control requests, which take the model and what they need
of the server as arguments; the server itself and the child-process wrapper; the command line and
the pytest fixtures.
"""

from feedmesh.farm.catalog import FeedSpec
from feedmesh.farm.config import FarmConfig, FarmConfigError, host_address
from feedmesh.farm.documents import FarmModel, FeedDocument
from feedmesh.farm.faults import DEFAULT_FAULT_MIX, Fault, FaultSpecError
from feedmesh.farm.geography import Geography, GeographyError
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
    "Geography",
    "GeographyError",
    "Post",
    "RequestLog",
    "host_address",
]
