"""Pastry's routing state: the prefix routing table and the leaf set (pure data, no messages).

The routing table has one row per shared-prefix length and one column per next digit; each slot
holds one node, and a candidate replaces the holder only when its measured round trip is lower
(proximity neighbour selection). The leaf set holds the ``half`` nearest nodes on each side of the
ring; it decides delivery, so it is what must stay right when nodes die.
"""

from __future__ import annotations

from feedmesh.mesh.overlay.ids import BASE, DIGITS, RING, Handle, digit, shared_prefix

__all__ = ["LeafSet", "RoutingTable"]


class RoutingTable:
    def __init__(self, own: int) -> None:
        self.own = own
        self.rows: list[list[Handle | None]] = [[None] * BASE for _ in range(DIGITS)]

    def slot(self, node: int) -> tuple[int, int] | None:
        row = shared_prefix(self.own, node)
        return None if row == DIGITS else (row, digit(node, row))

    def get(self, row: int, column: int) -> Handle | None:
        return self.rows[row][column]

    def consider(self, handle: Handle, rtt: dict[int, float]) -> str:
        """Offer ``handle``; returns ``set``, ``kept``, ``replaced`` or ``probe`` (RTT unknown)."""
        place = self.slot(handle.id)
        if place is None:
            return "kept"
        row, column = place
        holder = self.rows[row][column]
        if holder is None:
            self.rows[row][column] = handle
            return "set"
        if holder.id == handle.id:
            if holder.addr != handle.addr:
                self.rows[row][column] = handle
            return "kept"
        if handle.id not in rtt:
            return "probe"
        if rtt[handle.id] < rtt.get(holder.id, float("inf")):
            self.rows[row][column] = handle
            return "replaced"
        return "kept"

    def remove(self, node: int) -> bool:
        place = self.slot(node)
        if place is None:
            return False
        row, column = place
        holder = self.rows[row][column]
        if holder is not None and holder.id == node:
            self.rows[row][column] = None
            return True
        return False

    def holds(self, node: int) -> bool:
        place = self.slot(node)
        if place is None:
            return False
        holder = self.rows[place[0]][place[1]]
        return holder is not None and holder.id == node

    def row(self, index: int) -> list[Handle]:
        return [h for h in self.rows[index] if h is not None]

    def handles(self) -> list[Handle]:
        return [h for row in self.rows for h in row if h is not None]


class LeafSet:
    def __init__(self, own: Handle, half: int) -> None:
        self.own = own
        self.half = half
        self.right: list[Handle] = []   # clockwise (larger ids), nearest first
        self.left: list[Handle] = []    # counter-clockwise, nearest first

    def _clockwise(self, handle: Handle) -> int:
        return (handle.id - self.own.id) % RING

    def _counter(self, handle: Handle) -> int:
        return (self.own.id - handle.id) % RING

    def consider(self, handle: Handle) -> bool:
        if handle.id == self.own.id:
            return False
        changed = self._insert(self.right, handle, self._clockwise)
        return self._insert(self.left, handle, self._counter) or changed

    def _insert(self, side: list[Handle], handle: Handle, distance) -> bool:
        if len(side) >= self.half and distance(handle) > distance(side[-1]):
            return False   # the common case, decided without a scan
        for index, present in enumerate(side):
            if present.id == handle.id:
                if present.addr != handle.addr:
                    side[index] = handle
                return False
        if len(side) >= self.half and distance(handle) >= distance(side[-1]):
            return False
        side.append(handle)
        side.sort(key=distance)
        del side[self.half:]
        return True

    def remove(self, node: int) -> bool:
        before = len(self.right) + len(self.left)
        self.right = [h for h in self.right if h.id != node]
        self.left = [h for h in self.left if h.id != node]
        return len(self.right) + len(self.left) != before

    def members(self) -> list[Handle]:
        seen: dict[int, Handle] = {}
        for handle in self.left + self.right:
            seen.setdefault(handle.id, handle)
        return list(seen.values())

    def __contains__(self, node: int) -> bool:
        return any(h.id == node for h in self.left) or any(h.id == node for h in self.right)

    def complete(self) -> bool:
        return len(self.left) >= self.half and len(self.right) >= self.half

    def covers(self, key: int) -> bool:
        """Whether ``key`` lies between the farthest leaves (then a leaf or we are its root)."""
        if not self.complete():
            return True   # fewer than 2*half others known on a side: the ring is all we see
        leftmost, rightmost = self.left[-1], self.right[-1]
        return (key - leftmost.id) % RING <= (rightmost.id - leftmost.id) % RING
