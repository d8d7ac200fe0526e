"""What every HubState must do (:mod:`feedmesh.store.ports`): accounts and their tokens,
subscriptions, follows, and a change log that forgets nothing. Run against each implementation
(tests/store/conftest.py)."""

from __future__ import annotations

import msgspec
import numpy as np

from feedmesh.store import FollowedSource, PushAttempt, PushTarget


def test_api_tokens_authenticate_rotate_and_refuse_garbage(hub_state):
    account, token = hub_state.create_account("ann", 1.0)
    assert token.startswith(f"fm_{account.id}_")
    assert hub_state.authenticate(token) == account
    rotated = hub_state.rotate_token(account.id)
    assert hub_state.authenticate(token) is None
    assert hub_state.authenticate(rotated).id == account.id
    for bad in ("", "fm_", "fm_1_", "xx_1_abc", "fm_²_abc", "fm_1" + "0" * 30 + "_abc",
                f"fm_{account.id}_{'a' * 300}", f"fm_{account.id + 1}_{rotated.split('_', 2)[2]}"):
        assert hub_state.authenticate(bad) is None, bad


def test_subscriptions_belong_to_their_account(hub_state):
    ann, _ = hub_state.create_account("ann", 1.0)
    bob, _ = hub_state.create_account("bob", 1.0)
    a = hub_state.add_subscription(ann.id, name="law", query="law", keep=5, reflector=1, now=2.0)
    b = hub_state.add_subscription(bob.id, name="", query="music", keep=10, reflector=0, now=3.0)
    assert hub_state.subscription(a.id) == a and a.generation == 0 and a.reflector == 1
    assert hub_state.subscriptions(ann.id) == [a]
    assert hub_state.subscriptions() == [a, b]
    assert hub_state.count_subscriptions(bob.id) == 1
    assert hub_state.subscription(10**9) is None


def test_changes_keep_what_was_not_changed_and_new_urls_bump_the_generation(hub_state):
    ann, _ = hub_state.create_account("ann", 1.0)
    sub = hub_state.add_subscription(ann.id, name="n", query="law", keep=5, reflector=0, now=2.0)
    changed = hub_state.change_subscription(sub.id, now=3.0, keep=7, new_url=True)
    assert (changed.name, changed.query, changed.keep, changed.generation) == ("n", "law", 7, 1)
    assert changed.created_at == 2.0 and changed.changed_at == 3.0
    assert hub_state.delete_subscription(sub.id)
    assert not hub_state.delete_subscription(sub.id)
    assert hub_state.change_subscription(sub.id, now=4.0, name="x") is None


def test_the_change_log_names_every_subscription_changed_since(hub_state):
    ann, _ = hub_state.create_account("ann", 1.0)
    assert hub_state.change_seq() == 0
    a = hub_state.add_subscription(ann.id, name="", query="a", keep=5, reflector=0, now=1.0)
    b = hub_state.add_subscription(ann.id, name="", query="b", keep=5, reflector=0, now=1.0)
    mark = hub_state.change_seq()
    assert mark > 0 and hub_state.changed_since(mark) == []
    hub_state.change_subscription(a.id, now=2.0, query="aa")
    c = hub_state.add_subscription(ann.id, name="", query="c", keep=5, reflector=0, now=2.0)
    hub_state.delete_subscription(b.id)
    assert sorted(hub_state.changed_since(mark)) == sorted([a.id, b.id, c.id])
    assert hub_state.change_seq() > mark
    assert dict(hub_state.queries()) == {a.id: "aa", c.id: "c"}
    assert list(hub_state.queries([c.id, 10**9])) == [(c.id, "c")]


def test_columns_for_start_up(hub_state):
    ann, _ = hub_state.create_account("ann", 1.0)
    hub_state.add_subscriptions([(ann.id, "", f"q{n}", 3 + n, n % 2) for n in range(5)], 9.0)
    columns = hub_state.subscription_columns()
    assert columns["id"].dtype == np.int64 and len(columns["id"]) == 5
    assert columns["keep"].tolist() == [3, 4, 5, 6, 7]
    assert columns["reflector"].tolist() == [0, 1, 0, 1, 0]
    assert columns["generation"].tolist() == [0] * 5
    assert columns["created_at"].tolist() == [9.0] * 5


