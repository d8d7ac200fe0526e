"""One push subscription's life (W3C WebSub sections 5.1-5.3, 6 and 7), as pure functions of a
:class:`~feedmesh.model.WebSubLease` and the time.

::

    subscribing --send--> (awaiting) --hub verifies subscribe--> active --renew at 85%--> (awaiting)
        ^   |                  |                                   |   ^                    |
        |   +-- 4xx/5xx, no verification in time: backoff ---------+   +-- verified again --+
        |                                                          |
        +--- denied (hub.mode=denied): backoff, then subscribe again +
    any --feed removed--> unsubscribing --send--> (awaiting) --hub verifies unsubscribe--> gone

Rules that make the callback safe to expose:

* a verification is echoed only for a request we sent and still wait for (``awaiting``), of the
  same mode and topic; anything else is answered 404 (section 5.3: "MUST respond with 404");
* a subscription is *live* (the scheduler then polls the feed only as a daily safety net) while
  its state is ``active`` and the lease the hub granted has not run out;
* failures back off exponentially from ``backoff_base_s`` to ``backoff_max_s``; an unsubscription
  that keeps failing is given up after ``unsubscribe_attempts`` (its lease runs out anyway).
"""

from __future__ import annotations

import zlib

import msgspec

from feedmesh.model import WebSubLease

__all__ = ["HubRequest", "SubscriberSettings", "Verdict", "backoff_s", "is_live", "new_lease",
           "on_response", "on_verification", "step", "unsubscribe"]

DAY_S = 86400.0


class SubscriberSettings(msgspec.Struct, frozen=True, kw_only=True):
    lease_s: int = 10 * 86400
    """Lease asked for (``hub.lease_seconds``); the hub decides what it grants."""
    renew_at: float = 0.85
    """Renew once this share of the granted lease has passed."""
    min_renew_s: float = 60.0
    """Never renew sooner than this after a verification (a hub granting 1 s leases must not
    make us hammer it)."""
    verify_timeout_s: float = 120.0
    """How long a verification may take to come after the hub accepted a request."""
    backoff_base_s: float = 60.0
    backoff_max_s: float = DAY_S
    unsubscribe_attempts: int = 5
    max_body_bytes: int = 4 * 1024 * 1024
    """Largest content distribution accepted (413 above)."""
    hub_rate_per_s: float = 5.0
    """Callback requests per second per hub, sustained (429 above the burst)."""
    hub_burst: int = 100
    secret_over_http: bool = False
    """Send ``hub.secret`` to an ``http://`` hub too. WebSub 5.1: only over HTTPS, since anyone
    on the path reads it and can then sign forged pushes; without it such a subscription has no
    secret, and its pushes are accepted on the callback's unguessable URL alone."""

    def __post_init__(self) -> None:
        if self.lease_s < 60 or not 0.1 <= self.renew_at < 1.0 or self.verify_timeout_s <= 0 \
                or self.backoff_base_s <= 0 or self.backoff_max_s < self.backoff_base_s \
                or self.max_body_bytes < 1024 or self.hub_rate_per_s <= 0 or self.hub_burst < 1:
            raise ValueError("SubscriberSettings: lease_s >= 60, 0.1 <= renew_at < 1, positive "
                             "timeouts, rates and caps, backoff_max_s >= backoff_base_s")


class HubRequest(msgspec.Struct, frozen=True):
    """A subscription request to POST to ``hub`` (section 5.1)."""

    mode: str
    """``subscribe`` or ``unsubscribe``."""
    hub: str
    topic: str
    callback_id: str
    secret: str = ""
    lease_s: int = 0


class Verdict(msgspec.Struct, frozen=True):
    """How to answer a hub's GET to the callback: ``status`` and ``body`` (the challenge)."""

    status: int
    body: str = ""
    reason: str = ""


def backoff_s(lease: WebSubLease, attempts: int, settings: SubscriberSettings) -> float:
    """Wait after the ``attempts``-th failure in a row: doubling, capped, with a jitter of up to
    25% drawn from the callback id (deterministic: the same lease backs off the same way)."""
    base = min(settings.backoff_max_s, settings.backoff_base_s * 2.0 ** max(0, attempts - 1))
    jitter = (zlib.crc32(lease.callback_id.encode()) % 1000) / 4000.0
    return min(settings.backoff_max_s, base * (1.0 + jitter))


def new_lease(feed_id: int, topic: str, hub: str, callback_id: str, secret: str,
              now: float) -> WebSubLease:
    """A subscription to ask for now."""
    return WebSubLease(callback_id=callback_id, feed_id=feed_id, topic=topic, hub=hub,
                       secret=secret, state="subscribing", next_at=now, updated_at=now)


def is_live(lease: WebSubLease, now: float) -> bool:
    """Pushes are expected: the hub verified the subscription and its lease holds."""
    return lease.state == "active" and now < lease.expires_at


