"""WebSub leases as table rows, shared by the SQLite and PostgreSQL hub states."""

from __future__ import annotations

from collections.abc import Sequence

from feedmesh.model import WebSubLease

__all__ = ["WEBSUB_LEASE_COLUMNS", "websub_lease", "websub_row"]

WEBSUB_LEASE_COLUMNS = ("callback_id", "feed_id", "topic", "hub", "secret", "state", "awaiting",
                        "lease_s", "expires_at", "next_at", "attempts", "last_error",
                        "updated_at")


def websub_row(lease: WebSubLease) -> tuple:
    """The lease's values in :data:`WEBSUB_LEASE_COLUMNS` order."""
    return tuple(int(lease.awaiting) if name == "awaiting" else getattr(lease, name)
                 for name in WEBSUB_LEASE_COLUMNS)


def websub_lease(row: Sequence) -> WebSubLease:
    values = dict(zip(WEBSUB_LEASE_COLUMNS, row, strict=True))
    values["awaiting"] = bool(values["awaiting"])
    for name in ("lease_s", "expires_at", "next_at", "updated_at"):
        values[name] = float(values[name])
    values["feed_id"] = int(values["feed_id"])
    values["attempts"] = int(values["attempts"])
    return WebSubLease(**values)
