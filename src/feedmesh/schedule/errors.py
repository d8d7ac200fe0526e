"""Errors of the schedule package: one tree, so callers can catch exactly what they mean.

::

    ScheduleError                   anything this package raises on purpose
    ├── SettingsError               a setting is out of range or inconsistent (names the setting)
    ├── UnknownPolicyError          a policy name that is not registered (lists the known ones)
    ├── UnknownFeedError            a feed id the scheduler does not hold
    ├── DuplicateFeedError          add_feed() for an id that is already held
    ├── SnapshotError               a snapshot that cannot be decoded or belongs to another version
    └── TraceError                  a posting trace that cannot be replayed (names file and line)

Bad *runtime* inputs from the network (a week-long Retry-After, a skipHours list that covers the
whole day, an entry dated in the future) are not errors: they are decided on (a Retry-After by the
fetch state's cap, which the scheduler follows), the decision is recorded in
:class:`~feedmesh.schedule.records.FeedStatus` notes, and the scheduler carries on.
"""

from __future__ import annotations

from feedmesh.errors import FeedmeshError

__all__ = [
    "DuplicateFeedError",
    "ScheduleError",
    "SettingsError",
    "SnapshotError",
    "TraceError",
    "UnknownFeedError",
    "UnknownPolicyError",
]


class ScheduleError(FeedmeshError):
    """Base of every error the schedule package raises on purpose."""


class SettingsError(ScheduleError, ValueError):
    """A scheduler setting is out of range or inconsistent with another."""


class UnknownPolicyError(ScheduleError, ValueError):
    """A policy name that is not in the registry."""


class UnknownFeedError(ScheduleError, KeyError):
    """The scheduler holds no feed with this id."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else "unknown feed"


class DuplicateFeedError(ScheduleError, ValueError):
    """add_feed() was called for a feed id that is already held."""


class SnapshotError(ScheduleError, ValueError):
    """A snapshot that cannot be decoded, or that another format version wrote."""


class TraceError(ScheduleError, ValueError):
    """A posting trace that cannot be replayed; the message names the file and the line."""

    def __init__(self, message: str, *, path: str = "", line: int | None = None) -> None:
        where = path
        if line is not None:
            where = f"{path}:{line}" if path else f"line {line}"
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.line = line