def test_follows_are_counted_per_feed(hub_state):
    ann, _ = hub_state.create_account("ann", 1.0)
    bob, _ = hub_state.create_account("bob", 1.0)
    assert hub_state.follow_source(ann.id, 7, "Seven", 2.0)
    assert not hub_state.follow_source(ann.id, 7, "Seven again", 3.0)  # already followed
    assert hub_state.follow_source(bob.id, 7, "7", 2.0)
    assert hub_state.follow_source(bob.id, 8, "8", 2.5)
    assert hub_state.followers() == {7: 2, 8: 1}
    assert hub_state.follow_source(ann.id, 9, "Nine", 4.0, category="News/Tech",
                                   html_url="http://nine.example/")
    assert hub_state.sources(bob.id) == [FollowedSource(feed_id=7, title="7", added_at=2.0),
                                         FollowedSource(feed_id=8, title="8", added_at=2.5)]
    assert hub_state.sources(ann.id)[1] == FollowedSource(
        feed_id=9, title="Nine", added_at=4.0, category="News/Tech",
        html_url="http://nine.example/")
    assert hub_state.unfollow_source(bob.id, 7) and not hub_state.unfollow_source(bob.id, 7)
    assert hub_state.followers() == {7: 1, 8: 1, 9: 1}


def test_everything_survives_a_restart(hub_state_opener):
    state = hub_state_opener()
    ann, token = state.create_account("ann", 1.0)
    sub = state.add_subscription(ann.id, name="", query="law", keep=5, reflector=0, now=2.0)
    state.follow_source(ann.id, 3, "Three", 2.0)
    seq = state.change_seq()
    state.close()
    state = hub_state_opener()
    assert state.authenticate(token) == ann
    assert state.subscription(sub.id) == sub
    assert state.followers() == {3: 1} and state.change_seq() == seq
    state.close()


def _websub(sub_id: int, url: str, **fields) -> PushTarget:
    return PushTarget(**{"sub_id": sub_id, "kind": "websub", "url": url,
                         "topic": f"http://hub.test/f/{sub_id}.atom", "format": "atom1.0",
                         "secret": "s", "lease_seconds": 60, "expires_at": 100.0,
                         "created_at": 40.0, **fields})


def test_push_targets_are_keyed_by_topic_and_callback_and_updated_in_place(hub_state):
    ann, _ = hub_state.create_account("ann", 1.0)
    a = hub_state.add_subscription(ann.id, name="", query="a", keep=5, reflector=0, now=1.0)
    b = hub_state.add_subscription(ann.id, name="", query="b", keep=5, reflector=0, now=1.0)
    first = hub_state.save_push_target(_websub(a.id, "http://cb.test/1"))
    assert first.id > 0 and first.secret == "s" and first.expires_at == 100.0
    again = hub_state.save_push_target(_websub(a.id, "http://cb.test/1", secret="",
                                               lease_seconds=90, expires_at=130.0))
    assert again.id == first.id and (again.secret, again.lease_seconds) == ("", 90)
    assert again.created_at == 40.0  # when it first subscribed
    other = hub_state.save_push_target(_websub(a.id, "http://cb.test/2"))
    hook = hub_state.save_push_target(PushTarget(sub_id=b.id, kind="webhook",
                                                 url="http://cb.test/1", secret="w",
                                                 created_at=2.0))
    assert hook.expires_at is None and hook.topic == ""
    assert hub_state.push_targets(a.id) == [again, other]
    assert hub_state.push_targets() == [again, other, hook]
    assert hub_state.delete_push_target(other.id) and not hub_state.delete_push_target(other.id)
    hub_state.delete_subscription(a.id)  # its targets go with it
    assert hub_state.push_targets() == [hook]


def test_delivery_marks_start_where_given_move_only_forward_and_survive_resubscribing(
        hub_state):
    ann, _ = hub_state.create_account("ann", 1.0)
    sub = hub_state.add_subscription(ann.id, name="", query="a", keep=5, reflector=0, now=1.0)
    one = hub_state.save_push_target(_websub(sub.id, "http://cb.test/1", delivered_before=40.0))
    two = hub_state.save_push_target(_websub(sub.id, "http://cb.test/2"))
    assert (one.delivered_before, two.delivered_before) == (40.0, 0.0)
    hub_state.mark_push_targets({one.id: 50.5, two.id: 7.25})
    hub_state.mark_push_targets({one.id: 45.0})  # an older mark, written late: ignored
    hub_state.mark_push_targets({})
    assert [t.delivered_before for t in hub_state.push_targets(sub.id)] == [50.5, 7.25]
    again = hub_state.save_push_target(_websub(sub.id, "http://cb.test/1", secret="new",
                                               delivered_before=60.0))
    assert again.id == one.id and again.delivered_before == 50.5  # the worker's, not the web's
    hub_state.delete_push_target(two.id)
    hub_state.mark_push_targets({two.id: 99.0})  # deleted meanwhile: skipped
    assert [t.id for t in hub_state.push_targets()] == [one.id]


