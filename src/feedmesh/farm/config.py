"""The farm's one settings object. Everything the farm serves is a pure function of it and the time.

Two farms with equal configs (and equal ports) serve byte-identical documents at equal farm times;
the posting times and entry ids do not even depend on the port. Times are farm-clock seconds
(an :class:`~feedmesh.clock.AcceleratedClock` running ``speed`` times faster than real time from
``origin``), except the network-level fault timings (``slow_delay_s``, ``trickle_*``), which are
real seconds because they act on the client's real timeouts.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from feedmesh.errors import FeedmeshError
from feedmesh.farm.faults import Fault, FaultSpecError, parse_fault, parse_fault_mix
from feedmesh.farm.geography import Geography, GeographyError

__all__ = ["FarmConfig", "FarmConfigError", "host_address"]

FORMAT_MIX = {"rss2.0": 0.50, "atom1.0": 0.24, "rss1.0": 0.08, "rss0.91": 0.06,
              "json1.1": 0.07, "json1.0": 0.05}
VALIDATOR_MIX = {"both": 0.45, "etag": 0.15, "last_modified": 0.15, "none": 0.25}
COMPRESSION_MIX = {"none": 0.45, "gzip": 0.40, "br": 0.05, "gzip+br": 0.10}


class FarmConfigError(FeedmeshError, ValueError):
    """A farm setting is out of range; the message names it."""


def host_address(index: int, hosts: int) -> str:
    """Loopback address of host ``index`` (0-based): 127.0.0.1 for a one-host farm, else 127.0.1.1..

    Past 254 hosts the third octet carries (127.0.2.1, ...). Linux routes all of 127/8 to lo.
    """
    if hosts <= 1:
        return "127.0.0.1"
    return f"127.0.{1 + index // 254}.{1 + index % 254}"


def _check_mix(name: str, mix: Mapping[str, float], allowed: set[str]) -> None:
    unknown = set(mix) - allowed
    if unknown:
        raise FarmConfigError(f"{name} has unknown keys {sorted(unknown)}; "
                              f"allowed: {sorted(allowed)}")
    if any(v < 0 for v in mix.values()) or sum(mix.values()) <= 0:
        raise FarmConfigError(f"{name} needs non-negative shares with a positive sum, "
                              f"got {dict(mix)}")


class FarmConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What a farm serves. See the module docstring for units; defaults give a realistic farm."""

    feeds: int = 100
    seed: int = 1
    speed: float = 1.0
    origin: float | None = None
    """Farm time at start (Unix seconds); None: the real time at start."""
    hosts: int = 1
    """Loopback addresses to spread feeds over (feed i lives on host i % hosts)."""
    port: int = 0
    faults: str = "default"
    """Fault mix spec (see :mod:`feedmesh.farm.faults`): ``default``, ``none`` or
    ``KIND=SHARE,..``."""
    fault_overrides: dict[int, str] = {}
    """Exact faults for given feed ids, applied over the mix (``{3: "http_500"}``)."""
    format_mix: dict[str, float] = msgspec.field(default_factory=lambda: dict(FORMAT_MIX))
    validator_mix: dict[str, float] = msgspec.field(default_factory=lambda: dict(VALIDATOR_MIX))
    """Shares of feeds answering conditional GET with ETag, Last-Modified, both or neither."""
    compression_mix: dict[str, float] = msgspec.field(
        default_factory=lambda: dict(COMPRESSION_MIX))
    delta_share: float = 0.25
    """Share of the feeds with an ETag that also serve RFC 3229 deltas (``A-IM: feed``)."""
    max_age_share: float = 0.3
    """Share of feeds sending ``Cache-Control: max-age``."""
    ttl_share: float = 0.2
    """Share of feeds declaring a polling hint in the document (ttl / sy:update*)."""
    skip_hours_share: float = 0.05
    lookback_days: float = 1095.0
    """A document lists posts of at most this many days back (a slow feed shows fewer entries)."""
    slow_delay_s: float = 2.0
    trickle_bytes: int = 16
    trickle_interval_s: float = 0.5
    retry_after_s: int = 120
    huge_bytes: int = 100_000_000
    bomb_bytes: int = 2 << 30
    flood_entries: int = 10_000
    future_offset_s: float = 365 * 86400.0
    cache_mb: float = 1024.0
    """Memory budget for rendered documents; past it, random documents are dropped and
    re-rendered."""
    log_capacity: int = 200_000
    """Requests kept in the request log (the oldest are dropped first; ~0.5 KB each)."""
    geography: Geography | None = None
    """Emulated wide-area delays between known client addresses and the hosts (see
    :mod:`feedmesh.farm.geography`); None: answers go out at once."""
    prerender: bool = False
    """Render every document (and its compressed forms) before serving: a first crawl then
    measures the crawler, not the farm's rendering (~0.5 ms per feed, once)."""

    def __post_init__(self) -> None:
        if self.feeds < 0:
            raise FarmConfigError(f"feeds must be >= 0, got {self.feeds}")
        if not 1 <= self.hosts <= 254 * 254:
            raise FarmConfigError(f"hosts must be within 1..64516, got {self.hosts}")
        if self.speed <= 0:
            raise FarmConfigError(f"speed must be > 0, got {self.speed}")
        if not 0 <= self.port <= 65535:
            raise FarmConfigError(f"port must be within 0..65535, got {self.port}")
        from feedmesh.feeds.render import FORMATS
        _check_mix("format_mix", self.format_mix, set(FORMATS))
        _check_mix("validator_mix", self.validator_mix, set(VALIDATOR_MIX))
        _check_mix("compression_mix", self.compression_mix, set(COMPRESSION_MIX))
        for name in ("delta_share", "max_age_share", "ttl_share", "skip_hours_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise FarmConfigError(f"{name} must be within [0, 1], got {getattr(self, name)}")
        try:
            parse_fault_mix(self.faults)
            for feed_id, name in self.fault_overrides.items():
                parse_fault(name)
                if not 0 <= feed_id < max(self.feeds, 1):
                    raise FarmConfigError(f"fault override for feed {feed_id}: no such feed "
                                          f"(the farm has {self.feeds})")
        except FaultSpecError as error:
            raise FarmConfigError(str(error)) from error
        if self.geography is not None:
            try:
                self.geography.check_hosts(self.hosts)
            except GeographyError as error:
                raise FarmConfigError(str(error)) from error
        if self.trickle_bytes < 1 or self.trickle_interval_s <= 0:
            raise FarmConfigError("trickle_bytes must be >= 1 and trickle_interval_s > 0")

    def fault_mix(self) -> dict[Fault, float]:
        return parse_fault_mix(self.faults)

    def overrides(self) -> dict[int, Fault]:
        return {int(k): parse_fault(v) for k, v in self.fault_overrides.items()}
