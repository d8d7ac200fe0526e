"""How a tier settles what the bus delivers when things go wrong, the same way in every tier.

* bytes that are not a message (a bug, a foreign publisher) can never succeed: parked at once
  (kept aside on the bus for an operator, :meth:`feedmesh.bus.Bus.park`) with an error line, so
  they do not stall the tier behind them;
* work that failed because of the message (a handler raised: a bug it meets) is handed back to
  the bus (nak) to be tried again after a growing delay; after ``MAX_DELIVERIES`` attempts it is
  parked with an error line naming the message (JetStream's ``MaxDeliver``), and the hub's replay
  from the ingest store brings its entries back at the next start;
* work that failed for reasons outside the message (its store cannot be reached, is full or
  refuses writes: :data:`OUTAGES`) is handed back too, and waits out the outage however long it
  lasts (retried every ``OUTAGE_RETRY_CAP_S`` at most): an outage says nothing about the
  message, and parking every message in flight during a ten-second PostgreSQL restart would
  lose them until the next start. Such attempts do not count toward parking, except that a
  message which failed that way and then fails for a reason of its own has used its attempts.

Every parked message counts in ``feedmesh_messages_parked_total{group=...}``.
"""

from __future__ import annotations

import logging

from feedmesh.bus import Bus, Delivery
from feedmesh.hub.messages import HubMessage, decode
from feedmesh.hub.metrics import HubMetrics
from feedmesh.logs import Throttled
from feedmesh.store import StorageFullError, StorageReadOnlyError, StoreUnavailableError

__all__ = ["MAX_DELIVERIES", "OUTAGES", "Settle"]

log = logging.getLogger("feedmesh.hub")
_retry_log = Throttled(log)

MAX_DELIVERIES = 5
RETRY_BASE_S = 0.5
RETRY_CAP_S = 30.0
OUTAGE_RETRY_CAP_S = 5.0
"""While the store is out, a message is retried at least this often: it resumes within seconds
of the store's return."""
OUTAGES = (StoreUnavailableError, StorageFullError, StorageReadOnlyError)
"""Failures that are not the message's fault: waited out, never parked for."""


class Settle:
    """One tier's way of settling deliveries that cannot simply be acknowledged; ``group`` is
    the tier's group on the bus (``filter-0``), named in log lines and parked messages."""

    def __init__(self, bus: Bus, group: str, metrics: HubMetrics) -> None:
        self.bus = bus
        self.group = group
        self.metrics = metrics

    async def _park(self, delivery: Delivery, reason: str) -> None:
        await self.bus.park(delivery, self.group, reason)
        self.metrics.parked.labels(self.group).inc()

    async def decoded(self, delivery: Delivery) -> HubMessage | None:
        """The message a delivery carries, or None (logged and parked) when it is not one."""
        try:
            return decode(delivery.data)
        except ValueError as exc:
            log.error("message_parked group=%s subject=%s seq=%d bytes=%d reason=not a "
                      "message: %s", self.group, delivery.subject, delivery.seq, delivery.size,
                      exc)
            await self._park(delivery, f"not a message: {exc}")
            return None

    async def retry_later(self, delivery: Delivery, error: BaseException) -> None:
        """Hand a delivery whose work failed back to the bus, or park it after the last
        attempt; a failure of the store (:data:`OUTAGES`) is waited out, never parked for."""
        attempt = delivery.redeliveries + 1
        if isinstance(error, OUTAGES):
            delay = min(OUTAGE_RETRY_CAP_S, RETRY_BASE_S * 2.0 ** delivery.redeliveries)
            _retry_log.log(logging.WARNING, f"{self.group}:{type(error).__name__}",
                           "message_waiting group=%s subject=%s seq=%d attempt=%d "
                           "retry_in_s=%.1f reason=the store is out, not the message: %s",
                           self.group, delivery.subject, delivery.seq, attempt, delay, error)
            await delivery.nak(delay_s=delay)
            return
        if attempt >= MAX_DELIVERIES:
            log.error("message_parked group=%s subject=%s seq=%d attempts=%d error=%s",
                      self.group, delivery.subject, delivery.seq, attempt, error)
            await self._park(delivery, f"failed {attempt} times: {type(error).__name__}: "
                                       f"{error}")
            return
        delay = min(RETRY_CAP_S, RETRY_BASE_S * 2.0 ** delivery.redeliveries)
        _retry_log.log(logging.WARNING, f"{self.group}:{type(error).__name__}",
                       "message_retry group=%s subject=%s seq=%d attempt=%d retry_in_s=%.1f "
                       "error=%s", self.group, delivery.subject, delivery.seq, attempt, delay,
                       error)
        await delivery.nak(delay_s=delay)
