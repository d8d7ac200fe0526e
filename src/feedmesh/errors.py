"""The root of every error feedmesh raises on purpose.

Each package has its own tree under it (drawn in that package's errors module or docstring):
:class:`feedmesh.store.StoreError`, :class:`feedmesh.bus.BusError`,
:class:`feedmesh.match.MatchError`, :class:`feedmesh.schedule.ScheduleError`,
:class:`feedmesh.provision.ProvisionError`, :class:`feedmesh.locality.LocalityError`, the
hub's (:mod:`feedmesh.hub.errors`) and the mesh's. A command catches ``FeedmeshError`` and
prints its message (what, where, why) instead of a traceback; anything else is a bug.
"""

from __future__ import annotations

__all__ = ["FeedmeshError"]


class FeedmeshError(Exception):
    """An error feedmesh raised on purpose, whose message is fit for a person."""
