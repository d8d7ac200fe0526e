"""``feedmesh stats``: see :func:`feedmesh.hub.cli.run_stats`."""

from feedmesh.hub.cli import configure_stats as configure
from feedmesh.hub.cli import run_stats as run

__all__ = ["configure", "run"]
