"""A Pastry node as a sans-IO state machine (after Rowstron and Druschel, and Castro et al.'s PNS).

Inputs: :meth:`PastryNode.receive` (``now``, the sender's handle, a message), :meth:`fire` when
:meth:`next_deadline` has come, :meth:`observe_rtt` for round trips measured by a transport.
Outputs: :meth:`take` returns ``(destination handle, message)`` pairs to send. No clock is read and
nothing is sent here, so a UDP endpoint and the discrete-event simulator drive the same object.

* Routing: deliver within the leaf set's range to the numerically closest node; otherwise forward to
  the routing-table slot that shares one more digit with the key; otherwise (rare) to any known node
  that shares as long a prefix and is numerically closer.
* Proximity: a table slot keeps the lowest-RTT candidate; RTTs come from our own probes and route
  acknowledgements, or from the transport.
* Join: the joiner routes a join toward its own id through a bootstrap node; each hop sends it the
  rows it needs, the last hop its leaf set; the joiner then announces itself to everyone it learned.
* Failure: each routed hop is acknowledged; a hop not acknowledged in time marks the next node dead
  and the message goes around it. Leaves are pinged every ``leaf_period``; a leaf silent for
  ``leaf_timeout`` is dead, and the leaf set is refilled from the farthest live leaves' sets; a
  dead routing-table entry is replaced lazily from another node of the same row.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Protocol

from feedmesh.mesh.overlay.ids import Handle, closest, ring_distance, shared_prefix
from feedmesh.mesh.overlay.messages import (
    Announce,
    JoinDone,
    JoinPayload,
    LeafPing,
    LeafReply,
    LeafRequest,
    Leaving,
    Pong,
    Probe,
    Route,
    RouteAck,
    RowRequest,
    StateRows,
)
from feedmesh.mesh.overlay.tables import LeafSet, RoutingTable
from feedmesh.mesh.sansio import Timers

__all__ = ["Application", "PastryConfig", "PastryNode"]


@dataclass(frozen=True, slots=True)
class PastryConfig:
    leaf_half: int = 8              # leaf set: 8 on each side
    leaf_period: float = 1.0        # keep-alive to leaves
    leaf_timeout: float = 3.0       # a leaf silent this long is dead
    gossip_every: int = 5           # every 5th keep-alive carries the leaf set
    ack_timeout: float = 0.5        # before an RTT to the next hop is known
    ack_rtt_factor: float = 3.0     # then: this many RTTs (at least ack_floor)
    ack_floor: float = 0.1
    join_retry: float = 3.0
    dead_memory: float = 30.0       # how long a dead node is not re-learned from others' state


class Application(Protocol):
    """What runs on top (Scribe): upcalls from the routing layer."""

    def forward(self, now: float, route: Route, next_hop: Handle | None) -> Any | None:
        """A routed message passes here; return the payload to send on, or None to stop it."""

    def deliver(self, now: float, route: Route) -> None:
        """We are the node numerically closest to ``route.key``."""

    def direct(self, now: float, sender: Handle, body: Any) -> None:
        """A message sent to us point to point."""

    def node_failed(self, now: float, node: Handle) -> None:
        """``node`` is considered dead."""

    def timer(self, now: float, token: Any) -> None:
        """A timer set with :meth:`PastryNode.set_timer` is due."""


class PastryNode:
    def __init__(self, handle: Handle, config: PastryConfig | None = None) -> None:
        self.handle = handle
        self.id = handle.id
        self.config = config or PastryConfig()
        self.table = RoutingTable(handle.id)
        self.leaves = LeafSet(handle, self.config.leaf_half)
        self.app: Application | None = None
        self.rtt: dict[int, float] = {}
        self.joined = False
        self.alive = True
        self._out: list[tuple[Handle, Any]] = []
        self._timers = Timers()
        self._hop_ids = itertools.count(1)
        self._awaiting_ack: dict[int, tuple[Handle, Route, float]] = {}
        self._last_heard: dict[int, float] = {}
        self._dead: dict[int, float] = {}
        self._probing: set[int] = set()
        self._probe_later: list[Handle] = []
        self._bootstrap: Handle | None = None
        self._ticks = 0

    # ---- inputs ---------------------------------------------------------------------------
    def start(self, now: float, bootstrap: Handle | None = None) -> None:
        """Join the overlay through ``bootstrap`` (None: this node starts a new ring)."""
        self._bootstrap = bootstrap
        self._set(now + self.config.leaf_period, ("leaf-tick",))
        if bootstrap is None:
            self.joined = True
            return
        self._send_join(now)

    def bootstrap_through(self, now: float, bootstrap: Handle) -> None:
        """Still joining: send the join (and its retries) through ``bootstrap`` instead, e.g.
        because the first one never answered. Joined: nothing to do."""
        if self.joined or bootstrap.id == self.id:
            return
        self._bootstrap = bootstrap
        self._send_join(now)

    def receive(self, now: float, sender: Handle, body: Any) -> None:
        if not self.alive:
            return
        kind = type(body)
        if kind is Route and type(body.payload) is JoinPayload and body.payload.joiner == sender:
            pass   # a joiner is nobody's neighbour until it has joined and announced itself
        else:
            self._heard(now, sender)
        if kind is Route:
            self._send(sender, RouteAck(body.hop_id))
            self._on_route(now, body)
        elif kind is RouteAck:
            waiting = self._awaiting_ack.pop(body.hop_id, None)
            if waiting is not None:
                self.observe_rtt(sender, now - waiting[2])
        elif kind is StateRows:
            for handle in body.handles:
                self._consider(now, handle)
        elif kind is JoinDone:
            self._on_join_done(now, body)
        elif kind is Announce:
            pass   # _heard considered the sender already
        elif kind is LeafPing:
            if body.leaves:
                for handle in body.leaves:
                    self._consider(now, handle)
            if sender.id not in self.leaves:
                self._send(sender, LeafReply(tuple(self.leaves.members())))
        elif kind is LeafRequest:
            self._send(sender, LeafReply(tuple(self.leaves.members())))
        elif kind is LeafReply:
            for handle in body.leaves:
                self._consider(now, handle)
        elif kind is Leaving:
            self.declare_dead(now, sender)
        elif kind is Probe:
            self._send(sender, Pong(body.sent_at))
        elif kind is RowRequest:
            if 0 <= body.row < len(self.table.rows):
                self._send(sender, StateRows(tuple(self.table.row(body.row))))
        elif kind is Pong:
            self._probing.discard(sender.id)
            self.observe_rtt(sender, now - body.sent_at)
        elif self.app is not None:
            self.app.direct(now, sender, body)

    def observe_rtt(self, handle: Handle, rtt: float) -> None:
        previous = self.rtt.get(handle.id)
        self.rtt[handle.id] = rtt if previous is None else 0.7 * previous + 0.3 * rtt
        if previous is None and self.alive:
            self.table.consider(handle, self.rtt)

    def next_deadline(self) -> float | None:
        return self._timers.next_deadline()

    def fire(self, now: float) -> None:
        timers = self._timers
        while self.alive and (token := timers.pop_due(now)) is not None:
            kind = token[0]
            if kind == "leaf-tick":
                self._leaf_tick(now)
            elif kind == "ack":
                self._ack_due(now, token[1])
            elif kind == "join-retry":
                if not self.joined:
                    self._send_join(now)
            elif kind == "app" and self.app is not None:
                self.app.timer(now, token[1])

    def leave(self, now: float) -> None:
        """Leave gracefully: tell every node we know, then stop."""
        for handle in self.known():
            self._send(handle, Leaving())
        self.alive = False
        self._timers.clear()

    def take(self) -> list[tuple[Handle, Any]]:
        out, self._out = self._out, []
        return out

    # ---- for the application ------------------------------------------------------------------
    def send(self, destination: Handle, body: Any) -> None:
        self._send(destination, body)

    def set_timer(self, deadline: float, token: Any) -> None:
        self._set(deadline, ("app", token))

    def route(self, now: float, key: int, payload: Any) -> None:
        """Send ``payload`` toward the node closest to ``key`` (us included)."""
        message = Route(key, payload, self.handle, 0)
        self._onward(now, message, self.next_hop(key))

    def next_hop(self, key: int, *, excluding: int | None = None) -> Handle | None:
        """The next node toward ``key``, or None when this node is the closest it knows."""
        if key == self.id:
            return None
        members = [h for h in self.leaves.members() if h.id != excluding]
        if not self.leaves.complete():
            # a leaf set still filling (a small ring, or a node that just joined) does not cover
            # the ring: go to the closest node known at all; each hop gets numerically closer
            known = [h for h in self.table.handles() if h.id != excluding]
            best = closest(key, [*members, *known, self.handle])
            return None if best.id == self.id else best
        if self.leaves.covers(key):
            best = closest(key, [*members, self.handle])
            return None if best.id == self.id else best
        row = shared_prefix(self.id, key)
        column = (key >> (128 - 4 * (row + 1))) & 15
        entry = self.table.get(row, column)
        if entry is not None and entry.id != excluding:
            return entry
        mine = ring_distance(self.id, key)
        better = [h for h in [*members, *self.table.handles()]
                  if h.id != excluding and shared_prefix(h.id, key) >= row
                  and ring_distance(h.id, key) < mine]
        return closest(key, better) if better else None

    def known(self) -> list[Handle]:
        seen = {h.id: h for h in self.table.handles()}
        seen.update((h.id, h) for h in self.leaves.members())
        return list(seen.values())

    def declare_dead(self, now: float, node: Handle) -> None:
        if node.id == self.id:
            return
        self._dead[node.id] = now
        self._last_heard.pop(node.id, None)
        self.rtt.pop(node.id, None)
        self._probing.discard(node.id)
        place = self.table.slot(node.id)
        if self.table.remove(node.id) and place is not None:
            # lazy repair: another node of the same row may know a replacement for the slot
            others = self.table.row(place[0])
            if others:
                self._send(others[0], RowRequest(place[0]))
        if self.leaves.remove(node.id):
            self._repair_leaves()
        for hop_id, (next_node, message, _) in list(self._awaiting_ack.items()):
            if next_node.id == node.id:
                del self._awaiting_ack[hop_id]
                self._onward(now, message, self.next_hop(message.key, excluding=node.id))
        if self.app is not None:
            self.app.node_failed(now, node)

    # ---- internals --------------------------------------------------------------------------
    def _send(self, destination: Handle, body: Any) -> None:
        self._out.append((destination, body))

    def _set(self, deadline: float, token: tuple) -> None:
        self._timers.add(deadline, token)

    def _heard(self, now: float, sender: Handle) -> None:
        self._dead.pop(sender.id, None)
        self._last_heard[sender.id] = now
        if sender.id not in self.leaves and not self.table.holds(sender.id):
            self._consider(now, sender)

    def _consider(self, now: float, handle: Handle) -> None:
        if handle.id == self.id:
            return
        died = self._dead.get(handle.id)
        if died is not None:
            if now - died < self.config.dead_memory:
                return
            del self._dead[handle.id]
        if self.leaves.consider(handle):
            self._last_heard[handle.id] = now   # a new leaf gets a full timeout to answer
        wants_rtt = handle.id not in self.rtt and handle.id not in self._probing
        if self.table.consider(handle, self.rtt) in ("set", "probe") and wants_rtt:
            self._probing.add(handle.id)
            if self.joined:
                self._send(handle, Probe(now))
            else:
                self._probe_later.append(handle)   # a probe would make others learn of us early

    def _send_join(self, now: float) -> None:
        assert self._bootstrap is not None
        hop_id = next(self._hop_ids)
        self._send(self._bootstrap, Route(self.id, JoinPayload(self.handle), self.handle, hop_id))
        self._set(now + self.config.join_retry, ("join-retry",))

    def _on_join_done(self, now: float, body: JoinDone) -> None:
        for handle in body.leaves:
            self._consider(now, handle)
        if self.joined:
            return
        self.joined = True
        for handle in self.known():
            self._send(handle, Announce())
        for handle in self._probe_later:
            if handle.id not in self.rtt and handle.id not in self._dead:
                self._send(handle, Probe(now))
        self._probe_later.clear()

    def _on_route(self, now: float, message: Route) -> None:
        message = Route(message.key, message.payload, message.origin, 0, message.hops + 1)
        if not self.joined and self._bootstrap is not None:
            # still joining ourselves: our state is not worth routing on, our bootstrap's is
            self._onward(now, message, self._bootstrap)
            return
        payload = message.payload
        if type(payload) is JoinPayload:
            self._on_join_hop(now, message, payload.joiner)
            return
        next_node = self.next_hop(message.key)
        if self.app is not None:
            payload = self.app.forward(now, message, next_node)
            if payload is None:
                return
            message = Route(message.key, payload, message.origin, 0, message.hops)
        self._onward(now, message, next_node)

    def _on_join_hop(self, now: float, message: Route, joiner: Handle) -> None:
        row = shared_prefix(self.id, joiner.id)
        rows = [h for r in range(min(row + 1, 32)) for h in self.table.row(r)]
        next_node = self.next_hop(joiner.id, excluding=joiner.id)
        if next_node is None:
            self._send(joiner, JoinDone((*self.leaves.members(), self.handle)))
        else:
            self._send(joiner, StateRows((*rows, self.handle)))
            self._onward(now, message, next_node)

    def _onward(self, now: float, message: Route, next_node: Handle | None) -> None:
        if next_node is None:
            if self.app is not None:
                self.app.deliver(now, message)
            return
        hop_id = next(self._hop_ids)
        self._send(next_node, Route(message.key, message.payload, message.origin, hop_id,
                                    message.hops))
        self._awaiting_ack[hop_id] = (next_node, message, now)
        rtt = self.rtt.get(next_node.id)
        wait = (self.config.ack_timeout if rtt is None
                else max(self.config.ack_floor, self.config.ack_rtt_factor * rtt))
        self._set(now + wait, ("ack", hop_id))

    def _ack_due(self, now: float, hop_id: int) -> None:
        waiting = self._awaiting_ack.get(hop_id)
        if waiting is not None:
            self.declare_dead(now, waiting[0])   # re-routes what was waiting on it

    def _leaf_tick(self, now: float) -> None:
        self._ticks += 1
        gossip = self._ticks % self.config.gossip_every == 0
        leaves = tuple(self.leaves.members()) if gossip else None
        for handle in self.leaves.members():
            heard = self._last_heard.setdefault(handle.id, now)
            if now - heard > self.config.leaf_timeout:
                self.declare_dead(now, handle)
            else:
                self._send(handle, LeafPing(leaves))
        self._set(now + self.config.leaf_period, ("leaf-tick",))

    def _repair_leaves(self) -> None:
        for side in (self.leaves.left, self.leaves.right):
            if side:
                self._send(side[-1], LeafRequest())
