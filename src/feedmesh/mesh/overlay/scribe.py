"""Scribe groups on Pastry, carrying signed feed records (SCRIBE-RSS, section 4 of the paper).

A feed's group id is :func:`~feedmesh.mesh.overlay.ids.group_id` of its canonical URL. Subscribing
routes a join toward the group id; the first node on the way that is already in the tree adopts the
joiner as a child, every other node on the way becomes a forwarder (adopts, and joins on in its own
name); the node closest to the group id is the root. The publisher routes each record to the root
(one message per update), and the root sends it down the tree.

Keeping the tree whole:

* parents send ``Heartbeat`` (with the newest seq they hold and their path to the root) every
  ``heartbeat_period`` to children that got nothing else; a parent silent for ``parent_timeout``
  is declared dead to Pastry and the child joins again, now routed around it;
* children send ``Refresh`` every ``refresh_period``; a parent forgets a child silent 3x that long;
* a parent with ``max_children`` children hands a further joiner to one of them (``Redirect``, then
  ``Adopt`` straight to that child): a sibling's subtree cannot hold the joiner, so no loop forms;
* over the stripes of one feed a node keeps at most ``feed_children`` children; one pushed over
  hands a child of a stripe not its digit's down to a sibling (``Redirect`` from the parent: the
  child leaves it and asks the sibling to adopt it);
* a root that learns of a node closer to the group id joins it (the tree hangs below the new root);
* an adoption that would close a loop (the joiner is on our path to the root) is passed on.

Freeloading (section 4.4 of the paper): each child compares what its parent announces (the newest
seq in its heartbeats) with what the parent sent it, down the tree or answering its ``Recover``.
A parent that announced ``freeload_streak`` records in a row and sent none of them (not even when
asked) takes but does not forward: the child
shuns it for ``shun_period`` (refusing its adoptions and redirects to it), declares it dead to
Pastry and joins again, routed around it; it recovers what it missed from its new parent.

Gaps: every member keeps the last ``buffer_size`` records of the group. A subscriber whose log has
a gap (a later seq arrived, or a heartbeat announced one) asks its parent with ``Recover``; a parent
without the record asks its own parent and relays the answer. Subscribers verify every record
(:class:`~feedmesh.mesh.records.FeedLog`) and deliver only verified ones; a subscriber forwards to
its children only records its log did not refuse. A forwarder that does not subscribe has no key and
forwards what its parent sent; the subscribers below it verify.

What a stranger can make a node do or remember (issue 32):

* ``Recover`` and ``Vouch`` are answered only to a child of the group or to a sender the transport
  validated (:attr:`ScribeNode.validated`: on UDP, an address that returned our cookie): a forged
  source gets nothing, so a node is no reflector; the transport caps the rest (``udp.py``);
* a requested seq beyond the newest we know plus ``seq_window`` is refused, and so is any seq we
  will never hold again (at or below our head, not buffered); only children's requests are
  remembered (``waiting``), at most ``seq_window`` seqs per group and half of them per child (seqs
  that can no longer come are forgotten each tick), and our own outstanding asks
  (``asked``) are as bounded; a heartbeat announcing far ahead moves us by ``seq_window`` at most;
* groups held for others (no log of ours: forwarder or root) are at most ``max_foreign_groups``,
  their buffers at most ``max_foreign_bytes`` together, and one child holds a place in at most
  ``max_groups_per_child`` of our groups; joins and publishes beyond that are passed on or dropped
  (counted: ``groups-full``, ``child-groups-full``, ``buffer-full``);
* a rumour is one (teller, seq, time) per group we hold: bounded by the groups.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from feedmesh.mesh.overlay.balance import Ledger
from feedmesh.mesh.overlay.ids import ID_BITS, Handle, group_id
from feedmesh.mesh.overlay.messages import Route
from feedmesh.mesh.overlay.pastry import PastryConfig, PastryNode
from feedmesh.mesh.overlay.stripes import first_digit, stripe_groups
from feedmesh.mesh.records import FeedLog, Record

__all__ = [
    "Adopt", "Delivery", "Heartbeat", "Item", "JoinAck", "Publish", "Recover", "Redirect",
    "Refresh", "Rumour", "ScribeConfig", "ScribeNode", "Subscribe", "Unsubscribe", "Vouch",
]


# ---- messages ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Subscribe:
    """Routed toward the group id on behalf of ``child``."""

    group: int
    child: Handle


@dataclass(frozen=True, slots=True)
class Publish:
    """Routed from the publisher to the root."""

    group: int
    seq: int
    wire: bytes


@dataclass(frozen=True, slots=True)
class JoinAck:
    group: int
    path: tuple[int, ...]    # the new parent and its ancestors up to the root
    newest: int


@dataclass(frozen=True, slots=True)
class Item:
    """A record going down the tree (or answering a ``Recover``); ``seq`` is unauthenticated, for
    buffering only: subscribers read the signed seq inside ``wire``."""

    group: int
    seq: int
    wire: bytes
    recovered: bool = False


@dataclass(frozen=True, slots=True)
class Redirect:
    """A full parent sends the joiner to one of its children, ``to``."""

    group: int
    to: Handle


@dataclass(frozen=True, slots=True)
class Adopt:
    """Sent straight to the node a ``Redirect`` named: "take me as your child"; or, ``repay``,
    by a parent asking its child in debt to take it as a child in another group (pairwise
    balance), which is taken beyond the bounds when the sender is our parent somewhere."""

    group: int
    repay: bool = False


@dataclass(frozen=True, slots=True)
class Heartbeat:
    group: int
    path: tuple[int, ...]
    newest: int


@dataclass(frozen=True, slots=True)
class Refresh:
    group: int


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    group: int


@dataclass(frozen=True, slots=True)
class Recover:
    group: int
    seqs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Vouch:
    """A child to its parent: "I hold these records (from others); did you not have them?". The
    parent answers like a ``Recover``; what it lacks it asks the child for, so an honest parent
    cut off above passes the check at once instead of being taken for a freeloader."""

    group: int
    seqs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Rumour:
    """"The newest seq I hold of each of these groups", to a leaf-set neighbour now and then; the
    receiver answers once (``reply``) with its own. Unauthenticated: a newer seq only makes the
    receiver ask the sender for the records, and only verified records count as evidence."""

    groups: tuple[int, ...]
    newest: tuple[int, ...]
    reply: bool = False


@dataclass(frozen=True, slots=True)
class Delivery:
    """A verified record handed to the local reader."""

    group: int
    record: Record
    at: float
    recovered: bool = False   # released by a gap recovery rather than arriving down the tree


_BELOW_FIRST_DIGIT = (1 << (ID_BITS - 4)) - 1
_DIRECT = (Item, Heartbeat, JoinAck, Refresh, Recover, Unsubscribe, Redirect, Adopt, Vouch)


@dataclass(frozen=True, slots=True)
class ScribeConfig:
    heartbeat_period: float = 0.5
    parent_timeout: float = 1.5
    refresh_period: float = 2.0
    join_retry: float = 2.0
    buffer_size: int = 32
    max_children: int = 16          # 0: no bound (plain Scribe)
    feed_children: int = 20
    """SplitStream's outdegree bound: the children a node keeps over all stripes of one feed
    (their group ids differ in the first digit only; 0: ``max_children`` per group alone). A
    node at the bound hands a joiner to a child in that stripe, one whose first digit is the
    stripe's when it can (that stripe is its to forward); a node pushed over it (a leaf in a
    stripe has no child to hand a joiner to) hands a child of a stripe not its digit's down to
    a sibling there (push-down). Above ``max_children``, it only bounds striped feeds."""
    adopt_wait: float = 0.5
    recover_retry: float = 0.5
    freeload_streak: int = 8
    """A parent that announced this many records in a row (heartbeats' newest seq) without
    forwarding any of them is a freeloader: shunned, and the child joins elsewhere (0: never)."""
    shun_period: float = 60.0
    """How long a freeloading parent is refused (its adoptions, redirects to it)."""
    forward: bool = True
    """False: a freeloader (takes records, forwards none, answers no recovery); experiments only."""
    hide_newest: bool = False
    """True: a lying parent whose heartbeats announce nothing new; experiments only."""
    balance_min_ratio: float = 0.0
    """Pairwise bandwidth balance: a child that gives back less than this share of the bytes we
    forward it (over every group we share) is dropped and refused (0: off; it only makes sense
    where nodes share at least as many groups as they have children)."""
    balance_allowance: int = 16_000
    """Bytes a child may take beyond what it gave before it is judged (and asked to repay)."""
    balance_strikes: int = 4
    """Judgements (one per tick) in a row below the ratio before the child is dropped."""
    rumour_every: int = 4
    """Every this many ticks (heartbeat periods) a member tells one leaf-set neighbour the newest
    seq it holds of its groups (``Rumour``), so a child under a parent that hides newer records
    hears of them from others (0: never)."""
    seq_window: int = 64
    """A ``Recover``/``Vouch`` for a seq beyond the newest we know plus this many is refused; a
    group remembers at most this many seqs children wait for, and as many asked of its parent."""
    max_foreign_groups: int = 256
    """Groups without a log of ours (forwarding or root for others) a node holds at most."""
    max_foreign_bytes: int = 8_000_000
    """Bytes the buffers of those groups hold together at most (oldest records go first)."""
    max_groups_per_child: int = 64
    """Groups of ours in which one node may be our child."""


@dataclass(slots=True)
class _Group:
    id: int
    children: dict[int, Handle] = field(default_factory=dict)
    child_heard: dict[int, float] = field(default_factory=dict)
    child_sent: dict[int, float] = field(default_factory=dict)
    parent: Handle | None = None
    parent_heard: float = 0.0
    path: tuple[int, ...] = ()
    root: bool = False
    joining_since: float | None = None
    log: FeedLog | None = None
    buffer: OrderedDict[int, bytes] = field(default_factory=OrderedDict)
    newest: int = 0
    asked: dict[int, float] = field(default_factory=dict)           # seq -> when we asked
    # the parent's forwarding, as this child sees it: seqs it sent us (down the tree or answering
    # a Recover), the newest it announced, the last seq judged, and how many announced seqs in a
    # row it never sent
    from_parent: set[int] = field(default_factory=set)
    announced: int = 0
    judged_to: int = 0
    withheld_streak: int = 0
    evidence: int = 0   # newest seq verified from someone other than the parent (via a Rumour)
    rumoured: tuple[Handle, int, float] | None = None   # (teller, its newest, when heard)
    waiting: dict[int, set[Handle]] = field(default_factory=dict)   # seq -> children to answer
    buffer_bytes: int = 0
    # a striped feed (stripes.py): this group carries the records with seq % stripes == stripe;
    # siblings are all the feed's stripe groups, which share one log
    stripe: int = 0
    stripes: int = 1
    siblings: tuple[int, ...] = ()

    def carries(self, seq: int) -> bool:
        return self.stripes == 1 or seq % self.stripes == self.stripe


class ScribeNode:
    """One overlay node: Pastry underneath, Scribe groups on top. Sans-IO like its Pastry core."""

    def __init__(self, handle: Handle, config: ScribeConfig | None = None,
                 pastry: PastryConfig | None = None) -> None:
        self.pastry = PastryNode(handle, pastry)
        self.pastry.app = self
        self.handle = handle
        self.config = config or ScribeConfig()
        self.groups: dict[int, _Group] = {}
        self.deliveries: list[Delivery] = []
        self.counters: Counter[str] = Counter()
        self.shunned: dict[int, float] = {}     # node id -> until when it is refused as parent
        self._ticking = False
        self._ticks = 0
        self.ledger = Ledger(min_ratio=self.config.balance_min_ratio,
                             allowance=self.config.balance_allowance,
                             strikes=self.config.balance_strikes)
        self._repay_asked: dict[int, set[int]] = {}   # child id -> groups we asked it to adopt us
        self.validated: Callable[[Handle], bool] | None = None
        """Set by a transport: True for a sender whose address it proved (a cookie round trip);
        None (the simulator): every sender is."""
        self._foreign_bytes = 0

    # ---- the transport's side: same as Pastry's ----------------------------------------------
    def start(self, now: float, bootstrap: Handle | None = None) -> None:
        self.pastry.start(now, bootstrap)
        self._ensure_tick(now)

    def receive(self, now: float, sender: Handle, body: Any) -> None:
        self.pastry.receive(now, sender, body)

    def fire(self, now: float) -> None:
        self.pastry.fire(now)

    def next_deadline(self) -> float | None:
        return self.pastry.next_deadline()

    def take(self) -> list[tuple[Handle, Any]]:
        return self.pastry.take()

    def take_deliveries(self) -> list[Delivery]:
        out, self.deliveries = self.deliveries, []
        return out

    # ---- the reader's and the publisher's side ------------------------------------------------
    def subscribe(self, now: float, url: str, feed_key: str, *, republication: bool = False,
                  topic: str | None = None, stripes: int = 1) -> int:
        """Join the group of ``topic`` (default: the feed's URL) and verify its records as the
        log of ``url`` started by ``feed_key``. A republisher's log travels in a group of its own
        (:func:`~feedmesh.mesh.overlay.ids.republication_topic`): logs never share a group, so no
        member refuses, and stops, records that other members of its group want."""
        log = FeedLog(feed_key, url, republication=republication)
        gids = stripe_groups(topic or url, stripes) if stripes > 1 else (group_id(topic or url),)
        for index, gid in enumerate(gids):
            group = self._group(gid)
            group.log = log   # with stripes: one log, fed from every stripe
            group.stripe, group.stripes, group.siblings = index, stripes, gids
            if group.parent is None and not group.root and group.joining_since is None:
                self._join(now, group)
        return gids[0]

    def unsubscribe(self, now: float, url: str, *, topic: str | None = None,
                    stripes: int = 1) -> None:
        gids = stripe_groups(topic or url, stripes) if stripes > 1 else (group_id(topic or url),)
        for gid in gids:
            group = self.groups.get(gid)
            if group is None:
                continue
            group.log = None
            if not group.children:
                self._drop(group)

    def publish(self, now: float, url: str, seq: int, wire: bytes, *,
                topic: str | None = None, stripes: int = 1) -> None:
        """Route one signed record to the group's root (with stripes, the root of the stripe the
        record travels in): one message from the publisher."""
        if stripes > 1:
            gid = stripe_groups(topic or url, stripes)[seq % stripes]
        else:
            gid = group_id(topic or url)
        self.pastry.route(now, gid, Publish(gid, seq, wire))

    # ---- Pastry upcalls -----------------------------------------------------------------------
    def forward(self, now: float, route: Route, next_hop: Handle | None) -> Any | None:
        payload = route.payload
        if type(payload) is not Subscribe or next_hop is None:
            return payload
        group = self.groups.get(payload.group)
        if group is not None and (group.parent or group.root or group.joining_since is not None):
            if payload.child.id in group.path:
                return payload   # adopting our own ancestor would close a loop: pass it on
            self._adopt(now, group, payload.child)
            return None
        if group is None and not self._room_for_group(payload.child):
            return payload   # full: the join goes on toward the root, nothing kept here
        group = self._group(payload.group)
        self._adopt(now, group, payload.child)
        group.joining_since = now
        return Subscribe(group.id, self.handle)

    def deliver(self, now: float, route: Route) -> None:
        payload = route.payload
        if type(payload) is Subscribe:
            if payload.group not in self.groups and not self._room_for_group(payload.child):
                return
            group = self._group(payload.group)
            self._become_root(now, group)
            if payload.child.id != self.handle.id:
                self._adopt(now, group, payload.child)
        elif type(payload) is Publish:
            if payload.group not in self.groups and not self._room_for_group(None):
                return
            group = self._group(payload.group)
            if not group.root:
                self._become_root(now, group)
            self.counters["published"] += 1
            self._on_item(now, group, Item(group.id, payload.seq, payload.wire), from_parent=True)

    def direct(self, now: float, sender: Handle, body: Any) -> None:
        kind = type(body)
        if kind is Rumour:
            self._on_rumour(now, sender, body)
            return
        if kind not in _DIRECT:
            self.counters["unknown-message"] += 1   # a transport's garbage is counted, not raised
            return
        group = self.groups.get(body.group)
        if group is None:
            if kind is Refresh or kind is Recover or kind is Vouch:
                self.pastry.send(sender, Unsubscribe(body.group))   # "you are not my child"
            return
        if kind is Item:
            self.ledger.received(sender.id, len(body.wire))
            from_parent = group.parent is not None and sender.id == group.parent.id
            if from_parent:
                group.parent_heard = now
                group.from_parent.add(body.seq)
            self._on_item(now, group, body, from_parent=from_parent and not body.recovered)
            if not from_parent and group.log is not None:
                group.evidence = max(group.evidence, group.log.seq)
        elif kind is Heartbeat:
            if group.parent is not None and sender.id == group.parent.id:
                group.parent_heard = now
                group.path = body.path   # it starts with the parent itself
                # what others proved to exist counts as announced, one heartbeat later than a
                # parent's own announcement would (the parent is asked for it meanwhile)
                newest = min(max(body.newest, group.evidence),
                             self._known(group) + self.config.seq_window)
                before = group.announced
                if self._judge_parent(now, group, newest):
                    return
                self._catch_up(now, group, newest)
                self._probe(group, before, newest)
            else:
                self.pastry.send(sender, Unsubscribe(group.id))   # a parent we left
        elif kind is JoinAck:
            self._on_join_ack(now, group, sender, body)
        elif kind is Refresh:
            if sender.id in group.children:
                group.child_heard[sender.id] = now
            else:
                self.pastry.send(sender, Unsubscribe(group.id))
        elif kind is Recover:
            self._on_recover(now, group, sender, body.seqs)
        elif kind is Vouch:
            self._on_recover(now, group, sender, body.seqs, holder=True)
        elif kind is Redirect:
            if group.parent is not None and sender.id == group.parent.id:
                group.parent = None   # our parent hands us down to a sibling (push-down)
                group.joining_since = now   # joined again later if the sibling does not adopt us
                self.counters["pushed-down"] += 1
            if self._is_shunned(now, body.to):
                self.counters["shunned-refused"] += 1
                self._join(now, group)
            elif group.parent is None and not group.root and body.to.id != self.handle.id:
                self.pastry.send(body.to, Adopt(group.id))
                # no JoinAck within a short while: join again (the sibling may be dead)
                group.joining_since = now - self.config.join_retry + self.config.adopt_wait
        elif kind is Adopt:
            if group.parent is not None or group.root:
                if sender.id in group.path:
                    self.pastry.send(sender, Unsubscribe(group.id))   # would close a loop
                else:
                    # our parent elsewhere asking us to repay (pairwise balance) is taken even
                    # when we are full: refusing would leave us in its debt. Any other Adopt
                    # is a redirected joiner, bounded, even from our parent in another stripe
                    self._adopt(now, group, sender, repaying=body.repay and any(
                        g.parent is not None and g.parent.id == sender.id
                        for g in self.groups.values()))
            else:
                self.pastry.send(sender, Unsubscribe(group.id))
        elif kind is Unsubscribe:
            if sender.id in group.children:
                self._remove_child(group, sender.id)
            elif group.parent is not None and sender.id == group.parent.id:
                group.parent = None   # our parent does not know us: join again
                self._join(now, group)

    def node_failed(self, now: float, node: Handle) -> None:
        for group in list(self.groups.values()):
            if node.id in group.children:
                self._remove_child(group, node.id)
            if group.parent is not None and group.parent.id == node.id:
                self.counters["parent-lost"] += 1
                group.parent = None
                self._join(now, group)

    def timer(self, now: float, token: Any) -> None:
        if token == "tick":
            self._tick(now)
            self.pastry.set_timer(now + self.config.heartbeat_period, "tick")

    # ---- tree ---------------------------------------------------------------------------------
    def _group(self, gid: int) -> _Group:
        group = self.groups.get(gid)
        if group is None:
            group = self.groups[gid] = _Group(gid)
        return group

    def _drop(self, group: _Group) -> None:
        if group.parent is not None:
            self.pastry.send(group.parent, Unsubscribe(group.id))
        if group.log is None:
            self._foreign_bytes -= group.buffer_bytes
        del self.groups[group.id]

    def _room_for_group(self, child: Handle | None) -> bool:
        """May a datagram make us hold one more group for others (on ``child``'s behalf)?"""
        foreign = sum(1 for g in self.groups.values() if g.log is None)
        if foreign >= self.config.max_foreign_groups:
            self.counters["groups-full"] += 1
            return False
        return child is None or self._room_for_child(child)

    def _room_for_child(self, child: Handle) -> bool:
        held = sum(1 for g in self.groups.values() if child.id in g.children)
        if held >= self.config.max_groups_per_child:
            self.counters["child-groups-full"] += 1
            return False
        return True

    def _known(self, group: _Group) -> int:
        """The newest seq of ``group`` we hold or were told of by our parent."""
        return max(group.newest, group.announced, group.log.seq if group.log is not None else 0)

    def _is_validated(self, sender: Handle) -> bool:
        return self.validated is None or self.validated(sender)

    def _ensure_tick(self, now: float) -> None:
        if not self._ticking:
            self._ticking = True
            self.pastry.set_timer(now + self.config.heartbeat_period, "tick")

    def _join(self, now: float, group: _Group) -> None:
        group.joining_since = now
        group.path = ()
        next_hop = self.pastry.next_hop(group.id)
        if next_hop is None:
            self._become_root(now, group)
            return
        self.counters["joins-sent"] += 1
        self.pastry.route(now, group.id, Subscribe(group.id, self.handle))

    def _become_root(self, now: float, group: _Group) -> None:
        if group.parent is not None:
            self.pastry.send(group.parent, Unsubscribe(group.id))
            group.parent = None
        group.root = True
        group.joining_since = None
        group.path = ()

    def _adopt(self, now: float, group: _Group, child: Handle, *, repaying: bool = False) -> None:
        if child.id == self.handle.id:
            return
        if self._is_shunned(now, child):
            self.counters["shunned-refused"] += 1   # a freeloader is denied service
            self.pastry.send(child, Unsubscribe(group.id))
            return
        if child.id not in group.children and not self._room_for_child(child):
            self.pastry.send(child, Unsubscribe(group.id))
            return
        limit = self.config.max_children
        if (limit and not repaying and child.id not in group.children
                and (len(group.children) >= limit or self._feed_full(group))):
            # full (Scribe's bottleneck remover, simplified): hand the joiner to one of our
            # children; siblings' subtrees are disjoint from the joiner's, so no loop can form
            # a child heard from lately, varied per attempt so a retry tries another sibling
            fresh = [h for h in group.children.values()
                     if now - group.child_heard.get(h.id, 0.0) <= self.config.refresh_period * 1.25]
            salt = int(now * 1000)
            pool = fresh or list(group.children.values())
            if group.stripes > 1 and salt % 4:
                # a stripe is best forwarded by nodes of its digit; now and then any child, so
                # a joiner that refuses the one we prefer (shunned) gets another
                digit = first_digit(group.id)
                pool = [h for h in pool if first_digit(h.id) == digit] or pool
            target = min(pool, key=lambda h: h.id ^ child.id ^ salt)
            self.counters["redirected"] += 1
            self.pastry.send(child, Redirect(group.id, target))
            return
        group.children[child.id] = child
        group.child_heard[child.id] = now
        group.child_sent[child.id] = now
        self.counters["adopted"] += 1
        self.pastry.send(child, JoinAck(group.id, (self.handle.id, *group.path), group.newest))
        if self.config.feed_children and self.config.max_children and not repaying:
            self._push_down(now, group)   # (plain Scribe, max_children 0, bounds nothing)

    def _push_down(self, now: float, joined: _Group) -> None:
        """Over the bound across a feed's stripes: hand one child of another stripe, where we
        forward though the stripe is not our digit's, down to a sibling (SplitStream's
        push-down), preferring a child whose digit is not that stripe's (a leaf-to-be)."""
        same = self._feed_groups(joined)
        if sum(len(g.children) for g in same) <= self.config.feed_children:
            return
        mine = first_digit(self.handle.id)
        candidates = ([g for g in same if g is not joined and len(g.children) >= 2
                       and first_digit(g.id) != mine]
                      or [g for g in same if len(g.children) >= 2])
        if not candidates:
            return
        victim_group = max(candidates, key=lambda g: len(g.children))
        digit = first_digit(victim_group.id)
        kids = list(victim_group.children.values())
        victim = min(kids, key=lambda h: (first_digit(h.id) == digit, h.id ^ int(now * 1000)))
        others = [h for h in kids if h.id != victim.id]
        target = min(others, key=lambda h: (first_digit(h.id) != digit, h.id ^ victim.id))
        self._remove_child(victim_group, victim.id)
        self.counters["pushed-down-child"] += 1
        self.pastry.send(victim, Redirect(victim_group.id, target))

    def _feed_full(self, group: _Group) -> bool:
        """At the bound over the stripes of ``group``'s feed (their ids differ in the first
        digit only), with a child in ``group`` to hand a joiner to."""
        bound = self.config.feed_children
        if not bound or not group.children:
            return False
        return self._feed_load(group) >= bound

    def _feed_load(self, group: _Group) -> int:
        return sum(len(g.children) for g in self._feed_groups(group))

    def _feed_groups(self, group: _Group) -> list[_Group]:
        """Our groups of ``group``'s feed: its stripes, whose ids differ in the first digit only."""
        base = group.id & _BELOW_FIRST_DIGIT
        return [g for g in self.groups.values() if g.id & _BELOW_FIRST_DIGIT == base]

    def _remove_child(self, group: _Group, child: int) -> None:
        group.children.pop(child, None)
        group.child_heard.pop(child, None)
        group.child_sent.pop(child, None)
        for waiting in group.waiting.values():
            for handle in [h for h in waiting if h.id == child]:
                waiting.discard(handle)
        if not group.children and group.log is None and not group.root:
            self._drop(group)

    def _on_join_ack(self, now: float, group: _Group, sender: Handle, ack: JoinAck) -> None:
        if self.handle.id in ack.path:
            self.pastry.send(sender, Unsubscribe(group.id))   # would be a loop: refuse
            return
        if self._is_shunned(now, sender):
            # a freeloader adopted us again (a join routed through it): refuse, route around it
            self.counters["shunned-refused"] += 1
            self.pastry.send(sender, Unsubscribe(group.id))
            self.pastry.declare_dead(now, sender)
            if group.parent is None and not group.root:
                self._join(now, group)
            return
        if group.parent is not None and group.parent.id != sender.id:
            self.pastry.send(group.parent, Unsubscribe(group.id))
        group.parent, group.parent_heard, group.path = sender, now, ack.path
        group.from_parent.clear()
        group.judged_to = group.announced = ack.newest
        group.withheld_streak = 0
        group.root = False
        group.joining_since = None
        self.counters["attached"] += 1
        self._catch_up(now, group, ack.newest)

    def _tick(self, now: float) -> None:
        config = self.config
        self._ticks += 1
        if config.rumour_every and self._ticks % config.rumour_every == 0:
            self._spread_rumour()
        if config.balance_min_ratio:
            self._judge_children(now)
        for group in list(self.groups.values()):
            if group.root:
                if self.pastry.next_hop(group.id) is not None:
                    group.root = False   # a node closer to the group id exists: hang below it
                    self._join(now, group)
            elif group.parent is not None:
                if now - group.parent_heard > config.parent_timeout:
                    self.counters["parent-silent"] += 1
                    self.pastry.declare_dead(now, group.parent)   # re-joins via node_failed
            elif group.joining_since is not None and now - group.joining_since > config.join_retry:
                self._join(now, group)
            if group.parent is not None and (self._ticks_refresh(now, group)):
                self.pastry.send(group.parent, Refresh(group.id))
            for child_id, child in list(group.children.items()):
                if now - group.child_heard.get(child_id, now) > 3 * config.refresh_period:
                    self._remove_child(group, child_id)
                elif now - group.child_sent.get(child_id, 0.0) >= config.heartbeat_period * 0.99:
                    announced = 0 if config.hide_newest else group.newest
                    self.pastry.send(child, Heartbeat(group.id, (self.handle.id, *group.path),
                                                      announced))
                    group.child_sent[child_id] = now
            if group.log is not None and group.log.missing:
                self._ask(now, group, group.log.missing)
            if group.waiting:
                self._forget_waiting(group)
            if group.rumoured is not None:
                self._follow_rumour(now, group)

    def _ticks_refresh(self, now: float, group: _Group) -> bool:
        # one Refresh every refresh_period, spread by the node id so they do not all go at once
        period = self.config.refresh_period
        step = self.config.heartbeat_period
        phase = (self.handle.id % 1000) / 1000 * period
        return (now - phase) % period < step

    # ---- items --------------------------------------------------------------------------------
    def _on_item(self, now: float, group: _Group, item: Item, *, from_parent: bool) -> None:
        if item.seq in group.buffer or (group.log is not None and 0 < item.seq <= group.log.seq):
            self.counters["duplicates"] += 1
            self._answer_waiting(group, item)
            return
        if group.log is not None:
            verdict = group.log.receive(item.wire)
            if verdict.refused is not None:
                self.counters[f"refused-{verdict.refused}"] += 1
                return
            for record in verdict.delivered:
                self.deliveries.append(Delivery(group.id, record, now, item.recovered
                                                or len(verdict.delivered) > 1))
            if verdict.missing:
                self._ask(now, group, verdict.missing)
        self._buffer(group, item)
        group.newest = max(group.newest, item.seq)
        group.asked.pop(item.seq, None)
        if from_parent and self.config.forward:
            for child_id, child in group.children.items():
                self._send_item(child, Item(group.id, item.seq, item.wire))
                group.child_sent[child_id] = now
                self.counters["forwarded"] += 1
        self._answer_waiting(group, item)

    def _buffer(self, group: _Group, item: Item) -> None:
        foreign = group.log is None
        size = len(item.wire)
        cap = self.config.max_foreign_bytes
        while foreign and group.buffer and self._foreign_bytes + size > cap:
            self._unbuffer_oldest(group)
        if foreign and self._foreign_bytes + size > cap:
            self.counters["buffer-full"] += 1   # forwarded, not kept
            return
        group.buffer[item.seq] = item.wire
        group.buffer_bytes += size
        if foreign:
            self._foreign_bytes += size
        while len(group.buffer) > self.config.buffer_size:
            self._unbuffer_oldest(group)

    def _unbuffer_oldest(self, group: _Group) -> None:
        _, wire = group.buffer.popitem(last=False)
        group.buffer_bytes -= len(wire)
        if group.log is None:
            self._foreign_bytes -= len(wire)

    def _forget_waiting(self, group: _Group) -> None:
        """Seqs children wait for that can no longer come: at or below our head (a gap the HTTP
        feed filled) or, without a log, older than the buffer holds."""
        low = (group.log.seq if group.log is not None
               else group.newest - self.config.buffer_size)
        for seq in [s for s in group.waiting if s <= low and s not in group.buffer]:
            del group.waiting[seq]
            self.counters["waiting-forgotten"] += 1

    def _send_item(self, to: Handle, item: Item) -> None:
        self.ledger.sent(to.id, len(item.wire))
        self.pastry.send(to, item)

    def _answer_waiting(self, group: _Group, item: Item) -> None:
        waiting = group.waiting.pop(item.seq, ())
        if not self.config.forward:
            return
        for child in waiting:
            self._send_item(child, Item(group.id, item.seq, item.wire, recovered=True))

    # ---- freeloading --------------------------------------------------------------------------
    def _judge_parent(self, now: float, group: _Group, newest: int) -> bool:
        """Compare what the parent announced with what it sent; True when it is found to freeload
        (it is then shunned and declared dead to Pastry: the child joins around it).

        A seq is judged one heartbeat after it was announced, so that a parent that got it by
        recovery itself (and so did not forward it) has had time to answer our ``Recover``: an
        honest parent answers, a freeloader does not."""
        upto, group.announced = group.announced, max(group.announced, newest)
        if upto <= group.judged_to or group.parent is None:
            return False
        for seq in range(group.judged_to + 1, upto + 1):
            if not group.carries(seq):
                continue   # travels in another stripe: not this parent's to send
            if seq in group.from_parent:
                group.withheld_streak = 0
            else:
                group.withheld_streak += 1
        group.from_parent = {s for s in group.from_parent if s > upto}
        group.judged_to = upto
        limit = self.config.freeload_streak
        if not limit or group.withheld_streak < limit:
            return False
        parent = group.parent
        self.counters["freeloader-detected"] += 1
        self.shunned[parent.id] = now + self.config.shun_period
        self.pastry.send(parent, Unsubscribe(group.id))
        self.pastry.declare_dead(now, parent)      # re-joins through node_failed, routed around
        if group.parent is not None and group.parent.id == parent.id:
            group.parent = None
            self._join(now, group)
        return True

    def _judge_children(self, now: float) -> None:
        """Pairwise balance, once per tick: a child in debt is asked to repay (adopt us in a group
        we both belong to, and forward us its records); one that stays below the ratio is dropped,
        denied service for ``shun_period`` and, if it became our parent somewhere, left there."""
        children = {c.id: c for g in self.groups.values() for c in g.children.values()}
        for child_id, child in children.items():
            if self.ledger.judge(child_id):
                self.counters["balance-dropped"] += 1
                self.shunned[child_id] = now + self.config.shun_period
                self._repay_asked.pop(child_id, None)
                for group in list(self.groups.values()):
                    if child_id in group.children:
                        self.pastry.send(child, Unsubscribe(group.id))
                        self._remove_child(group, child_id)
                if any(g.parent is not None and g.parent.id == child_id
                       for g in self.groups.values()):
                    self.pastry.declare_dead(now, child)   # re-joins around it
            elif self.ledger.in_debt(child_id) and not any(
                    g.parent is not None and g.parent.id == child_id
                    for g in self.groups.values()):
                self._ask_repayment(child)   # one more group each tick until it adopts us

    def _ask_repayment(self, child: Handle) -> None:
        asked = self._repay_asked.setdefault(child.id, set())
        children = {c for g in self.groups.values() for c in g.children}
        taken = set().union(*(groups for other, groups in self._repay_asked.items()
                              if other != child.id))      # one repaying child per group
        taken |= asked
        for group in self.groups.values():
            if group.id in taken or group.log is None or group.root or child.id in group.children:
                continue
            if group.parent is not None and group.parent.id in children:
                continue   # a child already repays us there (or is being asked to)
            asked.add(group.id)
            self.counters["repayment-asked"] += 1
            self.pastry.send(child, Adopt(group.id, repay=True))
            return

    def _is_shunned(self, now: float, node: Handle) -> bool:
        until = self.shunned.get(node.id)
        if until is None:
            return False
        if now >= until:
            del self.shunned[node.id]
            return False
        return True

    def _spread_rumour(self) -> None:
        held = [(g.id, g.newest) for g in self.groups.values() if g.newest]
        neighbours = self.pastry.leaves.members()
        if not held or not neighbours:
            return
        to = neighbours[(self._ticks // self.config.rumour_every) % len(neighbours)]
        self.counters["rumours-sent"] += 1
        self.pastry.send(to, Rumour(tuple(g for g, _ in held), tuple(n for _, n in held)))

    def _on_rumour(self, now: float, sender: Handle, rumour: Rumour) -> None:
        if len(rumour.groups) != len(rumour.newest):
            self.counters["unknown-message"] += 1
            return
        ours_groups, ours_newest = [], []
        for gid, newest in zip(rumour.groups, rumour.newest, strict=True):
            group = self.groups.get(gid)
            if group is None:
                continue
            ours_groups.append(gid)
            ours_newest.append(group.newest)
            if group.log is not None and newest > max(group.log.seq, group.newest):
                # acted on a tick later, when what is still on its way down the tree has come
                group.rumoured = (sender, max(newest, group.rumoured[1] if group.rumoured else 0),
                                  now)
        if not rumour.reply and ours_groups:
            self.pastry.send(sender, Rumour(tuple(ours_groups), tuple(ours_newest), reply=True))

    def _probe(self, group: _Group, before: int, newest: int) -> None:
        """Ask the parent for records we hold from others but it never sent: an honest parent
        that got them late (by recovery) answers before they are judged, a freeloader does not."""
        first = max(before, newest - self.config.buffer_size) + 1
        seqs = tuple(s for s in range(first, newest + 1)
                     if s in group.buffer and s not in group.from_parent)
        if seqs and group.parent is not None:
            self.counters["parent-probed"] += len(seqs)
            self.pastry.send(group.parent, Vouch(group.id, seqs))

    def _follow_rumour(self, now: float, group: _Group) -> None:
        teller, newest, heard = group.rumoured
        if now - heard < self.config.heartbeat_period * 0.99:
            return
        group.rumoured = None
        if group.log is None or newest <= max(group.log.seq, group.newest):
            return
        # ask the teller for the records (the last buffer_size of them): they are evidence only
        # once verified, and then whatever our parent did not send counts against it
        first = max(group.log.seq + 1, newest - self.config.buffer_size + 1)
        wanted = tuple(s for s in range(first, newest + 1)
                       if s not in group.buffer and group.carries(s))
        if wanted:
            self.counters["rumour-asked"] += len(wanted)
            self.pastry.send(teller, Recover(group.id, wanted))

    def _catch_up(self, now: float, group: _Group, newest: int) -> None:
        if group.log is not None:
            group.log.announce(newest)   # a gap even with nothing held (back from an absence)
            have = group.log.seq
        else:
            # a forwarder that attached after records went down the tree fetches the last
            # buffer_size of them, so its heartbeats tell its children (they recover from it)
            have = max(group.newest, newest - self.config.buffer_size)
        if newest > have:
            missing = [s for s in range(have + 1, newest + 1) if s not in group.buffer]
            if missing:
                self._ask(now, group, missing)

    def _ask(self, now: float, group: _Group, seqs) -> None:
        if group.stripes > 1:
            # each missing record is asked of the parent in the stripe it travels in
            by_stripe: dict[int, list[int]] = {}
            for seq in seqs:
                by_stripe.setdefault(group.siblings[seq % group.stripes], []).append(seq)
            for gid, part in by_stripe.items():
                sibling = self.groups.get(gid)
                if sibling is None:
                    continue
                # records of different stripes overtake each other: a gap is one only once its
                # own stripe has sent or announced a later record (each tree is FIFO)
                known = max(sibling.newest, sibling.announced)
                part = [seq for seq in part if seq <= known]
                if part:
                    self._ask_parent(now, sibling, part)
            return
        self._ask_parent(now, group, seqs)

    def _ask_parent(self, now: float, group: _Group, seqs) -> None:
        window = self.config.seq_window
        top = self._known(group) + window
        wanted = tuple(s for s in seqs if 0 < s <= top and s not in group.buffer
                       and now - group.asked.get(s, -1e9) >= self.config.recover_retry)
        if not wanted or group.parent is None:
            return
        if len(group.asked) + len(wanted) > window:
            # forget asks answered long ago (or never): what is still missing is asked again
            stale = now - 4 * self.config.recover_retry
            group.asked = {s: t for s, t in group.asked.items() if t > stale and s not in wanted}
            wanted = wanted[:max(0, window - len(group.asked))]
            if not wanted:
                self.counters["asked-full"] += 1
                return
        for seq in wanted:
            group.asked[seq] = now
        self.counters["recover-asked"] += len(wanted)
        self.pastry.send(group.parent, Recover(group.id, wanted))

    def _on_recover(self, now: float, group: _Group, child: Handle, seqs: tuple[int, ...], *,
                    holder: bool = False) -> None:
        if not self.config.forward:
            return
        is_child = child.id in group.children
        if not is_child and not self._is_validated(child):
            self.counters["recover-unvalidated"] += 1   # a forged source: no reflection
            return
        window = self.config.seq_window
        top = self._known(group) + window
        head = group.log.seq if group.log is not None else 0
        share = window // 2   # one child never holds more than half of a group's waiting seqs
        mine = sum(1 for waiting in group.waiting.values() if child in waiting) if is_child else 0
        lacking = []
        for seq in dict.fromkeys(seqs):
            wire = group.buffer.get(seq)
            if wire is not None:
                self._send_item(child, Item(group.id, seq, wire, recovered=True))
                self.counters["recover-served"] += 1
            elif not 0 < seq <= top or seq <= head:
                self.counters["recover-refused"] += 1   # beyond the window, or never again ours
            elif not is_child:
                self.counters["recover-lacking"] += 1   # a validated peer: served, not awaited
            elif mine < share and (seq in group.waiting or len(group.waiting) < window):
                waiting = group.waiting.setdefault(seq, set())
                if child not in waiting:
                    waiting.add(child)
                    mine += 1
                lacking.append(seq)
            else:
                self.counters["waiting-full"] += 1
        if lacking and holder:
            self.pastry.send(child, Recover(group.id, tuple(lacking)))   # it holds them
        elif lacking:
            self._ask(now, group, lacking)
