"""What ``/api/stats`` tells whom: its figures are public (a status page, ``feedmesh stats``), but
the names of the hosts whose fetches are paused are the hosts of accounts' own sources. Without
the operator's token (``DATA/operator-token``, 0600, sent as ``Authorization: Bearer TOKEN``)
``hosts_paused`` is their count only."""

from __future__ import annotations

import hmac

from aiohttp import web

__all__ = ["is_operator", "shown_stats"]


def is_operator(request: web.Request, token: bytes | None) -> bool:
    """Whether ``request`` carries the operator's bearer token (compared in constant time)."""
    if not token:
        return False
    given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
    return hmac.compare_digest(given, b"Bearer " + token)


def shown_stats(stats: dict[str, object], *, operator: bool) -> dict[str, object]:
    """``stats`` as the asker may see them: to anyone but the operator, paused hosts counted."""
    paused = stats.get("hosts_paused")
    if operator or not isinstance(paused, dict):
        return stats
    return {**stats, "hosts_paused": len(paused)}
