"""What fetch results mean for a host: the pure rule, on a clock the test moves."""

from __future__ import annotations

import pytest

from feedmesh.fetch.host_state import HostHealth, HostPolicy, host_of
from feedmesh.model import FetchOutcome

REFUSED = FetchOutcome.CONNECTION_ERROR
POLICY = HostPolicy(failures_to_pause=3, pause_s=60.0, pause_cap_s=200.0, probe_s=30.0)


def test_failures_to_reach_a_host_in_a_row_pause_it_and_an_answer_between_resets_the_count():
    health = HostHealth(POLICY)
    assert health.record("a", REFUSED, 0.0) is None
    assert health.record("a", FetchOutcome.TIMEOUT, 1.0) is None
    assert health.record("a", FetchOutcome.SERVER_ERROR, 2.0) is None  # it answered: count resets
    assert health.record("a", FetchOutcome.DNS_ERROR, 3.0) is None
    assert health.record("a", REFUSED, 4.0) is None
    assert health.may_fetch("a", 4.5)
    pause = health.record("a", REFUSED, 5.0, "connection refused")
    assert pause is not None
    assert (pause.host, pause.until, pause.failures, pause.pauses, pause.last_error) == \
        ("a", 65.0, 3, 1, "connection refused")
    assert not health.may_fetch("a", 6.0) and not health.may_fetch("a", 64.9)
    assert health.paused_until("a", 6.0) == 65.0 and health.paused(6.0) == {"a": 65.0}
    assert health.may_fetch("b", 6.0)  # other hosts are not touched
    assert health.paused_until("b", 6.0) == 0.0


def test_only_failures_to_reach_the_server_count():
    health = HostHealth(POLICY)
    for outcome in (FetchOutcome.NOT_FOUND, FetchOutcome.SERVER_ERROR, FetchOutcome.RATE_LIMITED,
                    FetchOutcome.PROTOCOL_ERROR, FetchOutcome.TOO_LARGE, FetchOutcome.BLOCKED,
                    FetchOutcome.INVALID_URL):
        for t in range(5):
            assert health.record("a", outcome, float(t)) is None, outcome
    assert health.may_fetch("a", 10.0)


def test_the_probe_after_a_pause_is_one_fetch_and_its_failure_doubles_the_pause_up_to_the_cap():
    health = HostHealth(POLICY)
    for t in range(3):
        health.record("a", REFUSED, float(t))
    assert health.paused_until("a", 3.0) == 62.0
    assert health.may_fetch("a", 62.0)  # the probe
    assert not health.may_fetch("a", 62.0) and not health.may_fetch("a", 91.0)  # others wait
    pause = health.record("a", REFUSED, 63.0)  # one failure is enough after a pause
    assert pause is not None and pause.pauses == 2 and pause.until == 63.0 + 120.0
    assert health.may_fetch("a", 183.0)
    pause = health.record("a", FetchOutcome.TIMEOUT, 190.0)
    assert pause is not None and pause.until == 190.0 + 200.0  # 240 capped at 200
    assert health.pauses("a") == 3


def test_a_probe_that_never_answers_lets_another_probe_after_probe_s():
    health = HostHealth(POLICY)
    for t in range(3):
        health.record("a", REFUSED, float(t))
    assert health.may_fetch("a", 70.0)
    assert not health.may_fetch("a", 99.9)
    assert health.may_fetch("a", 100.0)


def test_an_answer_ends_the_pause_and_the_next_run_of_failures_starts_from_the_first_pause():
    health = HostHealth(POLICY)
    for t in range(3):
        health.record("a", REFUSED, float(t))
    assert health.may_fetch("a", 62.0)
    assert health.record("a", FetchOutcome.NOT_MODIFIED, 62.5) is None
    assert health.pauses("a") == 0 and health.may_fetch("a", 63.0) and health.may_fetch("a", 63.0)
    for t in range(2):
        assert health.record("a", REFUSED, 70.0 + t) is None  # three in a row again, not one
    pause = health.record("a", REFUSED, 72.0)
    assert pause is not None and pause.pauses == 1 and pause.until == 132.0


def test_failures_of_fetches_in_flight_when_the_host_was_paused_do_not_extend_it():
    health = HostHealth(POLICY)
    for t in range(3):
        health.record("a", REFUSED, float(t))
    for t in range(10):
        assert health.record("a", REFUSED, 3.0 + t) is None
    assert health.paused_until("a", 20.0) == 62.0 and health.pauses("a") == 1


def test_an_answer_from_a_fetch_in_flight_ends_the_pause_at_once():
    health = HostHealth(POLICY)
    for t in range(3):
        health.record("a", REFUSED, float(t))
    health.record("a", FetchOutcome.OK, 4.0)
    assert health.may_fetch("a", 4.0) and health.paused(4.0) == {}


def test_pausing_can_be_turned_off_and_a_bad_policy_is_refused():
    health = HostHealth(HostPolicy(failures_to_pause=0))
    for t in range(50):
        assert health.record("a", REFUSED, float(t)) is None
    assert health.may_fetch("a", 50.0)
    with pytest.raises(ValueError, match="pause_s <= pause_cap_s"):
        HostPolicy(pause_s=100.0, pause_cap_s=10.0)
    with pytest.raises(ValueError, match="failures_to_pause >= 0"):
        HostPolicy(failures_to_pause=-1)


@pytest.mark.parametrize(("url", "host"), [
    ("http://Example.COM:8080/feed", "example.com"),
    ("https://127.0.3.7/f", "127.0.3.7"),
    ("http://[::1]:80/x", "::1"),
    ("not a url", ""),
    ("http://[bad/feed", ""),
])
def test_the_host_of_a_feed_url(url, host):
    assert host_of(url) == host
