"""Subscriptions as numpy columns, from rows read by any hub state store."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["SUBSCRIPTION_COLUMNS", "subscription_columns"]

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
