"""Emulated geography: how long an answer takes to cross the (pretend) wide-area network.

netem is not available here, so the farm delays each answer itself. Every farm host and every
client address that the geography knows has a region; an answer from host ``h`` to client ``c``
is held back by::

    rtt(region(c), region(h)) + access(h)   round trips' worth of time, times
    rounds = 1 (request, response)
           + new_connection_rounds (TCP's handshake, on a connection's first answer)
           + slow-start rounds (a body past the initial congestion window needs more round trips:
             window 10 segments, doubling: 14.6 KB in 0 extra, 43.8 KB in 1, 102 KB in 2...)

plus a one-sided jitter (an exponential draw with mean ``jitter`` times that; queues only ever add
delay). ``access(h)`` is the host's own last mile, fixed per host from the seed (uniform in
``[0, access_ms_max]``), so hosts of one region are not all alike. A client address the geography
does not place (the test talking to the farm, an ordinary crawler) gets no delay.

The defaults (:data:`WAN3_RTT_MS`) are three regions with round trips typical of the public
Internet: 20-40 ms within a continent, ~90 ms across the Atlantic, ~160 ms across the Pacific
and ~250 ms between Europe and East Asia.
"""

from __future__ import annotations

import ipaddress
import math
import random

import msgspec

from feedmesh.errors import FeedmeshError

__all__ = ["REGIONS", "WAN3_RTT_MS", "Geography", "GeographyError"]

REGIONS = ["na", "eu", "asia"]
WAN3_RTT_MS = [[30.0, 90.0, 160.0],
               [90.0, 20.0, 250.0],
               [160.0, 250.0, 40.0]]
SEGMENT_BYTES = 1460


class GeographyError(FeedmeshError, ValueError):
    """A geography setting is inconsistent; the message names it."""


class Geography(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Regions, their round-trip times, and where the farm's hosts and known clients are."""

    regions: list[str] = msgspec.field(default_factory=lambda: list(REGIONS))
    rtt_ms: list[list[float]] = msgspec.field(
        default_factory=lambda: [list(r) for r in WAN3_RTT_MS])
    """``rtt_ms[i][j]``: round trip between a client in region i and a host in region j."""
    host_regions: list[str] = []
    """Region of farm host 0, 1, ...; empty: host i is in ``regions[i % len(regions)]``."""
    clients: dict[str, str] = {}
    """Client (source) address -> region; other clients are not delayed."""
    jitter: float = 0.1
    access_ms_max: float = 10.0
    new_connection_rounds: int = 1
    initial_window_segments: int = 10

    def __post_init__(self) -> None:
        count = len(self.regions)
        if count == 0 or len(set(self.regions)) != count:
            raise GeographyError("geography: regions must be distinct and non-empty, "
                                 f"got {self.regions}")
        if len(self.rtt_ms) != count or any(len(row) != count for row in self.rtt_ms):
            raise GeographyError(f"geography: rtt_ms must be a {count}x{count} matrix (one row and "
                                 f"column per region {self.regions})")
        if any(not 0 <= value <= 10_000 for row in self.rtt_ms for value in row):
            raise GeographyError("geography: every rtt_ms must be within [0, 10000] ms")
        known = set(self.regions)
        for index, region in enumerate(self.host_regions):
            if region not in known:
                raise GeographyError(f"geography: host {index} is in unknown region {region!r}; "
                                     f"regions are {self.regions}")
        for address, region in self.clients.items():
            try:
                loopback = ipaddress.ip_address(address).is_loopback
            except ValueError:
                loopback = False
            if not loopback:
                raise GeographyError(f"geography: client {address!r} is not a loopback address")
            if region not in known:
                raise GeographyError(f"geography: client {address} is in unknown region "
                                     f"{region!r}; regions are {self.regions}")
        if not 0 <= self.jitter <= 10 or self.access_ms_max < 0:
            raise GeographyError("geography: jitter must be within [0, 10] and access_ms_max >= 0")
        if self.new_connection_rounds < 0 or self.initial_window_segments < 1:
            raise GeographyError("geography: new_connection_rounds must be >= 0 and "
                                 "initial_window_segments >= 1")

    def check_hosts(self, hosts: int) -> None:
        if self.host_regions and len(self.host_regions) != hosts:
            raise GeographyError(f"geography: host_regions names {len(self.host_regions)} hosts, "
                                 f"the farm has {hosts}")

    def host_region(self, index: int) -> str:
        if self.host_regions:
            return self.host_regions[index]
        return self.regions[index % len(self.regions)]

    def access_ms(self, index: int, seed: int) -> float:
        """Host ``index``'s own last-mile latency, the same for every farm with this seed."""
        return random.Random(f"geography:{seed}:{index}").uniform(0.0, self.access_ms_max)

    def round_trip_s(self, client: str, host_index: int, seed: int) -> float | None:
        """Base round trip between a client address and a farm host; None: client not placed."""
        region = self.clients.get(client)
        if region is None:
            return None
        row = self.regions.index(region)
        column = self.regions.index(self.host_region(host_index))
        return (self.rtt_ms[row][column] + self.access_ms(host_index, seed)) / 1000.0

    def rounds(self, body_bytes: int, new_connection: bool) -> int:
        window = self.initial_window_segments * SEGMENT_BYTES
        # Slow start: after k extra rounds, window * (2^(k+1) - 1) bytes have been sent.
        extra = max(0, math.ceil(math.log2(body_bytes / window + 1)) - 1) if body_bytes else 0
        return 1 + extra + (self.new_connection_rounds if new_connection else 0)

    def delay_s(self, round_trip_s: float, body_bytes: int, new_connection: bool,
                draw: float) -> float:
        """How long to hold an answer back; ``draw`` is uniform in [0, 1) (the jitter)."""
        base = round_trip_s * self.rounds(body_bytes, new_connection)
        return base * (1.0 - self.jitter * math.log1p(-draw))
