"""The address guard: an aggregator that fetches user-given URLs must not become a way into its own
network.

By default every destination that is not a public unicast address is refused: loopback, private
(RFC 1918, ULA), link-local (including the 169.254.169.254 cloud metadata service), CGNAT,
multicast,
reserved, unspecified, and the IPv6 forms that carry such an IPv4 address (IPv4-mapped, NAT64,
6to4, Teredo). The check runs on the *resolved* addresses of
every hop (the resolver below wraps aiohttp's), so neither a DNS name pointing at 10.0.0.1 nor a
redirect to one gets through. Tests and the farm allow loopback explicitly with ``allow_networks``.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

from feedmesh.errors import FeedmeshError

__all__ = ["AddressGuard", "BlockedAddressError", "GuardedResolver", "StaticResolver"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


class BlockedAddressError(FeedmeshError, OSError):
    """The destination resolved to an address the guard refuses."""

    def __init__(self, host: str, address: str, reason: str) -> None:
        # How to allow it is the caller's to say, in its own terms (a flag, a setting).
        super().__init__(f"refused to connect to {host} ({address}): {reason} address")
        self.host = host
        self.address = address
        self.reason = reason


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _wrapped_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 one carries, and how: an IPv4-mapped address, NAT64's
    well-known prefix, 6to4 (2002::/16) or Teredo (2001::/32, the client's address). A packet to
    any of them can end up at that IPv4 address, so it is judged as that address."""
    if ip.ipv4_mapped is not None:
        return "mapped", ip.ipv4_mapped
    if ip in _NAT64:
        return "NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip.teredo is not None:
        return "Teredo", ip.teredo[1]
    return None


class AddressGuard:
    def __init__(self, *, allow_all: bool = False, allow_networks: Iterable[str] = ()) -> None:
        self.allow_all = allow_all
        self.allowed = tuple(ipaddress.ip_network(n, strict=False) for n in allow_networks)
        self._known: dict[str, str | None] = {}

    def refusal(self, address: str) -> str | None:
        """Why ``address`` is refused, or None when it may be contacted."""
        if self.allow_all:
            return None
        try:
            return self._known[address]
        except KeyError:
            pass
        reason = self._judge(address)
        if len(self._known) > 65536:  # a bounded memo: a crawl meets few distinct addresses
            self._known.clear()
        self._known[address] = reason
        return reason

    def _judge(self, address: str) -> str | None:
        ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address):
            wrapped = _wrapped_ipv4(ip)
            if wrapped is not None:
                form, inner = wrapped
                reason = self._judge(str(inner))
                if form == "mapped":
                    return reason
                if reason is not None:
                    return f"{reason} ({form} {inner})"
                if form == "NAT64":  # a public IPv4 address through a NAT64 gateway
                    return None
        if any(ip.version == net.version and ip in net for net in self.allowed):
            return None
        if ip in _METADATA:
            return "cloud metadata"
        if ip.is_loopback:
            return "loopback"
        if ip.is_link_local:
            return "link-local"
        if ip.is_multicast:
            return "multicast"
        if ip.is_unspecified:
            return "unspecified"
        if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
            return "shared (CGNAT)"
        if ip.is_private:
            return "private"
        if ip.is_reserved or not ip.is_global:
            return "reserved"
        return None

    def check(self, host: str, address: str) -> None:
        reason = self.refusal(address)
        if reason is not None:
            raise BlockedAddressError(host, address, reason)


class GuardedResolver(AbstractResolver):
    """Wraps a resolver and drops refused addresses; fails when none is left."""

    def __init__(self, inner: AbstractResolver, guard: AddressGuard) -> None:
        self.inner = inner
        self.guard = guard

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        results = await self.inner.resolve(host, port, family)
        allowed = [r for r in results if self.guard.refusal(r["host"]) is None]
        if not allowed:
            first = results[0]["host"] if results else "?"
            self.guard.check(host, first)
            raise BlockedAddressError(host, first, "refused")
        return allowed

    async def close(self) -> None:
        await self.inner.close()


class StaticResolver(AbstractResolver):
    """Resolves names from a fixed table; any other name fails like a DNS miss.

    Lets tests give loopback servers real-looking host names (and provoke DNS failures) without a
    single packet leaving the machine. IP literals resolve to themselves.
    """

    def __init__(self, table: dict[str, str | list[str]]) -> None:
        self.table = {k.lower(): [v] if isinstance(v, str) else list(v) for k, v in table.items()}

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        try:
            ipaddress.ip_address(host)
            addresses = [host]
        except ValueError:
            addresses = self.table.get(host.lower().rstrip("."), [])
        if not addresses:
            raise OSError(socket.EAI_NONAME, f"Name or service not known: {host}")
        out: list[ResolveResult] = []
        for address in addresses:
            fam = socket.AF_INET6 if ":" in address else socket.AF_INET
            out.append(_result(host, address, port, fam))
        return out

    async def close(self) -> None:
        return None


def _result(hostname: str, address: str, port: int, family: Any) -> ResolveResult:
    return ResolveResult(hostname=hostname, host=address, port=port, family=family,
                         proto=0, flags=socket.AI_NUMERICHOST)
