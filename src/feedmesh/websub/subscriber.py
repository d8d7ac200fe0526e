"""The subscriber's sans-IO core: every push subscription of a hub, what to send when, and how to
answer each callback request. Time, randomness and messages go in; requests, verdicts, timers
and the leases to persist come out. The aiohttp edge (:mod:`feedmesh.hub.tiers.websub_subscriber`)
carries them; tests drive it with a manual clock.

* :meth:`Subscriptions.discovered`: after a document of a feed was parsed, what its publisher
  advertises (:func:`~feedmesh.websub.discovery.discover`): subscribe to new topic/hub pairs,
  unsubscribe from pairs no longer advertised;
* :meth:`Subscriptions.remove_feed`: the feed left the crawl: unsubscribe;
* :meth:`Subscriptions.due` / :meth:`Subscriptions.next_at`: the requests to send now, and
  when to look again;
* :meth:`Subscriptions.verification` / :meth:`Subscriptions.content`: a hub's GET and POST to a
  callback, each answered from the lease alone;
* :meth:`Subscriptions.take_changes`: the leases changed or deleted since last asked, for the
  hub's state store.

Content is checked here (known callback, subscription not being removed, size, the hub's rate,
``X-Hub-Signature`` when a secret was given); what passes is the feed's to ingest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec

from feedmesh.model import WebSubLease
from feedmesh.websub.discovery import Discovery
from feedmesh.websub.lease import (
    HubRequest,
    SubscriberSettings,
    Verdict,
    is_live,
    new_lease,
    on_response,
    on_verification,
    step,
    unsubscribe,
)
from feedmesh.websub.signature import SignatureError, verify

__all__ = ["Delivery", "Subscriptions"]


class Delivery(msgspec.Struct, frozen=True):
    """What to do with a POST to a callback: answer ``status``; ingest the body for ``feed_id``
    when ``accept``; ``reason`` says why not (logged and counted as ``kind``)."""

    status: int
    accept: bool = False
    feed_id: int | None = None
    kind: str = ""
    reason: str = ""


class _Bucket:
    __slots__ = ("stamp", "tokens")

    def __init__(self, tokens: float, stamp: float) -> None:
        self.tokens = tokens
        self.stamp = stamp


class Subscriptions:
    """Every lease of one hub, by callback id. ``token()`` draws a random, URL-safe string
    (callback ids and secrets): the one source of randomness, injected."""

    def __init__(self, settings: SubscriberSettings, token: Callable[[], str]) -> None:
        self.settings = settings
        self.token = token
        self.leases: dict[str, WebSubLease] = {}
        self._by_feed: dict[int, set[str]] = {}
        self._changed: set[str] = set()
        self._deleted: set[str] = set()
        self._buckets: dict[str, _Bucket] = {}

    # -- the leases ---------------------------------------------------------------------------

    def load(self, leases: Iterable[WebSubLease]) -> None:
        for lease in leases:
            self._put(lease, changed=False)

    def _put(self, lease: WebSubLease, *, changed: bool = True) -> None:
        self.leases[lease.callback_id] = lease
        self._by_feed.setdefault(lease.feed_id, set()).add(lease.callback_id)
        if changed:
            self._changed.add(lease.callback_id)
            self._deleted.discard(lease.callback_id)

    def _drop(self, callback_id: str) -> None:
        lease = self.leases.pop(callback_id, None)
        if lease is None:
            return
        ids = self._by_feed.get(lease.feed_id)
        if ids is not None:
            ids.discard(callback_id)
            if not ids:
                del self._by_feed[lease.feed_id]
        self._changed.discard(callback_id)
        self._deleted.add(callback_id)

    def _set(self, callback_id: str, lease: WebSubLease | None) -> None:
        if lease is None:
            self._drop(callback_id)
        elif lease is not self.leases.get(callback_id):
            self._put(lease)

    def of_feed(self, feed_id: int) -> list[WebSubLease]:
        return [self.leases[c] for c in sorted(self._by_feed.get(feed_id, ()))]

    def take_changes(self) -> tuple[list[WebSubLease], list[str]]:
        """Leases changed and callback ids deleted since the last call (to persist)."""
        changed = [self.leases[c] for c in sorted(self._changed) if c in self.leases]
        deleted = sorted(self._deleted)
        self._changed.clear()
        self._deleted.clear()
        return changed, deleted

    def live_feeds(self, now: float) -> set[int]:
        return {lease.feed_id for lease in self.leases.values() if is_live(lease, now)}

    # -- what the crawl tells ------------------------------------------------------------------

    def discovered(self, feed_id: int, found: Discovery, now: float) -> None:
        """The publisher of ``feed_id`` now advertises ``found``: subscribe to each advertised
        hub for its topic, unsubscribe from what it no longer advertises."""
        wanted = {(found.topic, hub) for hub in found.hubs}
        have = {(lease.topic, lease.hub): lease for lease in self.of_feed(feed_id)
                if lease.state != "unsubscribing"}
        for pair, lease in have.items():
            if pair not in wanted:
                self._set(lease.callback_id, unsubscribe(lease, now))
        for topic, hub in sorted(wanted - set(have)):
            self._put(new_lease(feed_id, topic, hub, self.token(), self._secret_for(hub), now))

    def _secret_for(self, hub: str) -> str:
        """A new lease's secret: none for an ``http://`` hub (WebSub 5.1: the secret travels
        over HTTPS only) unless the operator allowed it."""
        if hub.lower().startswith("https://") or self.settings.secret_over_http:
            return self.token()
        return ""

    def remove_feed(self, feed_id: int, now: float) -> None:
        for lease in self.of_feed(feed_id):
            self._set(lease.callback_id, unsubscribe(lease, now))

    # -- time ----------------------------------------------------------------------------------

    def next_at(self) -> float | None:
        """When :meth:`due` has something to do next (None: never, until told something)."""
        return min((lease.next_at for lease in self.leases.values()), default=None)

    def next_lapse(self, now: float) -> float | None:
        """When the next live lease ends unless renewed (None: none is live)."""
        return min((lease.expires_at for lease in self.leases.values() if is_live(lease, now)),
                   default=None)

    def due(self, now: float) -> list[HubRequest]:
        """Requests to send now; each lease asked then awaits its verification."""
        requests = []
        for callback_id, lease in list(self.leases.items()):
            if lease.next_at > now:
                continue
            after, request = step(lease, now, self.settings)
            self._set(callback_id, after)
            if request is not None:
                requests.append(request)
        return requests

    def response(self, callback_id: str, status: int | None, error: str, now: float) -> None:
        """The hub's answer to a request sent for ``callback_id`` (None: it never answered)."""
        lease = self.leases.get(callback_id)
        if lease is not None:
            self._set(callback_id, on_response(lease, status, error, now, self.settings))

    def hub_moved(self, callback_id: str, hub: str, now: float) -> None:
        """The hub answered from a new URL after a permanent redirect (308): ask it there from
        now on (websub.rocks 204)."""
        lease = self.leases.get(callback_id)
        if lease is not None and hub != lease.hub:
            self._put(msgspec.structs.replace(lease, hub=hub, updated_at=now))

    # -- the callback --------------------------------------------------------------------------

    def _rate(self, hub: str, now: float) -> bool:
        s = self.settings
        bucket = self._buckets.get(hub)
        if bucket is None:
            bucket = self._buckets[hub] = _Bucket(float(s.hub_burst), now)
        bucket.tokens = min(float(s.hub_burst),
                            bucket.tokens + max(0.0, now - bucket.stamp) * s.hub_rate_per_s)
        bucket.stamp = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def verification(self, callback_id: str, params: dict[str, str], now: float) -> Verdict:
        """Answer a hub's GET: echo the challenge of a request we are waiting for, else 404."""
        lease = self.leases.get(callback_id)
        if lease is not None and not self._rate(lease.hub, now):
            return Verdict(429, "too many requests", "the hub's callback rate was exceeded")
        after, verdict = on_verification(
            lease, params.get("hub.mode", ""), params.get("hub.topic", ""),
            params.get("hub.challenge", ""), params.get("hub.lease_seconds", ""),
            params.get("hub.reason", ""), now, self.settings)
        if lease is not None:
            self._set(callback_id, after)
        return verdict

    def content(self, callback_id: str, signature: str | None, body: bytes,
                now: float) -> Delivery:
        """Check a content distribution (section 7). A body we must drop for its signature is
        still answered 2xx (section 8: the sender learns nothing); unknown callbacks get 410
        Gone, which tells a hub to stop (section 7)."""
        lease = self.leases.get(callback_id)
        if lease is None:
            return Delivery(410, kind="unknown_callback",
                            reason="no subscription at this callback")
        if not self._rate(lease.hub, now):
            return Delivery(429, feed_id=lease.feed_id, kind="rate_limited",
                            reason=f"more than {self.settings.hub_rate_per_s:g}/s from "
                                   f"{lease.hub}")
        if lease.state == "unsubscribing":
            return Delivery(410, feed_id=lease.feed_id, kind="unsubscribing",
                            reason="this subscription is being removed")
        if len(body) > self.settings.max_body_bytes:
            return Delivery(413, feed_id=lease.feed_id, kind="too_large",
                            reason=f"body of {len(body)} bytes exceeds "
                                   f"{self.settings.max_body_bytes}")
        if lease.secret:
            try:
                verify(lease.secret, body, signature)
            except SignatureError as exc:
                return Delivery(202, feed_id=lease.feed_id, kind="bad_signature",
                                reason=str(exc))
        return Delivery(202, accept=True, feed_id=lease.feed_id, kind="accepted")
