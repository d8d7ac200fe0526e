"""Small HTTP helpers for farm tests (a real aiohttp client over loopback, no decompression)."""

from __future__ import annotations

import aiohttp
from multidict import CIMultiDict

from feedmesh.farm.documents import FarmModel


async def fetch(url: str, headers: dict[str, str] | None = None, method: str = "GET",
                timeout: float = 10.0) -> tuple[int, CIMultiDict, bytes]:
    """(status, headers, raw body) without following redirects or decoding the body.

    Accept-Encoding is ``identity`` unless given (aiohttp would otherwise offer gzip)."""
    headers = {"Accept-Encoding": "identity", **(headers or {})}
    async with (
        aiohttp.ClientSession(auto_decompress=False,
                              timeout=aiohttp.ClientTimeout(total=timeout)) as session,
        session.request(method, url, headers=headers, allow_redirects=False) as response,
    ):
        return response.status, CIMultiDict(response.headers), await response.read()


def find_feed(model: FarmModel, **wanted) -> int:
    """The first feed whose spec has all the wanted attribute values."""
    for feed_id in range(model.config.feeds):
        spec = model.spec(feed_id)
        if all(getattr(spec, name) == value for name, value in wanted.items()):
            return feed_id
    raise LookupError(f"no feed with {wanted} among {model.config.feeds}")
