"""The subscription state machine, driven by a manual time: what to send, when, and how each
verification, denial and failure moves a lease (WebSub sections 5-7)."""

from __future__ import annotations

import itertools

import msgspec
import pytest

from feedmesh.websub.discovery import Discovery
from feedmesh.websub.lease import SubscriberSettings, backoff_s, is_live, new_lease, step
from feedmesh.websub.signature import sign
from feedmesh.websub.subscriber import Subscriptions

S = SubscriberSettings(lease_s=1000, verify_timeout_s=30.0, backoff_base_s=10.0,
                       backoff_max_s=100.0, unsubscribe_attempts=3, hub_rate_per_s=1.0,
                       hub_burst=3, max_body_bytes=2048)
TOPIC, HUB = "http://pub.test/feed", "https://hub.test/"


def subs() -> Subscriptions:
    counter = itertools.count()
    return Subscriptions(S, lambda: f"tok{next(counter)}")


def subscribed(now: float = 0.0) -> tuple[Subscriptions, str]:
    s = subs()
    s.discovered(1, Discovery(topic=TOPIC, hubs=(HUB,)), now)
    (request,) = s.due(now)
    return s, request.callback_id


def verify_params(mode: str, challenge: str = "c1", lease: str = "1000", topic: str = TOPIC):
    return {"hub.mode": mode, "hub.topic": topic, "hub.challenge": challenge,
            "hub.lease_seconds": lease}


def test_a_secret_goes_to_https_hubs_only_unless_allowed():
    """WebSub 5.1: hub.secret only over HTTPS."""
    for allowed, hub, has_secret in ((False, "http://hub.test/", False),
                                     (False, "HTTPS://hub.test/", True),
                                     (True, "http://hub.test/", True)):
        s = Subscriptions(msgspec.structs.replace(S, secret_over_http=allowed), lambda: "tok")
        s.discovered(1, Discovery(topic=TOPIC, hubs=(hub,)), 0.0)
        (request,) = s.due(0.0)
        assert bool(request.secret) is has_secret, (allowed, hub)


def test_subscribe_asks_with_a_secret_and_a_lease_then_verification_makes_it_live():
    s = subs()
    s.discovered(1, Discovery(topic=TOPIC, hubs=(HUB,)), 0.0)
    assert s.next_at() == 0.0
    (request,) = s.due(0.0)
    assert (request.mode, request.hub, request.topic, request.lease_s) == (
        "subscribe", HUB, TOPIC, 1000)
    assert request.secret and request.secret != request.callback_id
    assert s.due(1.0) == []  # awaiting: nothing more to send
    s.response(request.callback_id, 202, "", 0.1)
    assert s.live_feeds(1.0) == set()
    verdict = s.verification(request.callback_id, verify_params("subscribe", lease="500"), 2.0)
    assert (verdict.status, verdict.body) == (200, "c1")
    assert s.live_feeds(3.0) == {1}
    lease = s.leases[request.callback_id]
    assert lease.expires_at == 502.0 and lease.next_at == pytest.approx(2.0 + 0.85 * 500)
    assert s.live_feeds(502.0) == set()  # the lease ran out


@pytest.mark.parametrize(("params", "status", "why"), [
    # websub.rocks 205: a verification for another topic is refused
    (verify_params("subscribe", topic="http://evil.test/"), 404, "unknown topic"),
    (verify_params("unsubscribe"), 404, "not pending"),
    ({"hub.mode": "subscribe", "hub.topic": TOPIC}, 400, "hub.challenge missing"),
    (verify_params("publish"), 400, "unknown hub.mode"),
])
def test_verifications_we_did_not_ask_for_are_refused(params, status, why):
    s, callback = subscribed()
    verdict = s.verification(callback, params, 1.0)
    assert (verdict.status, verdict.body) == (status, why)
    assert s.live_feeds(2.0) == set()


def test_unknown_callbacks_and_unasked_renewals_get_404():
    s, callback = subscribed()
    assert s.verification("nope", verify_params("subscribe"), 1.0).status == 404
    assert s.verification(callback, verify_params("subscribe"), 1.0).status == 200
    # active, nothing asked: a second verification is not echoed
    assert s.verification(callback, verify_params("subscribe", "c2"), 2.0).status == 404


def test_renewal_goes_out_before_the_lease_ends_and_keeps_it_live():
    s, callback = subscribed()
    s.verification(callback, verify_params("subscribe", lease="1000"), 0.0)
    assert s.due(849.0) == []
    (renewal,) = s.due(850.0)
    assert renewal.mode == "subscribe" and renewal.callback_id == callback
    assert s.live_feeds(851.0) == {1}  # still live while the renewal is verified
    assert s.verification(callback, verify_params("subscribe", "c3", "1000"), 860.0).body == "c3"
    assert s.leases[callback].expires_at == 1860.0


def test_no_verification_in_time_backs_off_and_asks_again():
    s, callback = subscribed()
    assert s.next_at() == 30.0
    assert s.due(30.0) == []  # the wait ends: a failure, backoff
    lease = s.leases[callback]
    assert lease.attempts == 1 and not lease.awaiting and "did not verify" in lease.last_error
    assert lease.next_at == 30.0 + backoff_s(lease, 1, S)
    (again,) = s.due(lease.next_at)
    assert again.mode == "subscribe"


@pytest.mark.parametrize(("status", "error"), [(404, ""), (500, ""), (None, "connection refused")])
def test_a_refused_request_backs_off_doubling_to_the_cap(status, error):
    s, callback = subscribed()
    now, waits = 0.0, []
    for _ in range(6):
        s.response(callback, status, error, now)
        lease = s.leases[callback]
        waits.append(lease.next_at - now)
        now = lease.next_at
        (_request,) = s.due(now)
    assert waits[0] < waits[1] < waits[2] < waits[3] and max(waits) <= S.backoff_max_s
    assert (error or str(status)) in s.leases[callback].last_error


