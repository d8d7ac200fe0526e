"""The feed list an operator gives on the command line (``--opml FILE_OR_URL``): a file or an
http(s) URL, read with caps of its own (an operator is trusted with larger lists than a web user:
100,000 feeds make 21 MB of OPML)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from feedmesh.feeds.opml import OpmlError, OpmlResult, parse_opml
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.model import FetchOutcome

__all__ = ["BLOCKED_HINT", "OPERATOR_OPML_BYTES", "OPERATOR_OPML_FEEDS", "load_opml"]

OPERATOR_OPML_BYTES = 256 * 1024 * 1024
OPERATOR_OPML_FEEDS = 10_000_000
BLOCKED_HINT = "; allow it with --allow-network CIDR (e.g. 127.0.0.0/8) if this is intended"


async def load_opml(source: str, settings: FetchSettings) -> OpmlResult:
    """The outlines of the OPML list at ``source``; OpmlError saying what is wrong."""
    if source.startswith(("http://", "https://")):
        roomy = msgspec.structs.replace(settings, max_body_bytes=OPERATOR_OPML_BYTES,
                                        max_decoded_bytes=OPERATOR_OPML_BYTES,
                                        total_timeout_s=max(settings.total_timeout_s, 60.0))
        async with Fetcher(roomy) as fetcher:
            result = await fetcher.fetch(source)
        if not result.ok:
            hint = BLOCKED_HINT if result.outcome == FetchOutcome.BLOCKED else ""
            raise OpmlError(f"cannot fetch the OPML list: {result.error.message}{hint}")
        data = result.body
    else:
        try:
            data = await asyncio.to_thread(Path(source).read_bytes)
        except OSError as exc:
            raise OpmlError(f"cannot read the OPML list {source}: {exc.strerror}") from exc
    return parse_opml(data, max_bytes=OPERATOR_OPML_BYTES, max_outlines=OPERATOR_OPML_FEEDS)
