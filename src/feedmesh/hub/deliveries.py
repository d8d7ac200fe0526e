"""How a tier settles what the bus delivers when things go wrong, the same way in every tier.

* bytes that are not a message (a bug, a foreign publisher) can never succeed: logged and
  acknowledged, so they do not stall the tier behind them;
* work that failed (a full disk, a store that is down) is handed back to the bus (nak) to be
  tried again after a growing delay; after ``MAX_DELIVERIES`` attempts it is dropped with an error
  line naming the message (JetStream's ``MaxDeliver``), and the hub's replay from the ingest store
  brings it back at the next start.
"""

from __future__ import annotations

import logging

from feedmesh.bus import Delivery
from feedmesh.hub.messages import HubMessage, decode
from feedmesh.logs import Throttled

__all__ = ["MAX_DELIVERIES", "decoded", "retry_later"]

log = logging.getLogger("feedmesh.hub")
_retry_log = Throttled(log)

MAX_DELIVERIES = 5
RETRY_BASE_S = 0.5
RETRY_CAP_S = 30.0


async def decoded(delivery: Delivery, tier: str) -> HubMessage | None:
    """The message a delivery carries, or None (logged and acknowledged) when it is not one."""
    try:
        return decode(delivery.data)
    except ValueError as exc:
        log.error("bad_message tier=%s subject=%s seq=%d bytes=%d error=%s", tier,
                  delivery.subject, delivery.seq, delivery.size, exc)
        await delivery.ack()
        return None


async def retry_later(delivery: Delivery, tier: str, error: BaseException) -> None:
    """Hand a delivery whose work failed back to the bus, or drop it after the last attempt."""
    attempt = delivery.redeliveries + 1
    if attempt >= MAX_DELIVERIES:
        log.error("message_dropped tier=%s subject=%s seq=%d attempts=%d error=%s", tier,
                  delivery.subject, delivery.seq, attempt, error)
        await delivery.ack()
        return
    delay = min(RETRY_CAP_S, RETRY_BASE_S * 2.0 ** delivery.redeliveries)
    _retry_log.log(logging.WARNING, f"{tier}:{type(error).__name__}",
                   "message_retry tier=%s subject=%s seq=%d attempt=%d retry_in_s=%.1f error=%s",
                   tier, delivery.subject, delivery.seq, attempt, delay, error)
    await delivery.nak(delay_s=delay)