def test_a_signature_method_is_saved_changed_and_kept_when_subscribing_again(
        hub_state_opener):
    state = hub_state_opener()
    ann, _ = state.create_account("ann", 1.0)
    sub = state.add_subscription(ann.id, name="", query="a", keep=5, reflector=0, now=1.0)
    plain = state.save_push_target(_websub(sub.id, "http://cb.test/1"))
    chosen = state.save_push_target(_websub(sub.id, "http://cb.test/2", signature="sha512"))
    assert (plain.signature, chosen.signature) == ("sha256", "sha512")
    changed = state.set_push_signature(plain.id, "sha1")
    assert changed == msgspec.structs.replace(plain, signature="sha1")
    assert state.set_push_signature(chosen.id + 999, "sha1") is None
    # The subscriber subscribes again (the hub's default in the request): the owner's choice stays.
    again = state.save_push_target(_websub(sub.id, "http://cb.test/1", secret="new",
                                           signature="sha256"))
    assert again.id == plain.id and (again.secret, again.signature) == ("new", "sha1")
    state.close()
    state = hub_state_opener()
    try:
        assert [t.signature for t in state.push_targets(sub.id)] == ["sha1", "sha512"]
    finally:
        state.close()


def test_the_delivery_log_keeps_the_newest_attempts_of_each_target(hub_state):
    ann, _ = hub_state.create_account("ann", 1.0)
    sub = hub_state.add_subscription(ann.id, name="", query="a", keep=5, reflector=0, now=1.0)
    one = hub_state.save_push_target(PushTarget(sub_id=sub.id, kind="webhook", url="http://a.test/",
                                                created_at=1.0))
    two = hub_state.save_push_target(PushTarget(sub_id=sub.id, kind="webhook", url="http://b.test/",
                                                created_at=1.0))
    hub_state.record_push_attempts([PushAttempt(target_id=one.id, at=float(n), attempt=1,
                                                status=200 + n, entries=n) for n in range(5)]
                                   + [PushAttempt(target_id=two.id, at=9.0, attempt=3,
                                                  status=0, error="refused")], keep=3)
    assert [a.status for a in hub_state.push_attempts(one.id)] == [204, 203, 202]
    assert hub_state.push_attempts(one.id, limit=1)[0].entries == 4
    assert hub_state.push_attempts(two.id) == [PushAttempt(target_id=two.id, at=9.0, attempt=3,
                                                           status=0, error="refused")]
    hub_state.delete_push_target(two.id)
    hub_state.record_push_attempts([PushAttempt(target_id=two.id, at=10.0, attempt=1,
                                                status=200)])  # deleted meanwhile: skipped
    assert hub_state.push_attempts(two.id) == []


def test_push_targets_survive_a_restart(hub_state_opener):
    state = hub_state_opener()
    ann, _ = state.create_account("ann", 1.0)
    sub = state.add_subscription(ann.id, name="", query="a", keep=5, reflector=0, now=1.0)
    saved = state.save_push_target(_websub(sub.id, "http://cb.test/1"))
    state.close()
    state = hub_state_opener()
    try:
        assert state.push_targets() == [saved]
    finally:
        state.close()


def test_websub_leases_are_saved_replaced_and_deleted_across_restarts(hub_state_opener):
    from feedmesh.model import WebSubLease

    state = hub_state_opener()
    assert state.websub_leases() == []
    a = WebSubLease(callback_id="cb-a", feed_id=7, topic="http://pub.test/feed",
                    hub="http://hub.test/", secret="s3cret", state="subscribing", next_at=5.0,
                    updated_at=1.0)
    b = WebSubLease(callback_id="cb-b", feed_id=8, topic="http://pub.test/other",
                    hub="http://hub.test/", awaiting=True, next_at=6.5)
    state.save_websub_leases([a, b], [])
    assert state.websub_leases() == [a, b]
    active = WebSubLease(callback_id="cb-a", feed_id=7, topic=a.topic, hub=a.hub, secret="s3cret",
                         state="active", lease_s=864000.0, expires_at=864100.0, next_at=734500.0,
                         attempts=0, last_error="", updated_at=100.0)
    state.save_websub_leases([active], ["cb-b", "cb-never"])
    state.close()
    again = hub_state_opener()
    assert again.websub_leases() == [active]
    again.save_websub_leases([], [])
    assert again.websub_leases() == [active]
    again.close()
