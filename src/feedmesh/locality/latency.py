"""Latency between crawlers and host groups: the matrix the assignment reads, and the port that
fills it in.

A :class:`LatencyEstimator` turns crawlers and groups into a :class:`LatencyMatrix`. Two of them:

* :class:`~feedmesh.locality.probe.ProbeEstimator` (I/O, at the edge): a few HEAD requests from
  each crawler's own address to one feed of each group, on one kept-alive connection, never one
  per feed, at most one at a time per host;
* :class:`~feedmesh.locality.probe.MatrixFileEstimator`: a matrix given as a JSON file (King's
  estimates, a coordinate system's, an operator's), parsed here by :meth:`LatencyMatrix.from_json`.

The JSON form, round-trip times in milliseconds::

    {"rtt_ms": {"crawler-eu": {"127.0.1.1:8080": 92.5, "127.0.1.2:8080": 21.0}, ...}}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import msgspec
import numpy as np

from feedmesh.locality.errors import LocalityError
from feedmesh.locality.groups import HostGroup

__all__ = ["CrawlerSite", "LatencyEstimator", "LatencyMatrix"]


class CrawlerSite(msgspec.Struct, frozen=True):
    """A crawler as the mapping sees it: its name and the address it fetches from."""

    name: str
    source_address: str = ""


class _MatrixFile(msgspec.Struct, forbid_unknown_fields=True):
    rtt_ms: dict[str, dict[str, float]]


class LatencyMatrix:
    """Round-trip seconds from each crawler (rows) to each host group (columns)."""

    __slots__ = ("_column", "_row", "crawlers", "groups", "seconds")

    def __init__(self, crawlers: Sequence[str], groups: Sequence[str], seconds: np.ndarray) -> None:
        self.crawlers = tuple(crawlers)
        self.groups = tuple(groups)
        self.seconds = np.asarray(seconds, dtype=float)
        if self.seconds.shape != (len(self.crawlers), len(self.groups)):
            raise LocalityError(f"latency matrix: {self.seconds.shape} values for "
                                f"{len(self.crawlers)} crawlers x {len(self.groups)} groups")
        if (len(set(self.crawlers)) != len(self.crawlers)
                or len(set(self.groups)) != len(self.groups)):
            raise LocalityError("latency matrix: crawler and group names must be distinct")
        if not np.all(np.isfinite(self.seconds)) or np.any(self.seconds < 0):
            raise LocalityError("latency matrix: every latency must be a finite number >= 0")
        self._row = {name: i for i, name in enumerate(self.crawlers)}
        self._column = {name: j for j, name in enumerate(self.groups)}

    def rtt_s(self, crawler: str, group: str) -> float:
        return float(self.seconds[self._row[crawler], self._column[group]])

    def rows(self, crawlers: Sequence[str], groups: Sequence[str]) -> np.ndarray:
        """The sub-matrix for these crawlers and groups, in this order; a clear error when one
        is missing."""
        missing = [c for c in crawlers if c not in self._row]
        if missing:
            raise LocalityError(f"latency matrix has no row for crawler(s) {missing}")
        unknown = [g for g in groups if g not in self._column]
        if unknown:
            raise LocalityError(f"latency matrix has no column for host group(s) {unknown[:5]}"
                                f"{' ...' if len(unknown) > 5 else ''}")
        return self.seconds[np.ix_([self._row[c] for c in crawlers],
                                   [self._column[g] for g in groups])]

    @classmethod
    def from_mapping(cls, rtt_ms: Mapping[str, Mapping[str, float]]) -> LatencyMatrix:
        crawlers = sorted(rtt_ms)
        groups = sorted({g for row in rtt_ms.values() for g in row})
        values = np.empty((len(crawlers), len(groups)))
        for i, crawler in enumerate(crawlers):
            row = rtt_ms[crawler]
            absent = [g for g in groups if g not in row]
            if absent:
                raise LocalityError(f"latency matrix: crawler {crawler!r} has no latency to "
                                    f"{absent[:5]}{' ...' if len(absent) > 5 else ''}")
            values[i] = [row[g] / 1000.0 for g in groups]
        return cls(crawlers, groups, values)

    @classmethod
    def from_json(cls, data: bytes, where: str = "latency matrix") -> LatencyMatrix:
        try:
            parsed = msgspec.json.decode(data, type=_MatrixFile)
        except (msgspec.ValidationError, msgspec.DecodeError) as error:
            raise LocalityError(f"{where}: expected {{\"rtt_ms\": {{CRAWLER: {{GROUP: MS}}}}}}: "
                                f"{error}") from error
        try:
            return cls.from_mapping(parsed.rtt_ms)
        except LocalityError as error:
            raise LocalityError(f"{where}: {error}") from error

    def to_json(self) -> bytes:
        return msgspec.json.encode({"rtt_ms": {
            crawler: {group: round(float(self.seconds[i, j]) * 1000.0, 3)
                      for j, group in enumerate(self.groups)}
            for i, crawler in enumerate(self.crawlers)}})


class LatencyEstimator(Protocol):
    async def estimate(self, crawlers: Sequence[CrawlerSite],
                       groups: Sequence[HostGroup]) -> LatencyMatrix:
        """Latency from every crawler to every group (one probe target per group)."""
        ...
