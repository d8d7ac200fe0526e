"""Settings of the polite fetcher, one validated object injected into :class:`Fetcher`."""

from __future__ import annotations

import ipaddress

import msgspec

from feedmesh import PROJECT_URL, __version__

__all__ = ["FetchSettings", "user_agent"]


def user_agent(subscribers: int | None = None) -> str:
    """Who we are, where to read about us, and (when known) how many people this fetch serves.

    Publishers see the subscriber count in their logs, as Feedbin and NewsBlur do it.
    """
    audience = f"; {subscribers} subscriber{'s' if subscribers != 1 else ''}" if subscribers else ""
    return f"feedmesh/{__version__} (+{PROJECT_URL}{audience})"


class FetchSettings(msgspec.Struct, frozen=True, kw_only=True):
    connect_timeout_s: float = 5.0
    """Cobra used aggressive 5 s timeouts so that one slow feed cannot stall a crawl cycle."""
    total_timeout_s: float = 5.0
    max_body_bytes: int = 8 * 1024 * 1024
    """Cap on bytes received on the wire; an endless body is cut here."""
    max_decoded_bytes: int = 16 * 1024 * 1024
    """Cap on bytes after decompression; a gzip bomb is stopped here, never inflated whole."""
    max_redirects: int = 5
    max_connections: int = 256
    per_host_connections: int = 2
    """Requests in flight to one host at once. When to start one (spacing, per-minute caps,
    Retry-After pauses) is the scheduler's decision, not the fetcher's."""
    accept_delta: bool = True
    """Send ``A-IM: feed`` (RFC 3229) so servers may answer 226 with only the new entries."""
    allow_private: bool = False
    """Allow every destination address. Only for trusted lists; tests use ``allow_networks``."""
    allow_networks: tuple[str, ...] = ()
    """CIDR blocks that are allowed although private (e.g. ``127.0.0.0/8`` for the farm)."""
    user_agent: str = ""
    """Empty: :func:`user_agent` with the subscriber count of each request."""
    headers: tuple[tuple[str, str], ...] = ()
    """More request headers, sent with every fetch (a FeedEx peer's ``FeedEx-Peer: PORT``)."""
    source_address: str = ""
    """Local IP address every connection is made from (empty: the system's choice). A crawler
    that plays its own host on one machine binds its loopback address, e.g. ``127.0.1.2``."""

    def __post_init__(self) -> None:
        for name in ("connect_timeout_s", "total_timeout_s"):
            value = getattr(self, name)
            if not 0 < value <= 600:
                raise ValueError(f"FetchSettings.{name} must be in (0, 600] seconds, got {value}")
        if self.max_body_bytes < 1024 or self.max_decoded_bytes < self.max_body_bytes:
            raise ValueError(
                "FetchSettings: max_body_bytes must be >= 1024 and max_decoded_bytes >= "
                f"max_body_bytes (got {self.max_body_bytes} and {self.max_decoded_bytes})"
            )
        if not 0 <= self.max_redirects <= 20:
            raise ValueError("FetchSettings.max_redirects must be in 0..20, got "
                             f"{self.max_redirects}")
        if self.per_host_connections < 1 or self.max_connections < 1:
            raise ValueError("FetchSettings: connection limits must be >= 1")
        for name, value in self.headers:
            if not name or any(c in name for c in ":\r\n ") or "\r" in value or "\n" in value:
                raise ValueError(f"FetchSettings.headers: {name!r}: {value!r} is not a header")
        if self.source_address:
            try:
                ipaddress.ip_address(self.source_address)
            except ValueError as exc:
                raise ValueError(f"FetchSettings.source_address: {self.source_address!r} is not "
                                 "an IP address") from exc
        for block in self.allow_networks:
            try:
                ipaddress.ip_network(block, strict=False)
            except ValueError as exc:
                raise ValueError(f"FetchSettings.allow_networks: {block!r} is not a CIDR "
                                 "block") from exc
