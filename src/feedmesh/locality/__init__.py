"""locality: which crawler fetches which feed, so that crawlers fetch near servers and share the
work evenly (Cobra 3.7, and the equal-work mapping Cobra names and leaves undone).

The front door. A mapping in four steps::

    from feedmesh.locality import group_by_host, FeedLoad, balanced, first_fit, reassign

    groups = group_by_host({feed_id: url, ...})                  # one probe target per server
    latency = await ProbeEstimator().estimate(crawlers, groups)  # feedmesh.locality.probe (I/O)
    loads = [FeedLoad(feed_id, group.key, fetches_per_cycle, bytes_per_fetch), ...]
    mapping = balanced(loads, [c.name for c in crawlers], latency)   # {feed_id: crawler}
    later = reassign(mapping, loads, new_crawler_names, latency)     # few feeds move

Everything here but :mod:`~feedmesh.locality.probe` and the command is pure (no sockets, no event
loop, no clock): the ``locality-pure`` contract of ``.importlinter`` holds it to that. Layers,
bottom-up: ``errors``; ``groups``; ``latency``; ``cost``; ``assign`` and ``owners`` (owners for new
feeds between two mappings); ``probe`` (the I/O edge: HEAD probes
from each crawler's own address, and the matrix file); ``cli`` (``feedmesh map``).
docs/locality.md explains the design.
"""

from feedmesh.locality.assign import balanced, first_fit, random_assignment, reassign, work
from feedmesh.locality.cost import FeedLoad, cost_matrix, fetches_per_cycle, round_trips
from feedmesh.locality.errors import LocalityError
from feedmesh.locality.groups import HostGroup, group_by_host, host_of
from feedmesh.locality.latency import CrawlerSite, LatencyEstimator, LatencyMatrix
from feedmesh.locality.owners import place_new_feeds

__all__ = [
    "CrawlerSite",
    "FeedLoad",
    "HostGroup",
    "LatencyEstimator",
    "LatencyMatrix",
    "LocalityError",
    "balanced",
    "cost_matrix",
    "fetches_per_cycle",
    "first_fit",
    "group_by_host",
    "host_of",
    "place_new_feeds",
    "random_assignment",
    "reassign",
    "round_trips",
    "work",
]
