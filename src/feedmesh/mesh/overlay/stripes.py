"""SplitStream-style stripes (paper 4.4): a feed's records spread over ``k`` Scribe trees.

Record ``seq`` travels in stripe ``seq % k``. The stripes' group ids are the feed's group id with
its first base-16 digit replaced, one digit per stripe, spread over the 16 (SplitStream's trick):
a join is routed through nodes sharing ever longer prefixes with the group id, so every forwarder
of stripe ``i`` but the joiner itself has the stripe's first digit, and a node whose id starts
with another digit is a leaf there. Each node so forwards in about one stripe (``k`` = 16: exactly
one), and the forwarding load of a feed is spread over all nodes instead of the one tree's
interior. A subscriber keeps one log for the feed, fed from every stripe; a gap is asked of the
parent in the stripe the missing record travels in.
"""

from __future__ import annotations

from feedmesh.mesh.overlay.ids import ID_BITS, group_id

__all__ = ["MAX_STRIPES", "first_digit", "stripe_groups", "stripe_of"]

MAX_STRIPES = 16
_DIGIT_SHIFT = ID_BITS - 4


def first_digit(node_or_group: int) -> int:
    return node_or_group >> _DIGIT_SHIFT


def stripe_groups(topic: str, stripes: int) -> tuple[int, ...]:
    """The group ids of ``topic``'s ``stripes`` stripes (1 <= stripes <= 16)."""
    if not 1 <= stripes <= MAX_STRIPES:
        raise ValueError(f"stripes must be 1 to {MAX_STRIPES}, not {stripes}")
    base = group_id(topic) & ((1 << _DIGIT_SHIFT) - 1)
    return tuple(((i * MAX_STRIPES // stripes) << _DIGIT_SHIFT) | base for i in range(stripes))


def stripe_of(seq: int, stripes: int) -> int:
    """The stripe record ``seq`` travels in."""
    return seq % stripes
