"""The tracker's core (3.1): a list of live nodes, like Gnutella's host cache or a BitTorrent tracker.

A node calls ``get_neighbors``; the tracker records the caller (its identity is the address the
transport saw, with the stated port) and answers with a random sample of other nodes heard from
within ``ttl_s``. Pure: time comes in, the random source is injected. Sampling is O(want), not
O(nodes): the nodes sit in a list with an index, removed by swapping with the last.
"""

from __future__ import annotations

import random

from .messages import Address, Error, GetNeighbors, Message, Neighbors

__all__ = ["Tracker"]


class Tracker:
    """State of one tracker; :meth:`receive` answers one message."""

    def __init__(self, *, ttl_s: float = 1800.0, max_nodes: int = 1_000_000,
                 rng: random.Random | None = None) -> None:
        self.ttl_s = ttl_s
        self.max_nodes = max_nodes
        self._rng = rng or random.Random(0)
        self._nodes: list[Address] = []
        self._index: dict[Address, int] = {}
        self._heard: dict[Address, float] = {}
        self._pruned_at = float("-inf")

    def receive(self, now: float, sender: Address, message: Message) -> Message:
        if not isinstance(message, GetNeighbors):
            return Error("unsupported", f"a tracker answers get_neighbors only, not "
                                        f"{type(message).__name__}")
        self._prune(now)
        if sender not in self._index and len(self._nodes) < self.max_nodes:
            self._index[sender] = len(self._nodes)
            self._nodes.append(sender)
        self._heard[sender] = now
        nodes = self._nodes
        want = min(message.want, len(nodes) - (sender in self._index))
        peers: list[Address] = []
        if want * 3 >= len(nodes):
            others = [a for a in nodes if a != sender]
            peers = self._rng.sample(others, min(want, len(others)))
        else:
            chosen: set[Address] = {sender}
            while len(peers) < want:
                pick = nodes[self._rng.randrange(len(nodes))]
                if pick not in chosen:
                    chosen.add(pick)
                    peers.append(pick)
        return Neighbors(peers)

    def forget(self, address: Address) -> None:
        """Remove ``address`` (it left, or was reported dead)."""
        i = self._index.pop(address, None)
        self._heard.pop(address, None)
        if i is None:
            return
        last = self._nodes.pop()
        if i < len(self._nodes):
            self._nodes[i] = last
            self._index[last] = i

    def _prune(self, now: float) -> None:
        if now - self._pruned_at < self.ttl_s / 10:
            return
        self._pruned_at = now
        horizon = now - self.ttl_s
        for address in [a for a, t in self._heard.items() if t < horizon]:
            self.forget(address)

    def __len__(self) -> int:
        return len(self._nodes)
