"""The simulator itself: links 25 ms +-10%, symmetric and fixed per pair; time only moves with
it."""

from __future__ import annotations

from feedmesh.mesh.overlay.ids import Handle
from feedmesh.mesh.overlay.sim import LatencyMatrix, Simulator


def test_latency_matrix_is_symmetric_within_ten_percent_and_spread():
    matrix = LatencyMatrix(seed=4)
    values = [matrix(a, b) for a in range(60) for b in range(a + 1, 60)]
    assert all(0.0225 <= v <= 0.0275 for v in values)
    assert max(values) - min(values) > 0.004
    assert all(matrix(a, b) == matrix(b, a) for a in range(20) for b in range(20))


class Echo:
    """A node that answers every message once and keeps a timer."""

    def __init__(self, addr: int) -> None:
        self.handle = Handle(addr, addr)
        self.log: list[tuple[float, int, object]] = []
        self.deadline: float | None = None
        self.out: list = []

    def receive(self, now, sender, body):
        self.log.append((now, sender.addr, body))
        if body == "ping":
            self.out.append((sender, "pong"))

    def fire(self, now):
        self.log.append((now, -1, "timer"))
        self.deadline = None

    def next_deadline(self):
        return self.deadline

    def take(self):
        out, self.out = self.out, []
        return out


def test_messages_arrive_after_the_link_latency_and_timers_fire_on_time():
    sim = Simulator(LatencyMatrix(seed=1))
    a, b = Echo(1), Echo(2)
    sim.add(a)
    sim.add(b)
    link = sim.latency(1, 2)
    a.deadline = 1.0
    sim.act(1, lambda node, now: node.out.append((b.handle, "ping")))
    sim.run_until(2.0)
    assert b.log == [(link, 1, "ping")]
    assert a.log == [(2 * link, 2, "pong"), (1.0, -1, "timer")]
    assert sim.sent == {"str": 2}


def test_a_killed_node_gets_nothing():
    sim = Simulator()
    a, b = Echo(1), Echo(2)
    sim.add(a)
    sim.add(b)
    sim.kill(2)
    sim.act(1, lambda node, now: node.out.append((b.handle, "ping")))
    sim.run_until(1.0)
    assert b.log == [] and a.log == []