def _failed(lease: WebSubLease, why: str, now: float, settings: SubscriberSettings,
            state: str | None = None) -> WebSubLease | None:
    attempts = lease.attempts + 1
    if lease.state == "unsubscribing" and attempts >= settings.unsubscribe_attempts:
        return None  # give up: the hub's lease ends on its own
    return msgspec.structs.replace(lease, state=state or lease.state, awaiting=False,
                                   attempts=attempts, last_error=why[:500], updated_at=now,
                                   next_at=now + backoff_s(lease, attempts, settings))


def step(lease: WebSubLease, now: float,
         settings: SubscriberSettings) -> tuple[WebSubLease | None, HubRequest | None]:
    """What the time ``now`` does to a lease: nothing, a request to send (the lease then awaits
    its verification), or a verification that did not come in time (backoff). None: delete."""
    if now < lease.next_at:
        return lease, None
    if lease.awaiting:
        mode = "unsubscribe" if lease.state == "unsubscribing" else "subscribe"
        return _failed(lease, f"the hub did not verify our {mode} request within "
                              f"{settings.verify_timeout_s:g} s", now, settings), None
    mode = "unsubscribe" if lease.state == "unsubscribing" else "subscribe"
    request = HubRequest(mode=mode, hub=lease.hub, topic=lease.topic,
                         callback_id=lease.callback_id,
                         secret=lease.secret if mode == "subscribe" else "",
                         lease_s=settings.lease_s if mode == "subscribe" else 0)
    return msgspec.structs.replace(lease, awaiting=True, updated_at=now,
                                   next_at=now + settings.verify_timeout_s), request


def on_response(lease: WebSubLease, status: int | None, error: str, now: float,
                settings: SubscriberSettings) -> WebSubLease | None:
    """The hub answered our request (``status``; None with ``error``: no answer at all). 2xx:
    the verification is awaited (it may even have come already). Else: backoff."""
    if not lease.awaiting:
        return lease  # verified (or given up) while the request's answer was on its way
    if status is not None and 200 <= status < 300:
        return lease
    why = error or f"the hub answered HTTP {status}"
    return _failed(lease, why, now, settings)


def on_verification(lease: WebSubLease | None, mode: str, topic: str, challenge: str,
                    lease_seconds: str, reason: str, now: float,
                    settings: SubscriberSettings) -> tuple[WebSubLease | None, Verdict]:
    """A hub's GET to the callback (section 5.3, and 5.2's denial). Returns the lease as it is
    now (None: delete it) and how to answer."""
    if lease is None:
        return None, Verdict(404, "unknown callback", "no subscription at this callback")
    if topic != lease.topic:
        return lease, Verdict(404, "unknown topic", f"topic {topic[:200]!r} is not "
                                                    f"{lease.topic!r}")
    if mode == "denied":
        if lease.state == "unsubscribing":
            return None, Verdict(200, "", "denied while unsubscribing: gone")
        why = f"the hub denied the subscription: {reason[:300] or '(no reason given)'}"
        return _failed(lease, why, now, settings, state="denied"), Verdict(200, "", why)
    if mode not in ("subscribe", "unsubscribe"):
        return lease, Verdict(400, "unknown hub.mode", f"hub.mode {mode[:40]!r}")
    wanted = "unsubscribe" if lease.state == "unsubscribing" else "subscribe"
    if not lease.awaiting or mode != wanted:
        return lease, Verdict(404, "not pending", f"{mode} was not asked for "
                                                  f"(state {lease.state})")
    if not challenge:
        return lease, Verdict(400, "hub.challenge missing", "no hub.challenge")
    if mode == "unsubscribe":
        return None, Verdict(200, challenge, "unsubscribed")
    granted = float(settings.lease_s)
    if lease_seconds.strip().isdigit() and int(lease_seconds.strip()) > 0:
        granted = float(min(int(lease_seconds.strip()), 10 * 365 * 86400))
    renew = max(settings.min_renew_s, settings.renew_at * granted)
    active = msgspec.structs.replace(lease, state="active", awaiting=False, attempts=0,
                                     lease_s=granted, expires_at=now + granted,
                                     next_at=now + renew, last_error="", updated_at=now)
    return active, Verdict(200, challenge, "subscribed")


def unsubscribe(lease: WebSubLease, now: float) -> WebSubLease | None:
    """The feed is gone from the crawl: ask the hub to stop. None: nothing to undo (the hub
    never held the subscription, nor was asked to)."""
    if lease.state == "unsubscribing":
        return lease
    if lease.state != "active" and not lease.awaiting:
        return None
    return msgspec.structs.replace(lease, state="unsubscribing", awaiting=False, attempts=0,
                                   next_at=now, updated_at=now, last_error="")
