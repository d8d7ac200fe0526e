"""`feedmesh up`'s supervision core on a manual clock: restarts with a pause that doubles and
resets once a role stayed up, a crash loop that leaves one role down and the others running,
and a stop request that ends every restart."""

from __future__ import annotations

import pytest

from feedmesh.compose.supervisor import (
    DOWN,
    RESTARTING,
    RUNNING,
    STOPPED,
    RestartPolicy,
    Supervisor,
)

POLICY = RestartPolicy(first_delay_s=0.5, max_delay_s=4.0, stable_after_s=30.0, burst=5,
                       window_s=60.0)


def started(supervisor: Supervisor, now: float = 0.0) -> Supervisor:
    for name in supervisor.roles:
        supervisor.started(name, now, restart=False)
        supervisor.ready(name, now)
    return supervisor


def test_a_role_that_exits_starts_again_after_a_pause_that_doubles_to_the_cap():
    s = started(Supervisor(["filter", "web"], POLICY))
    now, pauses = 0.0, []
    for _ in range(4):  # 4 exits within the window: not yet a crash loop
        now += 1.0
        at = s.exited("filter", now, -9)
        assert s.state("filter")[0] == RESTARTING
        assert s.due(at - 0.01) == [] and s.due(at) == ["filter"]
        pauses.append(at - now)
        now = at
        s.started("filter", now)
        assert s.state("filter") == (RESTARTING, len(pauses))  # started, not ready yet
        s.ready("filter", now)
        assert s.state("filter")[0] == RUNNING
    assert pauses == [0.5, 1.0, 2.0, 4.0]
    assert s.state("web") == (RUNNING, 0)  # one_for_one: the other role untouched


def test_the_pause_is_capped():
    s = started(Supervisor(["crawler"], RestartPolicy(first_delay_s=1.0, max_delay_s=3.0,
                                                      burst=100, window_s=1.0)))
    now, pauses = 0.0, []
    for _ in range(5):
        now += 2.0  # each exit alone in its window: no crash loop
        at = s.exited("crawler", now, 1)
        pauses.append(at - now)
        s.started("crawler", at)
        now = at
    assert pauses == [1.0, 2.0, 3.0, 3.0, 3.0]


def test_a_role_that_stayed_up_long_enough_starts_from_the_first_pause_again():
    s = started(Supervisor(["reflector"], POLICY))
    at = s.exited("reflector", 1.0, -9)
    s.started("reflector", at)
    at = s.exited("reflector", at + 1.0, -9)
    assert at == pytest.approx(2.5 + 1.0)  # the second pause: 1 s
    s.started("reflector", at)
    s.ready("reflector", at)
    later = at + POLICY.stable_after_s  # up for stable_after_s
    assert s.exited("reflector", later, -9) == later + POLICY.first_delay_s


def test_a_crash_loop_leaves_that_role_down_and_the_others_running():
    s = started(Supervisor(["filter", "reflector"], POLICY))
    now = 0.0
    for _ in range(POLICY.burst - 1):
        now += 1.0
        now = s.exited("filter", now, 2)
        s.started("filter", now)
    assert s.exited("filter", now + 1.0, 2) is None  # the 5th exit within 60 s
    assert s.state("filter") == (DOWN, POLICY.burst - 1)
    assert s.due(now + 1000.0) == [] and s.next_start() is None
    assert s.roles["filter"].last_status == 2
    assert s.state("reflector") == (RUNNING, 0)
    # ...which still restarts on its own exit
    assert s.exited("reflector", now + 2.0, -9) == now + 2.5


def test_exits_spread_wider_than_the_window_are_no_crash_loop():
    s = started(Supervisor(["web"], RestartPolicy(first_delay_s=0.5, max_delay_s=0.5, burst=3,
                                                  window_s=10.0)))
    now = 0.0
    for _ in range(10):
        now += 6.0  # two exits at most within any 10 s
        at = s.exited("web", now, -9)
        assert at is not None
        s.started("web", at)
    assert s.state("web") == (RESTARTING, 10)


