"""The tracker's core (3.1): a list of live nodes, like Gnutella's host cache or a BitTorrent
tracker.

A node calls ``get_neighbors``; the tracker records the caller (its identity is the address the
transport saw, with the stated port) and answers with a random sample of other nodes heard from
within ``ttl_s``. Pure: time comes in, the random source is injected. Sampling is O(want), not
O(nodes): the nodes sit in a list with an index, removed by swapping with the last.

One machine can state as many ports as it likes, and one network holds many machines: so the
tracker records at most ``per_address`` identities of one address and ``per_prefix`` of one
prefix (/24 for IPv4, /48 for IPv6), and it answers with candidates spread over prefixes (a
prefix drawn at random, then a node of it), so 1,000 identities on one /24 weigh as one prefix
among the others, not as 1,000 nodes. What that leaves an attacker: one candidate slot per
prefix it holds; with addresses in many prefixes it still takes their share (see
docs/mesh-feedex.md, "What a stranger can still do"). An emulation whose machines all sit in one
loopback /24 gives ``prefix_v4=32``: each address its own prefix.
"""

from __future__ import annotations

import ipaddress
import random

from .messages import Address, Error, GetNeighbors, Message, Neighbors

__all__ = ["Tracker", "prefix_of"]


def prefix_of(host: str, v4: int = 24, v6: int = 48) -> str:
    """The network ``host`` belongs to, as the tracker counts identities (a host that is not an
    IP address is its own)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    bits = v4 if ip.version == 4 else v6
    return str(ipaddress.ip_network(f"{ip}/{bits}", strict=False))


class _Bag:
    """A list with an index: add, remove (swap with the last) and random choice in O(1)."""

    __slots__ = ("index", "items")

    def __init__(self) -> None:
        self.items: list = []
        self.index: dict = {}

    def add(self, item: object) -> None:
        self.index[item] = len(self.items)
        self.items.append(item)

    def remove(self, item: object) -> bool:
        i = self.index.pop(item, None)
        if i is None:
            return False
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.index[last] = i
        return True

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, item: object) -> bool:
        return item in self.index


class Tracker:
    """State of one tracker; :meth:`receive` answers one message."""

    def __init__(self, *, ttl_s: float = 1800.0, max_nodes: int = 1_000_000,
                 rng: random.Random | None = None, per_address: int = 8,
                 per_prefix: int = 64, prefix_v4: int = 24, prefix_v6: int = 48) -> None:
        if per_address < 1 or per_prefix < per_address or not (
                8 <= prefix_v4 <= 32 and 16 <= prefix_v6 <= 128):
            raise ValueError("Tracker: 1 <= per_address <= per_prefix, prefix_v4 in 8..32, "
                             "prefix_v6 in 16..128")
        self.ttl_s = ttl_s
        self.max_nodes = max_nodes
        self.per_address = per_address
        self.per_prefix = per_prefix
        self.prefix_v4, self.prefix_v6 = prefix_v4, prefix_v6
        self._rng = rng or random.Random(0)
        self._nodes = _Bag()
        self._heard: dict[Address, float] = {}
        self._by_host: dict[str, int] = {}
        self._by_prefix: dict[str, _Bag] = {}
        self._prefixes = _Bag()
        self._pruned_at = float("-inf")
        self.refused = 0
        """Callers not recorded: their address or prefix held as many identities as allowed."""

    @property
    def _per_address_only(self) -> bool:
        return self.prefix_v4 == 32 and self.prefix_v6 == 128

    def receive(self, now: float, sender: Address, message: Message) -> Message:
        if not isinstance(message, GetNeighbors):
            return Error("unsupported", f"a tracker answers get_neighbors only, not "
                                        f"{type(message).__name__}")
        self._prune(now)
        if sender not in self._nodes and len(self._nodes) < self.max_nodes:
            self._record(sender)
        if sender in self._nodes:
            self._heard[sender] = now
        known = sender in self._nodes
        want = min(message.want, len(self._nodes) - known)
        if want <= 0:
            return Neighbors([])
        if self._per_address_only or len(self._prefixes) == len(self._nodes):
            # every prefix holds one identity: a prefix drawn at random is a node drawn at
            # random, and a node drawn directly needs no rounds
            return Neighbors(self._sample_nodes(sender, want))
        return Neighbors(self._sample_spread(sender, want))

    def _record(self, sender: Address) -> None:
        host = sender[0]
        prefix = prefix_of(host, self.prefix_v4, self.prefix_v6)
        members = self._by_prefix.get(prefix)
        if self._by_host.get(host, 0) >= self.per_address or (
                members is not None and len(members) >= self.per_prefix):
            self.refused += 1
            return
        self._nodes.add(sender)
        self._by_host[host] = self._by_host.get(host, 0) + 1
        if members is None:
            members = self._by_prefix[prefix] = _Bag()
            self._prefixes.add(prefix)
        members.add(sender)

    def _sample_nodes(self, sender: Address, want: int) -> list[Address]:
        nodes = self._nodes.items
        if want * 3 >= len(nodes):
            others = [a for a in nodes if a != sender]
            return self._rng.sample(others, min(want, len(others)))
        chosen: set[Address] = {sender}
        peers: list[Address] = []
        while len(peers) < want:
            pick = nodes[self._rng.randrange(len(nodes))]
            if pick not in chosen:
                chosen.add(pick)
                peers.append(pick)
        return peers

    def _sample_spread(self, sender: Address, want: int) -> list[Address]:
        """``want`` others, a prefix drawn first and then one of its nodes, each prefix once a
        round (so a prefix of many identities weighs as one)."""
        peers: list[Address] = []
        chosen: set[Address] = {sender}
        rounds = 0
        while len(peers) < want and rounds < 4 * want:
            rounds += 1
            items = self._prefixes.items
            every = len(items) <= want - len(peers)
            prefixes = self._rng.sample(items, len(items) if every else want - len(peers))
            before = len(peers)
            for prefix in prefixes:
                members = self._by_prefix[prefix].items
                fresh = [a for a in members if a not in chosen] if len(members) <= 8 else None
                if fresh is None:  # a large prefix: draw, a few tries
                    for _ in range(8):
                        pick = members[self._rng.randrange(len(members))]
                        if pick not in chosen:
                            fresh = [pick]
                            break
                if fresh:
                    pick = fresh[self._rng.randrange(len(fresh))]
                    chosen.add(pick)
                    peers.append(pick)
                    if len(peers) == want:
                        break
            if every and len(peers) == before:
                break  # every prefix tried: nothing left to give
        return peers

    def forget(self, address: Address) -> None:
        """Remove ``address`` (it left, or was reported dead)."""
        self._heard.pop(address, None)
        if not self._nodes.remove(address):
            return
        host = address[0]
        left = self._by_host[host] - 1
        if left:
            self._by_host[host] = left
        else:
            del self._by_host[host]
        prefix = prefix_of(host, self.prefix_v4, self.prefix_v6)
        members = self._by_prefix[prefix]
        members.remove(address)
        if not members:
            del self._by_prefix[prefix]
            self._prefixes.remove(prefix)

    def _prune(self, now: float) -> None:
        if now - self._pruned_at < self.ttl_s / 10:
            return
        self._pruned_at = now
        horizon = now - self.ttl_s
        for address in [a for a, t in self._heard.items() if t < horizon]:
            self.forget(address)

    def __len__(self) -> int:
        return len(self._nodes)
