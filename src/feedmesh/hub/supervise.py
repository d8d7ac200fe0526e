"""Keep a tier's loop running for the life of its process."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

__all__ = ["supervise"]

log = logging.getLogger("feedmesh.hub")


async def supervise(name: str, run: Callable[[], Awaitable[None]], stop: asyncio.Event) -> None:
    """Run a tier loop until ``stop`` is set: a crash is logged and the loop restarted with a
    growing pause (0.1 s to 10 s), so one bad message cannot stall the tiers upstream behind a
    full queue; a loop that returns (its input closed) ends it."""
    delay = 0.1
    while not stop.is_set():
        try:
            await run()
            if stop.is_set():
                return
            log.error("tier_stopped tier=%s reason=its input closed", name)
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("tier_crashed tier=%s restart_in_s=%.1f", name, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