def test_a_stop_request_means_no_more_restarts():
    s = started(Supervisor(["crawler", "filter"], POLICY))
    at = s.exited("filter", 1.0, -9)
    assert s.next_start() == at
    s.stop()
    assert s.due(at + 10.0) == [] and s.next_start() is None
    assert s.state("filter")[0] == s.state("crawler")[0] == STOPPED
    assert s.exited("crawler", 2.0, 0) is None  # stopping on request: not restarted
    assert s.state("crawler")[0] == STOPPED


def test_replicas_of_one_shard_are_kept_apart_by_their_keys():
    s = started(Supervisor([0, 1], POLICY))
    s.exited(1, 1.0, -9)
    assert s.state(0) == (RUNNING, 0) and s.state(1)[0] == RESTARTING


def test_a_policy_that_cannot_work_is_refused():
    with pytest.raises(ValueError, match="first_delay_s <= max_delay_s"):
        RestartPolicy(first_delay_s=5.0, max_delay_s=1.0)
    with pytest.raises(ValueError, match="burst >= 1"):
        RestartPolicy(burst=0)


def test_up_loop_leaves_a_crash_looping_role_down_while_another_runs_on():
    """The loop of `up` (compose/supervised.py) over two real processes: one that exits as soon
    as it is ready, one that runs. The first is started again until its crash loop, then left
    down; the second keeps its first pid; a stop request ends the loop, rows say stopped."""
    import sys
    import threading

    from feedmesh.compose.processes import _Role
    from feedmesh.compose.supervised import supervise
    from tests.eventually import eventually

    ready = "import sys, time; print('ready', file=sys.stderr, flush=True); "
    crashing = _Role("filter 0/1", [sys.executable, "-c", ready + "sys.exit(3)"])
    steady = _Role("web 0", [sys.executable, "-c", ready + "time.sleep(600)"])
    roles = [crashing, steady]
    for role in roles:
        role.wait_ready("ready")
    rows: list[dict] = [{"role": "filter"}, {"role": "web"}]
    saved: list[list[dict]] = []
    stop = threading.Event()
    policy = RestartPolicy(first_delay_s=0.05, max_delay_s=0.2, burst=3, window_s=60.0)
    loop = threading.Thread(target=supervise, args=(roles, rows, stop,
                                                    lambda: saved.append([dict(r) for r in rows])),
                            kwargs={"policy": policy, "poll_s": 0.02})
    first_pid = steady.process.pid
    loop.start()
    try:
        eventually.blocking(lambda: rows[0].get("state") == DOWN, timeout=30)
        assert rows[0]["restarts"] == policy.burst - 1  # 3 exits: the first start and 2 more
        assert rows[1] == {"role": "web", "state": RUNNING, "restarts": 0, "pid": first_pid}
        assert any(s[0]["state"] == RESTARTING for s in saved)  # between an exit and its start
    finally:
        stop.set()
        loop.join(10)
        steady.stop()
    assert not loop.is_alive()
    assert [r["state"] for r in rows] == [STOPPED, STOPPED] and saved[-1] == rows


def test_up_loop_does_not_restart_a_role_once_a_stop_is_requested():
    """`feedmesh down` while a role waits for its restart: the loop ends and the role is not
    started again (the drain then runs without a restart racing it)."""
    import sys
    import threading

    from feedmesh.compose.processes import _Role
    from feedmesh.compose.supervised import supervise
    from tests.eventually import eventually

    role = _Role("filter 0/1", [sys.executable, "-c",
                                "import sys; print('ready', file=sys.stderr, flush=True)"])
    role.wait_ready("ready")
    exited = role.process
    rows: list[dict] = [{"role": "filter"}]
    stop = threading.Event()
    loop = threading.Thread(target=supervise, args=([role], rows, stop, lambda: None),
                            kwargs={"policy": RestartPolicy(first_delay_s=3.0),
                                    "poll_s": 0.02})
    loop.start()
    try:
        eventually.blocking(lambda: rows[0].get("state") == RESTARTING, timeout=30)
    finally:
        stop.set()
        loop.join(10)
    assert not loop.is_alive()
    assert role.process is exited and rows[0]["state"] == STOPPED and rows[0]["restarts"] == 0
