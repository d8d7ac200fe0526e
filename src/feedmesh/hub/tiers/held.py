"""The reflector's held entries (:class:`~.topk.TopK`) and its durable log
(:class:`feedmesh.store.ReflectorLog`): what a checkpoint holds, and how start-up rebuilds the
held entries from the checkpoint and the log rows written after it.

Top-k insertion is idempotent and order-independent, so log rows that the checkpoint already
partly includes are harmless: a crash at any point loses nothing that was committed and
duplicates nothing.

Feeds' versions (what their ETags carry) are not idempotent (each match moves them on), so a
checkpoint holds the version columns as they were at its log position exactly, and start-up
replays the log rows after it, in order, by the same rule the live reflector applied: a feed
answers the same validators after a restart as before it (docs/distributed.md).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from feedmesh.hub.idcodec import decode_ids
from feedmesh.hub.tiers.topk import WIDTH, TopK
from feedmesh.store import ReflectorLog, StoreError

__all__ = ["SPARSE", "Restored", "VersionColumns", "checkpoint", "checkpoint_arrays",
           "dense_arrays", "restore_held"]


class VersionColumns(NamedTuple):
    """Every feed's version and last change, copied at one log position, and when."""

    version: np.ndarray
    modified: np.ndarray
    taken_at: float


class Restored(NamedTuple):
    topk: TopK
    last_seq: int
    """The last log sequence number applied."""
    versions: VersionColumns | None
    """The checkpoint's version columns (None: no checkpoint, or one written before they were
    kept: ``checkpointed`` tells which)."""
    checkpointed: bool
    replayed: list[tuple[int, np.ndarray]]
    """``(entry_id, subscription ids)`` of the log rows after the checkpoint, in log order."""


SPARSE = ("rows", "version", "modified")
"""Columns as long as the subscription id space, which a checkpoint holds by their nonzero rows:
the hub spreads subscriptions over R reflectors by account (``HubFront.reflector_for``), so a
reflector's ids are scattered over the whole space, and each of these columns is as long as the
highest id, rounded up to a power of two. At 4M subscriptions on 5 reflectors the rows alone
were 168 MB a reflector, checkpointed every minute, of which about a fifth is ever nonzero."""


def checkpoint_arrays(topk: TopK, versions: VersionColumns | None = None
                      ) -> dict[str, np.ndarray]:
    """The arrays a checkpoint of ``topk`` holds, and the version columns when given: the
    :data:`SPARSE` columns by their nonzero rows (``{name}_ids``, ``{name}_values``,
    ``{name}_shape``; :func:`dense_arrays` gives them back exactly)."""
    extra_ids = np.fromiter(topk.extra, dtype=np.int64, count=len(topk.extra))
    lengths = np.array([len(topk.extra[int(s)]) for s in extra_ids], dtype=np.int64)
    values = (np.concatenate([topk.extra[int(s)] for s in extra_ids]) if len(extra_ids)
              else np.zeros(0, dtype=np.int64))
    arrays = {"rows": topk.rows, "extra_ids": extra_ids, "extra_lengths": lengths,
              "extra_values": values}
    if versions is not None:
        arrays.update(version=versions.version, modified=versions.modified,
                      taken_at=np.array([versions.taken_at], dtype=np.float64))
    for name in SPARSE:
        if name in arrays:
            column = arrays.pop(name)
            ids = np.flatnonzero(column.any(axis=1) if column.ndim > 1 else column)
            arrays.update({f"{name}_ids": ids.astype(np.int64), f"{name}_values": column[ids],
                           f"{name}_shape": np.array(column.shape, dtype=np.int64)})
    return arrays


def dense_arrays(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A checkpoint's arrays with its :data:`SPARSE` columns whole again (zero where it held
    nothing; a checkpoint written whole, before they were sparse, is read as it is)."""
    out = dict(arrays)
    for name in SPARSE:
        if f"{name}_ids" not in out:
            continue
        ids, values = out.pop(f"{name}_ids"), out.pop(f"{name}_values")
        shape = tuple(int(n) for n in out.pop(f"{name}_shape"))
        outside = len(ids) and (ids.min() < 0 or ids.max() >= shape[0])
        if outside or values.shape != (len(ids), *shape[1:]):
            raise ValueError(f"the checkpoint's column {name!r} is inconsistent: "
                             f"{len(ids)} rows of {values.shape} for a shape of {shape}")
        column = np.zeros(shape, dtype=values.dtype)
        column[ids] = values
        out[name] = column
    return out


def checkpoint(log: ReflectorLog, topk: TopK, upto_seq: int) -> None:
    """Persist ``topk`` (which includes every log row up to ``upto_seq``), then drop those rows
    (at once: for tests and tools; the reflector spreads the truncation out)."""
    log.write_checkpoint(checkpoint_arrays(topk), upto_seq)
    while log.truncate_log(upto_seq):
        pass


def restore_held(log: ReflectorLog, keep: np.ndarray | None = None) -> Restored:
    """The held entries as of the last commit: checkpoint plus the log rows after it.
    ``keep[sub_id]`` is each subscription's keep (missing or 0: the row width)."""
    topk = TopK()
    upto = 0
    versions = None
    replayed: list[tuple[int, np.ndarray]] = []
    saved = log.read_checkpoint()
    if saved is not None:
        arrays, upto = saved
        try:
            arrays = dense_arrays(arrays)
        except (KeyError, ValueError) as exc:
            raise StoreError(f"the checkpoint of the held entries cannot be read: {exc}") \
                from exc
        if "version" in arrays:
            versions = VersionColumns(arrays["version"], arrays["modified"],
                                      float(arrays["taken_at"][0]))
        topk.load_rows(arrays["rows"])
        offset = 0
        for sub_id, length in zip(arrays["extra_ids"].tolist(),
                                  arrays["extra_lengths"].tolist(), strict=True):
            topk.extra[sub_id] = arrays["extra_values"][offset:offset + length].copy()
            offset += length
    last = upto
    for seq, entry_id, blob in log.log_after(upto):
        ids = decode_ids(blob)
        if len(ids):
            topk.ensure(int(ids.max()))
            topk.insert(entry_id, ids, _keeps(keep, ids))
            replayed.append((entry_id, ids))
        last = seq
    return Restored(topk, last, versions, saved is not None, replayed)


def _keeps(keep: np.ndarray | None, ids: np.ndarray) -> np.ndarray:
    if keep is None:
        return np.full(len(ids), WIDTH, dtype=np.int64)
    known = np.zeros(len(ids), dtype=np.int64)
    inside = ids < len(keep)
    known[inside] = keep[ids[inside]]
    known[known == 0] = WIDTH
    return known
