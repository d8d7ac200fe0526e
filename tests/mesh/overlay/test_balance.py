"""Pairwise bandwidth balance (issue 14 section 5a, paper 4.4): a parent measures per neighbour
what it forwarded to it and what it got back over every group; a child in debt is asked to repay
(adopt the parent in another group and forward it that group's records); an honest child does and
is kept, a freeloader does not and is dropped and refused."""

from __future__ import annotations

from dataclasses import replace

from nacl.signing import SigningKey

from feedmesh.mesh.overlay.balance import Ledger
from feedmesh.mesh.overlay.ids import group_id
from feedmesh.mesh.overlay.scenario import build_overlay
from feedmesh.mesh.overlay.scribe import Adopt, ScribeConfig
from feedmesh.mesh.records import FeedWriter

URLS = [f"https://news.example.org/{name}.xml" for name in ("a", "b", "c")]


def test_the_ledger_judges_only_past_the_allowance_and_after_strikes_in_a_row():
    ledger = Ledger(min_ratio=0.5, allowance=100, strikes=2)
    for _ in range(10):
        ledger.sent(7, 10)
    assert not ledger.in_debt(7) and not ledger.judge(7)        # 100 bytes: within the credit
    ledger.sent(7, 10)
    assert ledger.in_debt(7)
    assert not ledger.judge(7) and ledger.balances[7].strikes == 1
    ledger.sent(7, 10)
    ledger.received(7, 10)                                       # 10 of 10 back since: paying
    assert not ledger.judge(7) and ledger.balances[7].strikes == 0
    assert not ledger.judge(7) and ledger.balances[7].strikes == 0   # nothing moved: no change
    ledger.sent(7, 100)
    ledger.received(7, 20)                                       # 20 of 100: below half
    assert not ledger.judge(7)
    ledger.sent(7, 10)
    assert ledger.judge(7)                                       # two strikes in a row: found out
    assert 7 not in ledger.balances
    assert ledger.balances.get(8) is None and not ledger.judge(8)


class Feeds:
    """Every node but 0-2 subscribes to three feeds, published by nodes 0, 1 and 2."""

    def __init__(self, count: int, seed: int, scribe: ScribeConfig) -> None:
        self.overlay = build_overlay(count, seed=seed, settle=3.0, scribe=scribe)
        self.sim, self.nodes = self.overlay.sim, self.overlay.nodes
        self.writers = [FeedWriter(SigningKey(bytes([i + 1]) * 32), url)
                        for i, url in enumerate(URLS)]
        self.got = {n.handle.addr: [] for n in self.nodes}
        self.sim.after_step = lambda node: self.got[node.handle.addr].extend(
            node.take_deliveries())
        for node in self.nodes[3:]:
            for writer in self.writers:
                self.sim.act(node.handle.addr,
                             lambda n, now, w=writer: n.subscribe(now, w.url, w.feed))
        self.sim.run_until(self.sim.now + 3.0)

    def publish(self, rounds: int, gap: float = 0.2) -> None:
        for _ in range(rounds):
            for i, writer in enumerate(self.writers):
                wire = writer.append({"id": str(writer.seq + 1), "summary": "x" * 400})
                self.sim.act(i, lambda n, now, w=wire, s=writer.seq, u=writer.url:
                             n.publish(now, u, s, w))
            self.sim.run_until(self.sim.now + gap)

    def held(self, node) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for delivery in self.got[node.handle.addr]:
            out.setdefault(delivery.group, []).append(delivery.record.seq)
        return out


def _setup(freeloading: bool):
    # one child per node and group: a parent is owed by at most three children, and three shared
    # groups leave each of them another group to repay it in
    feeds = Feeds(30, seed=5, scribe=ScribeConfig(max_children=1))
    first = group_id(URLS[0])
    roots = {n.handle.addr for n in feeds.nodes for g in n.groups.values() if g.root}
    # (a freeloading root is out of reach of any child: the publisher routes every record to it)
    parent = next(n for n in feeds.nodes[3:] if n.groups[first].children
                  and all(c.addr >= 3 and c.addr not in roots
                          for c in n.groups[first].children.values()))
    child = feeds.nodes[next(iter(parent.groups[first].children.values())).addr]
    if freeloading:
        child.config = replace(child.config, forward=False)
    parent.config = replace(parent.config, balance_min_ratio=0.5, balance_allowance=4_000)
    parent.ledger.min_ratio, parent.ledger.allowance = 0.5, 4_000
    feeds.publish(30)
    feeds.sim.run_until(feeds.sim.now + 3.0)
    # whatever happened, the parent got every record of every feed, once
    held = feeds.held(parent)
    assert {g: sorted(s) for g, s in held.items()} == {group_id(u): list(range(1, 31))
                                                      for u in URLS}
    return feeds, parent, child, first


def test_a_child_in_debt_repays_by_adopting_its_parent_elsewhere_and_is_kept():
    _, parent, child, first = _setup(freeloading=False)
    assert parent.counters["repayment-asked"] >= 1
    assert parent.counters["balance-dropped"] == 0 and not parent.shunned
    assert child.handle.id in parent.groups[first].children
    repaid_in = [g.id for g in parent.groups.values()
                 if g.parent is not None and g.parent.id == child.handle.id]
    assert len(repaid_in) == 1 and repaid_in[0] != first
    balance = parent.ledger.balances[child.handle.id]
    assert balance.items_to == 30 and balance.items_from >= 15


def test_a_freeloading_child_that_does_not_repay_is_dropped_and_refused():
    feeds, parent, rider, first = _setup(freeloading=True)
    assert parent.counters["repayment-asked"] >= 1
    assert parent.counters["balance-dropped"] == 1
    assert set(parent.shunned) == {rider.handle.id}
    assert all(rider.handle.id not in g.children for g in parent.groups.values())
    assert all(g.parent is None or g.parent.id != rider.handle.id for g in parent.groups.values())

    # its next attempt to attach under the parent is refused
    before = parent.counters["shunned-refused"]
    feeds.sim.act(rider.handle.addr, lambda n, now: n.pastry.send(parent.handle, Adopt(first)))
    feeds.sim.run_until(feeds.sim.now + 0.2)
    assert parent.counters["shunned-refused"] == before + 1
    assert rider.handle.id not in parent.groups[first].children


def test_with_the_balance_off_nobody_is_dropped():
    feeds = Feeds(20, seed=5, scribe=ScribeConfig(max_children=1))
    rider = next(n for n in feeds.nodes[3:] if n.groups[group_id(URLS[0])].children)
    rider.config = replace(rider.config, forward=False)
    feeds.publish(10)
    assert all(n.counters["balance-dropped"] == 0 and n.counters["repayment-asked"] == 0
               for n in feeds.nodes)
