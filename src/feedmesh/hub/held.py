"""The reflector's held entries (:class:`~.topk.TopK`) and its durable log
(:class:`feedmesh.store.ReflectorLog`): what a checkpoint holds, and how start-up rebuilds the
held entries from the checkpoint and the log rows written after it.

Top-k insertion is idempotent and order-independent, so log rows that the checkpoint already
partly includes are harmless: a crash at any point loses nothing that was committed and
duplicates nothing.
"""

from __future__ import annotations

import numpy as np

from feedmesh.hub.idcodec import decode_ids
from feedmesh.hub.topk import WIDTH, TopK
from feedmesh.store import ReflectorLog

__all__ = ["checkpoint", "checkpoint_arrays", "restore_held"]


def checkpoint_arrays(topk: TopK) -> dict[str, np.ndarray]:
    """The arrays a checkpoint of ``topk`` holds (the rows themselves, not a copy)."""
    extra_ids = np.fromiter(topk.extra, dtype=np.int64, count=len(topk.extra))
    lengths = np.array([len(topk.extra[int(s)]) for s in extra_ids], dtype=np.int64)
    values = (np.concatenate([topk.extra[int(s)] for s in extra_ids]) if len(extra_ids)
              else np.zeros(0, dtype=np.int64))
    return {"rows": topk.rows, "extra_ids": extra_ids, "extra_lengths": lengths,
            "extra_values": values}


def checkpoint(log: ReflectorLog, topk: TopK, upto_seq: int) -> None:
    """Persist ``topk`` (which includes every log row up to ``upto_seq``), then drop those rows
    (at once: for tests and tools; the reflector spreads the truncation out)."""
    log.write_checkpoint(checkpoint_arrays(topk), upto_seq)
    while log.truncate_log(upto_seq):
        pass


def restore_held(log: ReflectorLog, keep: np.ndarray | None = None) -> tuple[TopK, int]:
    """The held entries as of the last commit: checkpoint plus the log rows after it.
    ``keep[sub_id]`` is each subscription's keep (missing or 0: the row width). Returns the
    entries and the last log sequence number applied."""
    topk = TopK()
    upto = 0
    saved = log.read_checkpoint()
    if saved is not None:
        arrays, upto = saved
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
        last = seq
    return topk, last


def _keeps(keep: np.ndarray | None, ids: np.ndarray) -> np.ndarray:
    if keep is None:
        return np.full(len(ids), WIDTH, dtype=np.int64)
    known = np.zeros(len(ids), dtype=np.int64)
    inside = ids < len(keep)
    known[inside] = keep[ids[inside]]
    known[known == 0] = WIDTH
    return known
