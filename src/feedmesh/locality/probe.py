"""The I/O edge of the feed mapping: latency measured from each crawler's own address, a latency
matrix read from a file, and host names resolved to the addresses groups are keyed by.

:class:`ProbeEstimator` measures what Cobra estimated with King: for every (crawler, host group)
pair, ``probes + 1`` HEAD requests for the group's probe feed, one after another on one kept-alive
connection bound to the crawler's source address. The first answer pays for the connection
(TCP's handshake) and is not counted; the estimate is the quickest of the others, as ping takes
the minimum: queueing only ever adds. Politeness: one feed per group is asked, never each feed;
at most ``per_host`` probes are in flight to one host at a time over all crawlers, spaced by
``spacing_s``; every destination passes the fetcher's address guard. A group that cannot be
reached within ``timeout_s`` is recorded at ``timeout_s`` (as far as a crawl would wait) and
listed in :attr:`ProbeEstimator.failures`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import aiohttp
import numpy as np
from yarl import URL

from feedmesh.fetch.guard import AddressGuard, BlockedAddressError, GuardedResolver
from feedmesh.locality.errors import LocalityError
from feedmesh.locality.groups import HostGroup
from feedmesh.locality.latency import CrawlerSite, LatencyMatrix

__all__ = ["MatrixFileEstimator", "ProbeEstimator", "resolve_addresses"]


class ProbeEstimator:
    """Latency from HEAD probes sent from each crawler's own address (see the module doc)."""

    def __init__(self, *, probes: int = 3, per_host: int = 1, spacing_s: float = 0.05,
                 timeout_s: float = 5.0, allow_networks: Iterable[str] = (),
                 user_agent: str = "feedmesh-locality-probe") -> None:
        if probes < 1 or per_host < 1 or spacing_s < 0 or timeout_s <= 0:
            raise LocalityError("probe settings: probes and per_host must be >= 1, spacing_s "
                                ">= 0 and timeout_s > 0")
        self.probes = probes
        self.per_host = per_host
        self.spacing_s = spacing_s
        self.timeout_s = timeout_s
        self.guard = AddressGuard(allow_networks=tuple(allow_networks))
        self.user_agent = user_agent
        self.failures: list[tuple[str, str, str]] = []
        """(crawler, group, why) for each pair that could not be measured."""
        self.requests = 0

    async def estimate(self, crawlers: Sequence[CrawlerSite],
                       groups: Sequence[HostGroup]) -> LatencyMatrix:
        self.failures = []
        for group in groups:
            host = URL(group.probe_url).host or ""
            try:
                ipaddress.ip_address(host.strip("[]"))
            except ValueError:
                continue  # a name: the guarded resolver checks what it resolves to
            try:
                self.guard.check(host, host.strip("[]"))
            except BlockedAddressError as error:
                raise LocalityError(f"probe of group {group.key}: {error}") from error
        slots = {group.key: asyncio.Semaphore(self.per_host) for group in groups}
        seconds = np.empty((len(crawlers), len(groups)))

        async def from_crawler(row: int, crawler: CrawlerSite) -> None:
            connector = aiohttp.TCPConnector(
                limit=0, limit_per_host=1, force_close=False,
                resolver=GuardedResolver(aiohttp.ThreadedResolver(), self.guard),
                local_addr=(crawler.source_address, 0) if crawler.source_address else None)
            async with aiohttp.ClientSession(connector=connector,
                                             headers={"User-Agent": self.user_agent}) as session:
                await asyncio.gather(*(self._measure(session, crawler, row, column, group,
                                                     slots[group.key], seconds)
                                       for column, group in enumerate(groups)))

        await asyncio.gather(*(from_crawler(row, crawler) for row, crawler in enumerate(crawlers)))
        return LatencyMatrix([c.name for c in crawlers], [g.key for g in groups], seconds)

    async def _measure(self, session: aiohttp.ClientSession, crawler: CrawlerSite, row: int,
                       column: int, group: HostGroup, slot: asyncio.Semaphore,
                       seconds: np.ndarray) -> None:
        timings: list[float] = []
        async with slot:
            try:
                for attempt in range(self.probes + 1):
                    if attempt:
                        await asyncio.sleep(self.spacing_s)
                    started = time.perf_counter()
                    self.requests += 1
                    async with session.head(group.probe_url, allow_redirects=False,
                                            timeout=aiohttp.ClientTimeout(total=self.timeout_s)):
                        pass
                    if attempt:
                        timings.append(time.perf_counter() - started)
            except (aiohttp.ClientError, TimeoutError, OSError) as error:
                self.failures.append((crawler.name, group.key, f"{type(error).__name__}: {error}"))
                seconds[row, column] = self.timeout_s
                return
        seconds[row, column] = min(timings)


class MatrixFileEstimator:
    """A latency matrix given as a JSON file (see :mod:`feedmesh.locality.latency`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    async def estimate(self, crawlers: Sequence[CrawlerSite],
                       groups: Sequence[HostGroup]) -> LatencyMatrix:
        try:
            data = self.path.read_bytes()
        except OSError as error:
            raise LocalityError(f"latency matrix {self.path}: cannot read it: "
                                f"{error.strerror}") from error
        matrix = LatencyMatrix.from_json(data, where=f"latency matrix {self.path}")
        names, keys = [c.name for c in crawlers], [g.key for g in groups]
        try:
            return LatencyMatrix(names, keys, matrix.rows(names, keys))
        except LocalityError as error:
            raise LocalityError(f"latency matrix {self.path}: {error}") from error


async def resolve_addresses(hostnames: Iterable[str]) -> dict[str, str]:
    """The first address each host name resolves to (names that do not resolve are left out,
    so their feeds group by name)."""
    loop = asyncio.get_running_loop()
    names = sorted(set(hostnames))

    async def one(name: str) -> str | None:
        try:
            infos = await loop.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except OSError:
            return None
        return str(infos[0][4][0]) if infos else None

    found = await asyncio.gather(*(one(name) for name in names))
    return {name: address for name, address in zip(names, found, strict=True)
            if address is not None}
