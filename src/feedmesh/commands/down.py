"""``feedmesh down``: stop what ``feedmesh up --data DIR`` started (see :mod:`.up`)."""

from feedmesh.commands.up import configure_down as configure
from feedmesh.commands.up import run_down as run

__all__ = ["configure", "run"]
