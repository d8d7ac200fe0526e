"""What a node keeps about each neighbour and about every peer's standing (3.2, 3.5, bad peers)."""

from __future__ import annotations

from collections import OrderedDict

from .messages import Address

__all__ = ["Neighbour", "PastLedgers", "Standing"]


class Neighbour:
    """One neighbour: its advertised set, our last advertisement to it, and the contribution
    ledger of 3.5 (``given`` = c_ij, what we gave it; ``received`` = c_ji, what it gave us)."""

    __slots__ = ("address", "advertised", "confirmed", "entries_from", "entries_to", "fetch_times",
                 "given", "last_heard", "probation", "probed_at", "received", "relayed_times",
                 "sent_plans", "sent_times", "since", "subset")

    def __init__(self, address: Address, subset: dict[str, int], now: float) -> None:
        self.address = address
        self.subset = subset
        self.advertised: dict[str, int] = {}
        self.fetch_times: dict[str, float] = {}
        """Its planned fetch time of each feed it follows, as it advertised them."""
        self.relayed_times: dict[str, list[float]] = {}
        """Its other neighbours' planned fetch times, per feed, as it relayed them."""
        self.sent_times: tuple[dict, dict] = ({}, {})
        self.sent_plans: dict[str, int] = {}
        """Feed -> the :class:`~.plans.KnownPlans` sequence number we last told it up to."""
        self.since = now
        self.last_heard = now
        self.probed_at: float | None = None
        self.given = 0.0
        self.received = 0.0
        self.entries_from = 0
        self.entries_to = 0
        self.confirmed = 0
        """Entries it sent that our own fetches of their feed found (:mod:`.audit`): the only
        usefulness a newcomer can show that is not its word."""
        self.probation = False
        """Taken beyond ``max_neighbours`` while full; it displaces a neighbour only once it has
        more ``confirmed`` entries (:meth:`FeedExNode._trials`)."""

    @property
    def deficit(self) -> float:
        """d_ij = c_ij - c_ji: how much more we gave than we got."""
        return self.given - self.received

    def owes(self, ratio: float) -> float:
        """c_ij - ratio * c_ji, what the bound D applies to."""
        return self.given - ratio * self.received


class PastLedgers:
    """The contribution ledgers of neighbours that left, kept by identity (address and stated
    port) for ``keep_s``: a neighbour that comes back gets its ledger back, so a free rider does
    not start clean by reconnecting (whitewashing). At most ``cap`` are kept, the oldest go."""

    __slots__ = ("_ledgers", "cap", "keep_s")

    def __init__(self, keep_s: float, cap: int = 4096) -> None:
        self.keep_s = keep_s
        self.cap = cap
        self._ledgers: OrderedDict[Address, tuple[float, float, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._ledgers)

    def keep(self, now: float, neighbour: Neighbour) -> None:
        if self.keep_s <= 0 or (neighbour.given == 0.0 and neighbour.received == 0.0):
            return
        self._ledgers.pop(neighbour.address, None)
        self._ledgers[neighbour.address] = (neighbour.given, neighbour.received, now + self.keep_s)
        while len(self._ledgers) > self.cap:
            self._ledgers.popitem(last=False)

    def restore(self, now: float, neighbour: Neighbour) -> bool:
        """Give a new ``neighbour`` the ledger it left with, if kept and recent enough."""
        kept = self._ledgers.pop(neighbour.address, None)
        if kept is None or kept[2] <= now:
            return False
        neighbour.given, neighbour.received = kept[0], kept[1]
        return True


class Standing:
    """Every peer's standing (0 for strangers, lowered by bad calls), bans and a per-peer call
    budget per minute (flood protection)."""

    __slots__ = ("_banned", "_calls", "_score", "ban_s", "calls_per_minute", "drop_at")

    def __init__(self, drop_at: float, ban_s: float, calls_per_minute: int) -> None:
        self.drop_at = drop_at
        self.ban_s = ban_s
        self.calls_per_minute = calls_per_minute
        self._score: dict[Address, float] = {}
        self._banned: dict[Address, float] = {}
        self._calls: dict[Address, list] = {}  # address -> [minute, calls in it]

    def score(self, address: Address) -> float:
        return self._score.get(address, 0.0)

    def lower(self, now: float, address: Address, amount: float) -> bool:
        """Lower ``address``'s standing; True when it falls to the drop line (it is then banned)."""
        score = self._score.get(address, 0.0) - amount
        self._score[address] = score
        if score <= self.drop_at:
            self._banned[address] = now + self.ban_s
            return True
        return False

    def banned(self, now: float, address: Address) -> bool:
        until = self._banned.get(address)
        if until is None:
            return False
        if until <= now:
            del self._banned[address]
            self._score.pop(address, None)
            return False
        return True

    def allow_call(self, now: float, address: Address) -> bool:
        """Count one call; False past the budget of this minute."""
        minute = int(now // 60)
        slot = self._calls.get(address)
        if slot is None or slot[0] != minute:
            self._calls[address] = [minute, 1]
            return True
        slot[1] += 1
        return slot[1] <= self.calls_per_minute

    def forget_calls(self, now: float) -> None:
        minute = int(now // 60)
        for address in [a for a, s in self._calls.items() if s[0] < minute]:
            del self._calls[address]
