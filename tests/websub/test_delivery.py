"""Per-target delivery queues (feedmesh.websub.delivery), driven by a manual clock."""

from __future__ import annotations

import pytest

from feedmesh.websub.delivery import DeliveryQueues, Outcome, RetryPolicy

POLICY = RetryPolicy(first_delay_s=1.0, factor=2.0, max_delay_s=5.0, max_failures=4)


def test_the_retry_delay_grows_and_is_capped():
    assert [POLICY.delay(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    with pytest.raises(ValueError):
        RetryPolicy(first_delay_s=0)


def test_one_send_in_flight_per_target_and_entries_in_order():
    queues = DeliveryQueues(POLICY, batch_max=2)
    for key in (1, 2, 3):
        queues.add("a", key, f"entry {key}")
    queues.add("b", 9)
    sends = queues.due(now=0.0)
    assert [(s.target, s.keys, s.payloads) for s in sends] == [
        ("a", (1, 2), ("entry 1", "entry 2")), ("b", (9,), (None,))]
    queues.add("a", 4, "entry 4")
    assert queues.due(now=0.0) == []  # a's first send is still in flight
    assert queues.finished(sends[0], True, now=0.1) is Outcome.DELIVERED
    (second,) = queues.due(now=0.1)
    assert second.keys == (3, 4) and second.attempt == 1
    assert queues.next_due() is None


def test_a_failure_puts_the_entries_back_in_front_after_a_backoff():
    queues = DeliveryQueues(POLICY)
    queues.add("a", 1)
    (first,) = queues.due(now=10.0)
    queues.add("a", 2)  # came while the first was in flight
    assert queues.finished(first, False, now=10.0) is Outcome.RETRY
    assert queues.next_due() == 11.0
    assert queues.due(now=10.9) == []
    (retry,) = queues.due(now=11.0)
    assert retry.keys == (1, 2) and retry.attempt == 2
    assert queues.finished(retry, False, now=11.0) is Outcome.RETRY
    assert queues.next_due() == 13.0  # 2 s after the second failure
    (third,) = queues.due(now=13.0)
    assert queues.finished(third, True, now=13.0) is Outcome.DELIVERED
    queues.add("a", 3)
    assert queues.due(now=13.0)[0].attempt == 1  # the failures were forgiven


def test_a_target_failing_too_often_is_dropped_and_one_removed_is_forgotten():
    queues = DeliveryQueues(POLICY)
    queues.add("a", 1)
    now, outcome = 0.0, None
    for _ in range(POLICY.max_failures):
        (send,) = queues.due(now)
        outcome = queues.finished(send, False, now)
        now = queues.next_due() or now
    assert outcome is Outcome.DROPPED and len(queues) == 0 and queues.due(1e9) == []
    queues.add("b", 1)
    (send,) = queues.due(0.0)
    queues.remove("b")
    assert queues.finished(send, True, 0.0) is Outcome.FORGOTTEN
    queues.add("c", 1)
    (send,) = queues.due(0.0)
    assert queues.finished(send, False, 0.0, give_up=True) is Outcome.DROPPED


def test_a_full_queue_drops_its_oldest_entries_and_counts_them():
    queues = DeliveryQueues(POLICY, max_pending=3, batch_max=10)
    for key in range(5):
        queues.add("a", key)
    assert queues.overflowed == 2
    assert queues.due(0.0)[0].keys == (2, 3, 4)


def test_the_oldest_waiting_entry_is_known_in_flight_or_not():
    """What the delivery worker's durable mark may not pass: the oldest entry still waiting."""
    queues = DeliveryQueues(RetryPolicy(first_delay_s=1.0), batch_max=2)
    assert queues.first_pending("t") is None
    for key in ("a", "b", "c"):
        queues.add("t", key, key.upper())
    (send,) = queues.due(0.0)
    assert send.payloads == ("A", "B") and queues.first_pending("t") == "C"
    assert queues.finished(send, False, 0.0) is Outcome.RETRY
    assert queues.first_pending("t") == "A"  # back in front
    (again,) = queues.due(5.0)
    queues.finished(again, True, 5.0)
    (last,) = queues.due(5.0)
    assert last.payloads == ("C",) and queues.first_pending("t") is None
