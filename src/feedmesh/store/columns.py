"""Rows read by any hub state store as what the ports return: subscriptions as numpy columns,
push targets as records."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np

from feedmesh.store.ports import PushAttempt, PushTarget

__all__ = ["PUSH_ATTEMPT_COLUMNS", "PUSH_TARGET_COLUMNS", "SUBSCRIPTION_COLUMNS", "push_attempt",
           "push_target", "subscription_columns"]

SUBSCRIPTION_COLUMNS = ("id", "keep", "reflector", "generation", "created_at", "changed_at")
"""What start-up needs of every subscription, in the order the rows give them."""


def subscription_columns(rows: Iterable[Sequence[float]]) -> dict[str, np.ndarray]:
    """``SUBSCRIPTION_COLUMNS`` rows (streamed by id) as one numpy column each, 100,000 rows at
    a time: no Python object per subscription stays (there may be millions)."""
    parts: list[np.ndarray] = []
    rows = iter(rows)
    while chunk := list(itertools.islice(rows, 100_000)):
        parts.append(np.array(chunk, dtype=np.float64))
    table = np.concatenate(parts) if parts else np.zeros((0, len(SUBSCRIPTION_COLUMNS)))
    return {name: (table[:, i] if name.endswith("_at") else table[:, i].astype(np.int64))
            for i, name in enumerate(SUBSCRIPTION_COLUMNS)}


PUSH_TARGET_COLUMNS = ("id, sub_id, kind, url, topic, format, secret, lease_seconds, expires_at, "
                       "created_at, delivered_before, signature")
PUSH_ATTEMPT_COLUMNS = "target_id, at, attempt, status, error, entries, elapsed_ms"


def push_target(row: Sequence) -> PushTarget:
    """A ``PUSH_TARGET_COLUMNS`` row."""
    return PushTarget(id=row[0], sub_id=row[1], kind=row[2], url=row[3], topic=row[4],
                      format=row[5], secret=row[6], lease_seconds=row[7], expires_at=row[8],
                      created_at=row[9], delivered_before=row[10],
                      signature=row[11])


def push_attempt(row: Sequence) -> PushAttempt:
    """A ``PUSH_ATTEMPT_COLUMNS`` row."""
    return PushAttempt(target_id=row[0], at=row[1], attempt=row[2], status=row[3], error=row[4],
                       entries=row[5], elapsed_ms=row[6])
