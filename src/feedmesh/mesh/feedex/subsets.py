"""Subscription sets with hop counts of interest (3.1, 3.2): pure set arithmetic.

A subscription set maps a feed URL to a hop count: 0, the node reads the feed itself (its
*direct* set); h > 0, a node h hops away through it does. What a node advertises to neighbour N
is its direct set at hop 0 plus, for every other feed some *other* neighbour M advertised at hop
h, that feed at h + 1 (the smallest over M), kept only up to ``max_hops``. N's own advertisement
is left out, or a node would advertise back to N the feeds only N wants (the paper's rule for
both the connect reply and every update).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

__all__ = ["advertisement", "advertisements", "apply_update", "diff", "usefulness"]

_FAR = 1 << 30


def advertisement(direct: Iterable[str], neighbour_sets: Mapping[Hashable, Mapping[str, int]],
                  exclude: Hashable | None, max_hops: int) -> dict[str, int]:
    """The set to advertise to ``exclude`` (None: to a node that is not a neighbour yet)."""
    out: dict[str, int] = {}
    for peer, subset in neighbour_sets.items():
        if peer == exclude:
            continue
        for feed, hops in subset.items():
            h = hops + 1
            if h <= max_hops and h < out.get(feed, _FAR):
                out[feed] = h
    for feed in direct:
        out[feed] = 0
    return out


def advertisements(direct: Iterable[str], neighbour_sets: Mapping[Hashable, Mapping[str, int]],
                   max_hops: int) -> dict[Hashable, dict[str, int]]:
    """:func:`advertisement` for every neighbour at once, in one pass over the sets: per feed the
    two smallest hop counts (and who gave the smallest) are enough to leave any one neighbour
    out."""
    direct = set(direct)
    best: dict[str, list] = {}  # feed -> [h1, peer1, h2]
    for peer, subset in neighbour_sets.items():
        for feed, hops in subset.items():
            if feed in direct:
                continue
            h = hops + 1
            if h > max_hops:
                continue
            slot = best.get(feed)
            if slot is None:
                best[feed] = [h, peer, _FAR]
            elif h < slot[0]:
                slot[2] = slot[0]
                slot[0], slot[1] = h, peer
            elif h < slot[2]:
                slot[2] = h
    base = dict.fromkeys(direct, 0)
    result: dict[Hashable, dict[str, int]] = {}
    for peer in neighbour_sets:
        out = dict(base)
        for feed, (h1, p1, h2) in best.items():
            if p1 != peer:
                out[feed] = h1
            elif h2 < _FAR:
                out[feed] = h2
        result[peer] = out
    return result


def diff(previous: Mapping[str, int], current: Mapping[str, int]) -> tuple[dict[str, int],
                                                                            list[str]]:
    """(feeds new or with a changed hop count, feeds gone): the incremental update."""
    added = {f: h for f, h in current.items() if previous.get(f) != h}
    removed = [f for f in previous if f not in current]
    return added, removed


def apply_update(subset: Mapping[str, int], added: Mapping[str, int],
                 removed: Iterable[str]) -> dict[str, int]:
    """``subset`` after an incremental update (the inverse of :func:`diff`)."""
    out = dict(subset)
    for feed in removed:
        out.pop(feed, None)
    out.update(added)
    return out


def usefulness(weights: Mapping[str, float], subset: Mapping[str, int], base: float) -> float:
    """u(Q) = sum over feeds in our direct set and Q's set of w_i * base^-h_i (3.2)."""
    if len(weights) > len(subset):
        return sum(weights[f] * base ** -h for f, h in subset.items() if f in weights)
    return sum(w * base ** -subset[f] for f, w in weights.items() if f in subset)
