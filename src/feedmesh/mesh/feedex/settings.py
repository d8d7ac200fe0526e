"""FeedEx settings: one frozen object, Table 2 of the paper for defaults, checked on
construction."""

from __future__ import annotations

from dataclasses import dataclass

from feedmesh.errors import FeedmeshError

__all__ = ["FeedExSettings", "FeedExSettingsError"]


class FeedExSettingsError(FeedmeshError, ValueError):
    """A FeedEx setting is out of range; the message names it."""


@dataclass(frozen=True, slots=True)
class FeedExSettings:
    """Everything a FeedEx node can be tuned by. Times are seconds.

    The paper's Table 2: ``max_subset_hops`` 3, ``advertise_interval_s`` 300, ``max_neighbours``
    10, ``min_neighbours`` 8 (subscription set size 20 is the experiment's, not a setting).
    """

    max_subset_hops: int = 3
    advertise_interval_s: float = 300.0
    min_neighbours: int = 8
    max_neighbours: int = 10
    usefulness_base: float = 2.0
    """``d`` of u(Q) = sum w_i d^-h_i (section 3.2)."""
    contribution_base: float = 2.0
    """``alpha`` of c_ji += w_f alpha^-h_f (section 3.5)."""
    max_deficit: float = 20.0
    """``D``: a neighbour is no longer served once c_ij - ratio * c_ji > D (3.5)."""
    ledger_memory_s: float = 86400.0
    """A neighbour's contribution ledger is kept this long after it leaves, by identity, and
    given back if it reconnects (against whitewashing; 0: forgotten at once, as in the paper)."""
    deficit_ratio: float = 4.0
    """The paper bounds c_ij - c_ji; here c_ji counts ``deficit_ratio`` times. Between two
    cooperators the flow is lopsided where one relays the other's feeds (it credits relayed
    entries at alpha^-h, the other credits them at 1), so the paper's bound (ratio 1) cuts
    cooperators too; a free rider (c_ji = 0) is cut at D either way."""
    offer_credit: float = 0.5
    """Share of a put's credit (c_ji) a neighbour earns for a prompt offer: a check_did for a
    bundle we got less than ``offer_credit_s`` before, that we did not give it and it was not
    known to hold. A cooperator that forwards what it gets offers us most bundles just after
    another path brought them, so its puts are few though it gives all it can; a free rider
    offers nothing, and a late offer (of what we surely hold) earns nothing (0: the paper's
    ledger, entries received only)."""
    offer_credit_s: float = 60.0
    maintain_interval_s: float = 60.0
    """How often neighbours are checked (dead ones dropped, the set replenished)."""
    dead_after_s: float = 900.0
    """A neighbour silent this long is dead (adverts go out every 300 s, so three missed)."""
    connect_timeout_s: float = 30.0
    reply_timeout_s: float = 30.0
    """A check_did left unanswered this long is given up."""
    check_hold_s: float = 20.0
    """After answering "unseen" to one neighbour, answer "seen" to others for this long: the first
    one's put_entries is on its way (saves duplicate puts when neighbours forward at once)."""
    tracker_refresh_s: float = 1800.0
    """Re-announce to the tracker this often, and no more often ask it for more candidates."""
    did_cache_exact: int = 1000
    """Latest dids kept exactly (the paper's prototype: 1,000)."""
    did_cache_bloom: int = 100_000
    """Older dids go to a Bloom filter sized for this many (1% false positives)."""
    known_entries_per_feed: int = 2048
    """Entry keys remembered per feed, to strip what is already stored before forwarding."""
    query_timeout_s: float = 10.0
    """A relayed query waits this long per remaining hop for its neighbours' answers."""
    query_max_hops: int = 4
    answer_cache_s: float = 600.0
    forged_path_penalty: float = 5.0
    malformed_penalty: float = 1.0
    drop_standing: float = -10.0
    """A peer whose standing falls to this is dropped and refused for ``ban_s``."""
    ban_s: float = 3600.0
    max_calls_per_minute: int = 300
    """Calls a peer may make per minute; more are refused (flood protection)."""
    audit_sample: float = 0.25
    """Share of the new entries neighbours bring for feeds we follow that are checked against our
    next fetch of the feed (fake entries, :mod:`feedmesh.mesh.feedex.audit`; 0: none)."""
    audit_per_feed: int = 256
    """Sampled entries waiting per feed (the oldest are given up first)."""
    audit_grace_s: float = 60.0
    """An entry is judged by a fetch at least this long after it came (the document may have
    been requested before)."""
    audit_max_age_s: float = 2 * 86400.0
    """A sampled entry not judged within this long is given up."""
    fake_entry_penalty: float = 2.5
    """Standing lost per entry the source never had (four fakes reach ``drop_standing``)."""
    forward_batch_s: float = 0.0
    """Hold forwards to a neighbour this long to send several dids in one check_did (0: at once)."""
    share_fetch_times: bool = False
    """Advertise last-fetch times so neighbours spread their fetches of a shared feed (the network
    as one monitor; see :mod:`feedmesh.mesh.feedex.phases`)."""
    fetch_placement: str = "gap"
    """How a node places its planned fetch among the followers it knows of
    (:mod:`feedmesh.mesh.feedex.phases`): ``gap``, the largest gap between their advertised
    times, moved later with a chance while crowded; ``rank``, the slot of its rank among them
    (every node computes the same even schedule from the same knowledge). ``rank`` measured
    behind ``gap`` in the simulator on the lag (docs/mesh-feedex.md): not the default."""
    fetch_time_horizon_s: float = 7 * 86400.0
    """Fetch times a neighbour states farther than this from now (past or future) are dropped
    on arrival; those kept count only within an interval of now (:meth:`FeedExNode.known_plans`)."""
    neighbours_per_prefix: int = 1
    """Neighbours kept of one network prefix (``neighbour_prefix_v4``/``_v6``): one machine or
    one network states as many ports as it likes, and holds one neighbour slot."""
    neighbour_prefix_v4: int = 24
    """The IPv4 prefix length that counts as one network (the tracker's /24; an emulation whose
    machines all sit in one loopback /24 gives 32: each address its own machine)."""
    neighbour_prefix_v6: int = 48
    probation_slots: int = 2
    """Newcomers a full node takes on trial beyond ``max_neighbours``: one displaces a neighbour
    only once our own fetches confirmed more of its entries than that neighbour's, never on what
    it states (its advertised feeds, its neighbour count)."""
    probation_s: float = 86400.0
    """A newcomer on trial that did not displace anyone within this long is dropped, and its
    prefix is not taken on trial again for as long."""

    def __post_init__(self) -> None:
        if not 0 <= self.max_subset_hops <= 16:
            raise FeedExSettingsError(
                f"max_subset_hops must be within 0..16, got {self.max_subset_hops}")
        if not 1 <= self.min_neighbours <= self.max_neighbours <= 1000:
            raise FeedExSettingsError("need 1 <= min_neighbours <= max_neighbours <= 1000, got "
                                f"{self.min_neighbours} and {self.max_neighbours}")
        for name in ("usefulness_base", "contribution_base", "deficit_ratio"):
            if getattr(self, name) < 1.0:
                raise FeedExSettingsError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("advertise_interval_s", "maintain_interval_s", "dead_after_s",
                     "connect_timeout_s", "reply_timeout_s", "tracker_refresh_s",
                     "query_timeout_s", "max_deficit", "fetch_time_horizon_s"):
            if getattr(self, name) <= 0:
                raise FeedExSettingsError(f"{name} must be > 0, got {getattr(self, name)}")
        if not 0.0 <= self.offer_credit <= 1.0 or self.offer_credit_s < 0:
            raise FeedExSettingsError("need offer_credit within 0..1 and offer_credit_s >= 0")
        if self.forward_batch_s < 0 or self.check_hold_s < 0 or self.ledger_memory_s < 0:
            raise FeedExSettingsError(
                "forward_batch_s, check_hold_s and ledger_memory_s must be >= 0")
        if self.did_cache_exact < 1 or self.did_cache_bloom < 1 or self.known_entries_per_feed < 1:
            raise FeedExSettingsError("did_cache_exact, did_cache_bloom and known_entries_per_feed "
                                "must be >= 1")
        if not 0.0 <= self.audit_sample <= 1.0:
            raise FeedExSettingsError(f"audit_sample must be within 0..1, got {self.audit_sample}")
        if self.audit_per_feed < 1 or self.audit_grace_s < 0 or self.audit_max_age_s <= 0 \
                or self.fake_entry_penalty < 0:
            raise FeedExSettingsError("need audit_per_feed >= 1, audit_grace_s >= 0, "
                                "audit_max_age_s > 0 and fake_entry_penalty >= 0")
        if not (self.neighbours_per_prefix >= 1 and 8 <= self.neighbour_prefix_v4 <= 32
                and 16 <= self.neighbour_prefix_v6 <= 128):
            raise FeedExSettingsError("need neighbours_per_prefix >= 1, neighbour_prefix_v4 "
                                      "within 8..32 and neighbour_prefix_v6 within 16..128")
        if self.fetch_placement not in ("rank", "gap"):
            raise FeedExSettingsError(
                f"fetch_placement must be rank or gap, got {self.fetch_placement!r}")
        if self.probation_slots < 0 or self.probation_s <= 0:
            raise FeedExSettingsError("need probation_slots >= 0 and probation_s > 0")
        if self.drop_standing >= 0:
            raise FeedExSettingsError(f"drop_standing must be < 0, got {self.drop_standing}")