def test_a_denial_ends_pushes_and_resubscribes_after_a_backoff():
    s, callback = subscribed()
    s.verification(callback, verify_params("subscribe"), 1.0)
    assert s.live_feeds(2.0) == {1}
    verdict = s.verification(callback, {"hub.mode": "denied", "hub.topic": TOPIC,
                                        "hub.reason": "quota"}, 5.0)
    assert verdict.status == 200
    lease = s.leases[callback]
    assert lease.state == "denied" and "quota" in lease.last_error
    assert s.live_feeds(6.0) == set()
    assert s.due(lease.next_at - 0.01) == []
    (again,) = s.due(lease.next_at)
    assert again.mode == "subscribe"
    answer = s.verification(callback, verify_params("subscribe", "c9"), lease.next_at + 1)
    assert answer.body == "c9"


def test_removing_the_feed_unsubscribes_and_the_verification_deletes_the_lease():
    s, callback = subscribed()
    s.verification(callback, verify_params("subscribe"), 1.0)
    s.take_changes()
    s.remove_feed(1, 10.0)
    assert s.live_feeds(10.0) == set()
    (request,) = s.due(10.0)
    assert request.mode == "unsubscribe" and request.secret == "" and request.lease_s == 0
    # a late subscribe verification is not echoed any more
    assert s.verification(callback, verify_params("subscribe", "x"), 11.0).status == 404
    assert s.verification(callback, verify_params("unsubscribe", "bye"), 11.0).body == "bye"
    assert s.leases == {}
    assert s.take_changes() == ([], [callback])


def test_an_unsubscription_that_keeps_failing_is_given_up():
    s, callback = subscribed()
    s.verification(callback, verify_params("subscribe"), 1.0)
    s.remove_feed(1, 10.0)
    now = 10.0
    for _ in range(S.unsubscribe_attempts):
        requests = s.due(now)
        assert [r.mode for r in requests] == ["unsubscribe"]
        s.response(callback, 503, "", now)
        if callback not in s.leases:
            break
        now = s.leases[callback].next_at
    assert callback not in s.leases


def test_a_never_confirmed_subscription_is_simply_forgotten_when_the_feed_goes():
    s, callback = subscribed()
    s.response(callback, 500, "", 0.0)  # refused: nothing at the hub to undo
    s.remove_feed(1, 1.0)
    assert s.leases == {} and s.due(1.0) == []


def test_a_changed_hub_or_topic_unsubscribes_the_old_and_subscribes_the_new():
    s, callback = subscribed()
    s.verification(callback, verify_params("subscribe"), 1.0)
    s.discovered(1, Discovery(topic="http://pub.test/moved", hubs=(HUB,)), 2.0)
    modes = sorted((r.mode, r.topic) for r in s.due(2.0))
    assert modes == [("subscribe", "http://pub.test/moved"), ("unsubscribe", TOPIC)]
    # the same advertisement again changes nothing
    s.discovered(1, Discovery(topic="http://pub.test/moved", hubs=(HUB,)), 3.0)
    assert s.due(3.0) == []


def test_content_is_checked_for_signature_size_rate_and_callback():
    s, callback = subscribed()
    s.verification(callback, verify_params("subscribe"), 0.0)
    secret = s.leases[callback].secret
    body = b"<feed/>"
    ok = s.content(callback, sign(secret, body, "sha1"), body, 1.0)
    assert (ok.status, ok.accept, ok.feed_id) == (202, True, 1)
    cases = [
        (None, body, 202, "bad_signature"),  # websub.rocks 302: no signature
        (sign("wrong", body), body, 202, "bad_signature"),  # 301: invalid signature
    ]
    for signature, payload, status, kind in cases:
        verdict = s.content(callback, signature, payload, 2.0)
        assert (verdict.status, verdict.accept, verdict.kind) == (status, False, kind)
    # at 2.0 the bucket is full again (3): one more, then the hub is slowed down
    assert s.content(callback, sign(secret, body), body, 2.0).accept
    assert s.content(callback, sign(secret, body), body, 2.0).status == 429
    big = b"x" * 4096
    assert s.content(callback, sign(secret, big), big, 10.0).kind == "too_large"
    assert s.content("nope", None, body, 10.0).status == 410


@pytest.mark.parametrize("method", ["sha1", "sha256", "sha384", "sha512"])
def test_every_signature_method_is_accepted(method):
    s, callback = subscribed()
    s.verification(callback, verify_params("subscribe"), 0.0)
    secret = s.leases[callback].secret
    assert s.content(callback, sign(secret, b"b", method), b"b", 1.0).accept


def test_unknown_signature_methods_are_dropped():
    s, callback = subscribed()
    s.verification(callback, verify_params("subscribe"), 0.0)
    verdict = s.content(callback, "md5=0123", b"b", 1.0)
    assert (verdict.status, verdict.accept) == (202, False) and "md5" in verdict.reason


def test_changes_are_handed_out_once_for_persistence():
    s, callback = subscribed()
    changed, deleted = s.take_changes()
    assert [lease.callback_id for lease in changed] == [callback] and deleted == []
    assert s.take_changes() == ([], [])
    restored = subs()
    restored.load(changed)
    assert restored.leases == {callback: changed[0]} and restored.take_changes() == ([], [])


def test_step_is_idle_before_next_at_and_is_live_needs_active():
    lease = new_lease(1, TOPIC, HUB, "cb", "sec", 5.0)
    assert step(lease, 4.0, S) == (lease, None)
    assert not is_live(lease, 5.0)
