"""Failpoints: named places in the code where a process can be told to stop for a while, so a
test's ``kill -9`` lands exactly there and not only wherever a random moment falls (FreeBSD's
fail(9), TiKV's fail-rs, in their simplest form).

Armed by the environment at start-up, never by a request: ``FEEDMESH_FAILPOINTS`` is a comma-
separated list of ``NAME=SECONDS``. When the code reaches an armed ``NAME`` it logs one warning
line, ``failpoint_reached name=NAME pause_s=SECONDS``, and then blocks its thread that long (the
event loop too, when it is called there: nothing else moves, which is the point). Unset, each
:func:`reached` costs one dict lookup. The names in use:

=================================== ============================================================
``filter.snapshot_mapped``          a filter shard mapped its index snapshot; the subscriptions
                                    changed since are not applied yet (mid snapshot load)
``reflector.checkpoint_copied``     a reflector copied its held entries for a checkpoint; not a
                                    byte written yet
``reflector.checkpoint_written``    the checkpoint is durable; the match log it covers is not
                                    truncated yet
=================================== ============================================================
"""

from __future__ import annotations

import logging
import time
from typing import Final

from feedmesh import environment
from feedmesh.errors import FeedmeshError

__all__ = ["ENVIRONMENT", "FailpointError", "armed", "reached"]

log = logging.getLogger("feedmesh.failpoints")

ENVIRONMENT: Final = "FEEDMESH_FAILPOINTS"


class FailpointError(FeedmeshError, ValueError):
    """``FEEDMESH_FAILPOINTS`` cannot be read."""


def armed(spec: str) -> dict[str, float]:
    """``NAME=SECONDS,...`` as a dict; a clear error for anything else."""
    points: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, sep, seconds = part.partition("=")
        try:
            pause = float(seconds)
        except ValueError:
            pause = -1.0
        if not sep or not name.strip() or not 0 <= pause <= 3600:
            raise FailpointError(f"{ENVIRONMENT}: {part!r} is not NAME=SECONDS (0 to 3600)")
        points[name.strip()] = pause
    return points


_armed: dict[str, float] | None = None


def _points() -> dict[str, float]:
    global _armed
    if _armed is None:
        try:
            _armed = armed(environment.get(ENVIRONMENT))
        except FailpointError as exc:
            log.error("failpoints_ignored error=%s", exc)
            _armed = {}
    return _armed


def reached(name: str) -> None:
    """The code is at failpoint ``name``: pause here if it is armed (read from the environment
    the first time; a malformed value is logged and arms nothing)."""
    pause = _points().get(name)
    if pause is not None:
        log.warning("failpoint_reached name=%s pause_s=%.1f", name, pause)
        for handler in logging.getLogger().handlers:
            handler.flush()
        time.sleep(pause)
