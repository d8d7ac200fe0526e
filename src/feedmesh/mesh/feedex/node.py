"""A FeedEx node as a sans-IO state machine in the mesh's one dialect (:mod:`feedmesh.mesh.sansio`,
as Pastry and Scribe): (now, message from an address) and (now, local event) in; messages to
addresses, new entries for the archive and a next wake-up time out.

Nothing here opens a socket, sleeps or reads a clock. A driver (the live
:class:`~feedmesh.mesh.transport.driver.NodeDriver` under the aiohttp transport, or
:mod:`feedmesh.mesh.feedex.sim` on the one event loop) does this::

    node.start(now)                        # ask the tracker for candidates
    node.receive(now, (host, port), msg)   # host from the connection, port as stated
    node.fire(now)                         # when now >= node.next_deadline()
    node.fetched(now, feed, entries)       # our own fetch of a feed found these entries
    node.unreachable(now, address)         # a send to address failed
    node.malformed(now, address, why)      # bytes from address did not decode
    node.listed(now, feed, entries)        # our fetch got a whole document of feed

and after each call carries out what the node made: ``take()`` gives the :class:`Send` pairs
(deliver each message), ``take_deliveries()`` the :class:`Deliver` items (store the entries, show
them to the reader) and :class:`QueryResult` answers. A peer is known by the address the
transport gives, never by anything it claims about itself.

The protocol, section by section of the paper: bootstrapping and advertisements (3.1:
``_on_connect``, ``_advertise``); neighbour selection by usefulness (3.2: ``_on_connect``,
``_maintain``; not the paper's: one neighbour per network, and a full node's newcomers on
trial until entries our own fetches confirmed displace a neighbour, ``_trials``);
dissemination with check_did before put_entries (3.4: ``_forward``, ``_on_check_did``,
``_on_did_status``, ``_on_put``); incentives (3.5: ``Neighbour.deficit``);
recursive queries (3.6: ``query``, ``_on_query``, :mod:`.queries`); fake entries (bad peers:
``listed``, :mod:`.audit`).
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence

from feedmesh.mesh.sansio import Timers

from . import phases, subsets
from .audit import EntryAudit
from .didcache import DidCache
from .events import Deliver, Event, QueryResult, Send, bundle_did
from .messages import (
    Address,
    Bundle,
    CheckDid,
    Connect,
    ConnectReply,
    DidStatus,
    Disconnect,
    Entry,
    Error,
    GetNeighbors,
    Holder,
    Message,
    Neighbors,
    Plan,
    PutEntries,
    QueryAnswer,
    QueryFeed,
    UpdateSubset,
)
from .peers import Neighbour, PastLedgers, Standing
from .plans import KnownPlans
from .queries import QueryRelay
from .settings import FeedExSettings
from .tracker import prefix_of

__all__ = ["FeedExNode"]

_MAX_CANDIDATES = 200
_MAX_HOLDER_DIDS = 4096
_MAX_PUT_BUNDLES = 64
_MAX_CHECK_DIDS = 64
_RETRY_CANDIDATE_S = 600.0
_LATE_CONNECT_FACTOR = 4.0
"""A connect's reply is still taken up to this many ``connect_timeout_s`` after it was sent
(a live transport's own call timeout may be longer than the node's connect timeout)."""
_SLOT_SLACK_S = 1.0  # a re-slot that moves the planned fetch less than this keeps it (no news)
_FLUSH, _MAINTAIN, _ADVERTISE = "flush", "maintain", "advertise"   # the node's own timers


@functools.lru_cache(maxsize=4096)
def _prefix(host: str, v4: int, v6: int) -> str:
    return prefix_of(host, v4, v6)


class FeedExNode:
    """One FeedEx peer. ``weights`` is the direct subscription set (feed URL -> preference w_i)."""

    def __init__(self, address: Address, settings: FeedExSettings | None = None, *,
                 weights: Mapping[str, float] = (), tracker: Address | None = None,
                 rng: random.Random | None = None) -> None:
        self.address = address
        self.settings = s = settings or FeedExSettings()
        self.weights: dict[str, float] = dict(weights)
        self.tracker = tracker
        self._rng = rng or random.Random(hash(address))
        self.neighbours: dict[Address, Neighbour] = {}
        self.standing = Standing(s.drop_standing, s.ban_s, s.max_calls_per_minute)
        self._pending_connects: dict[Address, float] = {}
        # connects given up on (connect_timeout_s passed) whose accepting reply may still come:
        # the callee holds us by then, and a reply dropped leaves it a neighbour that refuses it
        self._late_connects: dict[Address, float] = {}
        self._past = PastLedgers(s.ledger_memory_s)
        # OrderedDicts where the oldest key is dropped when full: a plain dict's
        # del d[next(iter(d))] skips the dead slots of earlier deletions (5 us at 4,096 keys)
        self._candidates: OrderedDict[Address, None] = OrderedDict()
        self._tried: dict[Address, float] = {}
        self._no_trial: dict[str, float] = {}  # prefix -> until when no newcomer of it is tried
        self._tracker_asked_at = float("-inf")
        self._seen = DidCache(s.did_cache_exact, s.did_cache_bloom)
        self._held: dict[bytes, float] = {}  # did -> until when we answer "seen" (3.4)
        # did -> (when we got it, its feed, its new entries): a prompt offer of it earns credit
        self._got: OrderedDict[bytes, tuple[float, str, int]] = OrderedDict()
        self._holders: OrderedDict[bytes, set[Address]] = OrderedDict()  # did -> known holders
        self._outgoing: dict[Address, dict[bytes, tuple[Bundle, float]]] = {}
        self._batched: dict[Address, list[bytes]] = {}
        self._timers = Timers()   # _FLUSH, _MAINTAIN, _ADVERTISE and each query's wait
        self._out: list[Send] = []
        self._deliveries: list[Event] = []
        self._known: dict[str, OrderedDict[str, float | None]] = {}
        self._queries = QueryRelay(self._holding, s.query_timeout_s, s.query_max_hops,
                                   s.answer_cache_s, self._timers, self._deliveries_append)
        self._query_counter = 0
        # its own generator, seeded by our address: sampling must not move the phases drawn
        # from ``rng`` (the simulator's figures)
        self._audit = EntryAudit(s.audit_sample, s.audit_per_feed, s.audit_grace_s,
                                 s.audit_max_age_s, random.Random(f"audit {address}"))
        self._dirty = True  # the advertisement may have changed
        self._subsets_dirty = True
        """The subsets we advertise may have changed (our feeds, a neighbour's subset, who our
        neighbours are); when only fetch plans did, the advertisement skips recomputing them."""
        self.fetch_plans: dict[str, float] = {}
        """Our planned (or, once made, last) fetch time of each feed we follow, advertised."""
        self._plan_windows: dict[str, tuple[float, float]] = {}  # feed -> (latest, interval)
        self._plans = KnownPlans(address, phases.MAX_PLANS_PER_FEED)
        self._plans_expired_at = float("-inf")
        """Followers' fetch times by origin, as neighbours told them (their own and relayed)."""
        self.stats = {"check_did": 0, "put_entries": 0, "update_subset": 0, "forged": 0,
                      "malformed": 0, "loops": 0, "refused_deficit": 0,
                      "fake_entries": 0, "confirmed_entries": 0, "offers_credited": 0,
                      "dropped_unreachable": 0, "dropped_silent": 0, "not_neighbour_errors": 0,
                      "late_connect_replies": 0}

    # -- local events --------------------------------------------------------------------------

    def start(self, now: float, candidates: Iterable[Address] = ()) -> None:
        """Join: take known candidates (earlier neighbours from disk), ask the tracker for more."""
        self.add_candidates(candidates)
        self._timers.set(now + self.settings.advertise_interval_s, _ADVERTISE)
        self._timers.set(now + self.settings.maintain_interval_s, _MAINTAIN)
        out = self._out
        self._ask_tracker(now, out)
        self._fill(now, out)

    def add_candidates(self, addresses: Iterable[Address]) -> None:
        for address in addresses:
            address = (address[0], address[1])
            if address != self.address and address not in self.neighbours:
                self._candidates[address] = None
        while len(self._candidates) > _MAX_CANDIDATES:
            self._candidates.popitem(last=False)

    def publisher_listed(self, now: float, addresses: Iterable[Address]) -> None:
        """A publisher listed these recent clients of one of our feeds (3.1): candidates like
        the tracker's; connected to at once when we are below ``min_neighbours``."""
        self.add_candidates(addresses)
        self._fill(now, self._out)

    def connect(self, now: float, address: Address) -> None:
        """Connect to ``address`` now (an earlier neighbour kept on disk, a node the user named)."""
        address = (address[0], address[1])
        if (address in self.neighbours or address in self._pending_connects
                or address == self.address or self.standing.banned(now, address)):
            return
        self._tried[address] = now
        self._pending_connects[address] = now
        self._out.append(Send(address, self._connect_message(address)))

    def subscribe(self, now: float, feed: str, weight: float = 1.0) -> None:
        """Add ``feed`` to the direct set; neighbours learn it at the next advertisement."""
        self.weights[feed] = weight
        self._dirty = self._subsets_dirty = True

    def unsubscribe(self, now: float, feed: str) -> None:
        self.weights.pop(feed, None)
        self.fetch_plans.pop(feed, None)
        self._plans.drop_feed(feed)
        self._plan_windows.pop(feed, None)
        self._audit.forget(feed)
        self._dirty = self._subsets_dirty = True

    def fetched(self, now: float, feed: str, entries: Sequence[Entry]) -> None:
        """Our fetch of ``feed`` returned ``entries``: keep the new ones, send them as a bundle."""
        new = self._keep_new(feed, entries)
        if not new:
            return
        self._deliveries.append(Deliver(feed, new, None, now))
        bundle = Bundle(bundle_did(feed, (e.key for e in new)), feed, new, [], now)
        self._seen.add(bundle.did)
        self._note_got(now, bundle.did, feed, len(new))
        self._forward(now, bundle, None, self._out)

    def listed(self, now: float, feed: str, entries: Sequence[Entry]) -> None:
        """Our fetch of ``feed`` got a whole document (not a delta) listing ``entries``: it judges
        the sampled entries neighbours sent of the feed; each the source never had lowers its
        sender's standing by ``fake_entry_penalty`` (:mod:`.audit`)."""
        verdicts = self._audit.judge(now, feed, entries)
        self.stats["confirmed_entries"] += verdicts.confirmed
        for sender in verdicts.confirmed_from:
            neighbour = self.neighbours.get(sender)
            if neighbour is not None:
                neighbour.confirmed += 1
        out = self._out
        self._trials(now, out)
        fakes: dict[Address, list[str]] = {}
        for sender, key in verdicts.fake:
            fakes.setdefault(sender, []).append(key)
        for sender, keys in fakes.items():
            self.stats["fake_entries"] += len(keys)
            detail = f"the source never listed {len(keys)} entries you sent, e.g. {keys[0]}"
            out.append(Send(sender, Error("fake_entries", detail[:500])))
            self._penalize(now, sender, self.settings.fake_entry_penalty * len(keys), out)

    def remember(self, feed: str, entries: Sequence[Entry]) -> None:
        """``entries`` of ``feed`` were held before (the archive, after a restart), oldest first:
        known from now on, so queries are answered for them (3.6) and bundles are stripped of
        them (3.4); nothing is delivered or offered."""
        self._keep_new(feed, entries)

    def plan_fetch(self, now: float, feed: str, interval_s: float,
                   latest: float | None = None, earliest: float | None = None) -> float:
        """When to fetch ``feed`` next: in [now, ``latest``] (default now + ``interval_s``: the
        caller's budget says how soon and how late), as far as it can be from the fetches our
        neighbours advertised (:mod:`.phases`); advertised in turn when ``share_fetch_times``.
        ``earliest`` (the random phase a stand-alone node would fetch at): never sooner, now or
        on any re-plan, so the node never fetches more often within any span than it would
        alone; with nothing known, the fetch is at ``earliest`` itself."""
        latest = now + interval_s if latest is None else max(now, min(latest, now + interval_s))
        start = now if earliest is None else min(max(now, earliest), latest)
        known = self.known_plans(now, feed, interval_s)
        if earliest is not None and not known:
            at = start
        elif self.settings.fetch_placement == "rank":
            at = self._slot(now, feed, start, latest, interval_s)
        else:
            at, _ = phases.best_in_window(start, latest, interval_s, known, self._rng)
        self.fetch_plans[feed] = at
        self._plan_windows[feed] = (latest, interval_s, start)
        self._dirty = True
        return at

    def replan_fetch(self, now: float, feed: str, interval_s: float | None = None) -> float | None:
        """Move our planned (not yet made) fetch of ``feed`` within the window
        :meth:`plan_fetch` was given when another time there lies much farther from the fetches
        our neighbours advertised since (:func:`phases.better_in_window`); None if it stays.
        The window never widens: however the advertised times move, the fetch stays between
        now (or the ``earliest`` given, if later) and the latest time the caller allowed."""
        planned = self.fetch_plans.get(feed)
        window = self._plan_windows.get(feed)
        if planned is None or window is None or planned <= now:
            return None
        latest, planned_interval, earliest = window
        interval_s = planned_interval if interval_s is None else interval_s
        if self.settings.fetch_placement == "rank":
            at = self._slot(now, feed, max(now, earliest), latest, interval_s)
            if abs(at - planned) < _SLOT_SLACK_S:
                return None
        else:
            at = phases.better_in_window(planned, max(now, earliest), latest, interval_s,
                                         self.known_plans(now, feed, interval_s), self._rng)
        if at is None:
            return None
        self.fetch_plans[feed] = at
        self._dirty = True
        return at

    def fetch_made(self, now: float, feed: str) -> None:
        """Our planned fetch of ``feed`` was made: the plan is now our last fetch (advertised
        as our phase) and can no longer move."""
        self._plan_windows.pop(feed, None)
        if feed in self.weights:
            self.fetch_plans[feed] = now
            self._dirty = True

    def _slot(self, now: float, feed: str, start: float, latest: float,
              interval_s: float) -> float:
        """Our rank's slot among the followers of ``feed`` we know of, in [start, latest]
        (:func:`phases.slot_in_window`); the anonymous two-hop times count as made fetches."""
        lo, hi = now - interval_s, now + interval_s
        plans: list[tuple[Address, float]] = self._plans.by_origin(feed, lo, hi)
        for neighbour in self.neighbours.values():
            relayed = neighbour.relayed_times.get(feed)
            if relayed:
                plans.extend((neighbour.address, t) for t in relayed if lo <= t <= now)
        return phases.slot_in_window(now, start, latest, interval_s, feed, self.address, plans)

    def known_plans(self, now: float, feed: str, interval_s: float) -> list[float]:
        """Fetch times of ``feed`` by the other followers the exchange told us of, one per
        origin (:class:`~.plans.KnownPlans`: neighbours' own and what they relayed, any number
        of hops away), and the anonymous two-hop times of a neighbour that sends only those;
        none more than an interval from now (a time that far says nothing about the phase now)."""
        lo, hi = now - interval_s, now + interval_s
        known = self._plans.times(feed, lo, hi)
        for neighbour in self.neighbours.values():
            relayed = neighbour.relayed_times.get(feed)
            if relayed:
                known.extend(t for t in relayed if lo <= t <= hi)
        return known

    def query(self, now: float, feed: str, since: float | None = None, until: float | None = None,
              hops: int | None = None) -> bytes:
        """Ask the network who holds entries of ``feed`` published in [since, until] (3.6); the
        answer comes as a :class:`QueryResult` output once every neighbour answered or timed out."""
        hops = self.settings.query_max_hops if hops is None else min(hops, 16)
        self._query_counter += 1
        qid = hashlib.sha1(f"{self.address}|{self._query_counter}|{now}".encode(),
                           usedforsecurity=False).digest()[:16]
        self._queries.start(now, qid, None, feed, since, until, hops, self.neighbours, self._out)
        return qid

    def unreachable(self, now: float, address: Address) -> None:
        """The transport could not reach ``address``: a neighbour there is dead (3.2)."""
        out = self._out
        self._pending_connects.pop(address, None)
        self._late_connects.pop(address, None)
        self._candidates.pop(address, None)
        if address in self.neighbours:
            self.stats["dropped_unreachable"] += 1
            self._drop(now, address, None, out)
            self._fill(now, out)

    def forget_origin(self, address: Address) -> None:
        """The fetch plans of ``address`` are void, however many hops they came (it left): a
        bound for the simulator (``SimConfig.departure_oracle``), not a message of the
        protocol. Our next re-plans step into the gaps it leaves."""
        self._plans.forget_origin(address)

    def malformed(self, now: float, address: Address, why: str) -> None:
        """Bytes from ``address`` were not a valid message: it counts against the sender."""
        self.stats["malformed"] += 1
        out = self._out
        out.append(Send(address, Error("malformed", why[:500])))
        self._penalize(now, address, self.settings.malformed_penalty, out)

    # -- the dialect: timers, outputs --------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When :meth:`fire` wants to run next (None: nothing pending, as before :meth:`start`)."""
        return self._timers.next_deadline()

    def fire(self, now: float) -> None:
        """Run what is due: the batched check_did flush, upkeep, advertisements, query waits."""
        due = self._timers.due(now)
        out = self._out
        if _FLUSH in due:
            self._flush(now, out)
        if _MAINTAIN in due:
            self._timers.set(now + self.settings.maintain_interval_s, _MAINTAIN)
            self._maintain(now, out)
        if _ADVERTISE in due:
            self._timers.set(now + self.settings.advertise_interval_s, _ADVERTISE)
            self._advertise(now, out)
        self._queries.expire(now, out)

    def take(self) -> list[Send]:
        """The messages to send, ``Send(to, message)`` pairs, in the order they were made."""
        out, self._out = self._out, []
        return out

    def take_deliveries(self) -> list[Event]:
        """New entries for the archive and the reader (:class:`Deliver`) and the answers to
        our own queries (:class:`QueryResult`), in order."""
        out, self._deliveries = self._deliveries, []
        return out

    def _deliveries_append(self, event: QueryResult) -> None:
        self._deliveries.append(event)

    # -- messages ------------------------------------------------------------------------------

    def receive(self, now: float, sender: Address, message: Message) -> None:
        """Handle one message from ``sender`` = (host of the connection, stated port)."""
        out = self._out
        if self.standing.banned(now, sender):
            if isinstance(message, Connect):
                out.append(Send(sender, ConnectReply(False, reason="refused: low standing")))
            return
        if not self.standing.allow_call(now, sender):
            self._penalize(now, sender, 0.1, out)
            return
        neighbour = self.neighbours.get(sender)
        if neighbour is not None:
            neighbour.last_heard = now
            neighbour.probed_at = None
        match message:
            case CheckDid():
                self._on_check_did(now, sender, neighbour, message, out)
            case DidStatus():
                self._on_did_status(now, sender, neighbour, message, out)
            case PutEntries():
                self._on_put(now, sender, neighbour, message, out)
            case UpdateSubset():
                if neighbour is None:
                    out.append(Send(sender, Error("not_neighbour", "update_subset from a node "
                                                                   "that is not a neighbour")))
                else:
                    neighbour.subset = subsets.apply_update(neighbour.subset, message.added,
                                                            message.removed)
                    news = self._take_times(now, neighbour, message.fetch_times,
                                            message.relayed_times, message.schedule)
                    if message.added or message.removed:
                        self._dirty = self._subsets_dirty = True
                    elif message.fetch_times or news:
                        self._dirty = True
                    if message.probe:  # a keep-alive: answered, empty (never a probe back)
                        out.append(Send(sender, UpdateSubset()))
            case Connect():
                self._on_connect(now, sender, message, out)
            case ConnectReply():
                self._on_connect_reply(now, sender, message, out)
            case Disconnect():
                if neighbour is not None:
                    self._drop(now, sender, None, out)
                    self._tried[sender] = now
                    self._fill(now, out)
            case Neighbors():
                if sender == self.tracker or neighbour is not None:
                    self.add_candidates(message.peers)
                    self._fill(now, out)
            case GetNeighbors():  # a node answers like a small tracker: with its neighbours
                peers = [a for a in self.neighbours if a != sender][:message.want]
                out.append(Send(sender, Neighbors(peers)))
            case QueryFeed():
                self._on_query(now, sender, neighbour, message, out)
            case QueryAnswer():
                self._queries.answer(now, sender, message, out)
            case Error():
                self._pending_connects.pop(sender, None)
                self._late_connects.pop(sender, None)
                if message.code == "not_neighbour" and neighbour is not None:
                    # it does not hold us (it dropped us as dead, or never took our late
                    # reply): a link held on one side only carries nothing but refusals
                    self.stats["not_neighbour_errors"] += 1
                    self._drop(now, sender, None, out)
                    self._fill(now, out)

    # -- 3.1 bootstrapping and advertisements --------------------------------------------------

    def _ask_tracker(self, now: float, out: list[Send]) -> None:
        if self.tracker is not None:
            self._tracker_asked_at = now
            out.append(Send(self.tracker, GetNeighbors(4 * self.settings.max_neighbours)))

    def _fill(self, now: float, out: list[Send]) -> None:
        """Below the minimum, connect to candidates until the maximum is reached (3.2)."""
        s = self.settings
        if len(self.neighbours) >= s.min_neighbours and self.neighbours:
            return
        room = s.max_neighbours - len(self.neighbours) - len(self._pending_connects)
        for address in list(self._candidates):
            if room <= 0:
                break
            del self._candidates[address]
            if (address in self.neighbours or address in self._pending_connects
                    or address == self.address or self.standing.banned(now, address)
                    or now - self._tried.get(address, float("-inf")) < _RETRY_CANDIDATE_S
                    or self._prefix_full(address)):
                continue
            self._tried[address] = now
            self._pending_connects[address] = now
            out.append(Send(address, self._connect_message(address)))
            room -= 1
        if room > 0 and now - self._tracker_asked_at >= s.tracker_refresh_s / 10:
            self._ask_tracker(now, out)

    def _connect_message(self, address: Address) -> Connect:
        """Our subset and our own fetch times; not the other followers' plans we know: a
        connect may be refused (a full node, its trial slots taken) and a node short of
        neighbours sends one after another, so those (up to ``MAX_PLANS_PER_FEED`` for each of
        our feeds) go only once it is a neighbour, with the next advertisement (what it was
        not sent, :attr:`Neighbour.sent_plans`). Building and encoding them in every connect
        was a third of a live peer's CPU (docs/mesh-feedex.md, "The emulation's CPU")."""
        own = dict(self.fetch_plans) if self.settings.share_fetch_times else {}
        return Connect(self._advertisement_for(address), own, {}, len(self.neighbours))

    def _advertisement_for(self, address: Address) -> dict[str, int]:
        sets = {a: n.subset for a, n in self.neighbours.items()}
        return subsets.advertisement(self.weights, sets, address, self.settings.max_subset_hops)

    def _times_for(self, address: Address, feeds: Iterable[str], sent: dict[str, int],
                   ) -> tuple[dict[str, float], dict[str, list[Plan]]]:
        """Planned fetch times to advertise to ``address``: ours, and the other followers' we
        know with their origins (:class:`~.plans.KnownPlans`), for ``feeds`` (those it follows),
        only those learned since ``sent`` (feed -> sequence number, updated here)."""
        if not self.settings.share_fetch_times:
            return {}, {}
        plans = self._plans
        schedule: dict[str, list[Plan]] = {}
        for feed in feeds:
            fresh = plans.since(feed, sent.get(feed, 0), address)
            sent[feed] = plans.newest(feed)
            if fresh:
                schedule[feed] = fresh
        return dict(self.fetch_plans), schedule

    def _on_connect(self, now: float, sender: Address, message: Connect,
                    out: list[Send]) -> None:
        s = self.settings
        subset = {f: h for f, h in message.subset.items() if h <= s.max_subset_hops}
        on_trial = False
        if sender not in self.neighbours:
            # what a newcomer states (its feeds, how few neighbours it has) is its word: it never
            # displaces a neighbour. A full node takes it on trial; so does a node holding its
            # network already, once (a peer restarted on a new port): see _trials
            prefix = self._prefix_of(sender)
            trials = sum(1 for n in self.neighbours.values() if n.probation)
            closed = trials >= s.probation_slots or self._no_trial.get(prefix, -1.0) > now
            if self._prefix_full(sender):
                if closed or any(n.probation and self._prefix_of(a) == prefix
                                 for a, n in self.neighbours.items()):
                    out.append(Send(sender, ConnectReply(
                        False, reason="refused: a neighbour on the same network already")))
                    return
                on_trial = True
            elif self._regular() >= s.max_neighbours:
                if closed:
                    out.append(Send(sender, ConnectReply(False, reason="full")))
                    return
                on_trial = True
        self._pending_connects.pop(sender, None)
        self._late_connects.pop(sender, None)
        mine = self._advertisement_for(sender)
        neighbour = self.neighbours.get(sender)
        if neighbour is None:
            neighbour = self._new_neighbour(now, sender, subset)
            neighbour.probation = on_trial
        neighbour.subset = subset
        neighbour.advertised = mine
        self._take_times(now, neighbour, message.fetch_times, message.relayed_times,
                         message.schedule)
        self.neighbours[sender] = neighbour
        self._candidates.pop(sender, None)
        self._dirty = self._subsets_dirty = True
        neighbour.sent_plans = {}
        own, schedule = self._times_for(sender, self._followed_by(neighbour),
                                        neighbour.sent_plans)
        out.append(Send(sender, ConnectReply(True, mine, fetch_times=own, schedule=schedule)))

    def _on_connect_reply(self, now: float, sender: Address, message: ConnectReply,
                          out: list[Send]) -> None:
        asked = self._pending_connects.pop(sender, None) is not None
        if not asked and self._late_connects.pop(sender, None) is not None and message.accepted:
            # we asked, and gave up waiting: it took us meanwhile, so take it (or tell it not)
            self.stats["late_connect_replies"] += 1
            asked = True
        if not asked and sender not in self.neighbours:
            return  # a reply we did not ask for
        if not message.accepted:
            self._fill(now, out)
            return
        if sender not in self.neighbours and (self._regular() >= self.settings.max_neighbours
                                              or self._prefix_full(sender)):
            out.append(Send(sender, Disconnect("full")))
            return
        subset = {f: h for f, h in message.subset.items() if h <= self.settings.max_subset_hops}
        neighbour = self.neighbours.get(sender) or self._new_neighbour(now, sender, subset)
        neighbour.subset = subset
        neighbour.advertised = self._advertisement_for(sender)
        self._take_times(now, neighbour, message.fetch_times, message.relayed_times,
                         message.schedule)
        self.neighbours[sender] = neighbour
        self._dirty = self._subsets_dirty = True

    def _take_times(self, now: float, neighbour: Neighbour, own: Mapping[str, float],
                    relayed: Mapping[str, Sequence[float]],
                    schedule: Mapping[str, Sequence[Plan]]) -> bool:
        """Keep what ``neighbour`` says of fetch times, bounded: one time of its own per feed it
        follows itself (hop 0 in its subset), times and plans it relays only for feeds we follow
        (at most ``MAX_PLANS_PER_FEED`` each through it: :class:`~.plans.KnownPlans`), none
        farther than ``fetch_time_horizon_s`` from now or not finite. What it says can only move
        our fetches within the windows we allow (:meth:`plan_fetch`), never make them more
        frequent or later. True if it told us anything new to relay."""
        if not self.settings.share_fetch_times or not (own or relayed or schedule
                                                       or neighbour.fetch_times):
            return False
        horizon = self.settings.fetch_time_horizon_s
        lo, hi = now - horizon, now + horizon
        subset = neighbour.subset
        times = neighbour.fetch_times
        plans = self._plans
        address = neighbour.address
        news = False
        for feed, at in own.items():
            if subset.get(feed) == 0 and lo <= at <= hi:
                times[feed] = at
                news |= plans.direct(now, feed, address, at)
        for feed in [f for f in times if subset.get(f) != 0]:
            del times[feed]
            plans.forget_direct(feed, address)
        for feed, sent in schedule.items():
            if feed in self.weights:
                news |= plans.relayed(now, feed, address,
                                      [p for p in sent if lo <= p.at <= hi])
        kept = neighbour.relayed_times
        cap = phases.MAX_PLANS_PER_FEED
        for feed, ats in relayed.items():
            if feed in self.weights:
                kept[feed] = [t for t in ats if lo <= t <= hi][-cap:]
        for feed in [f for f in kept if f not in self.weights]:
            del kept[feed]
        return news

    def _followed_by(self, neighbour: Neighbour) -> list[str]:
        return [f for f, hops in neighbour.subset.items() if hops == 0]

    def _new_neighbour(self, now: float, address: Address, subset: dict[str, int]) -> Neighbour:
        """A new neighbour, with the ledger it left with if it was one lately (3.5)."""
        neighbour = Neighbour(address, subset, now)
        self._past.restore(now, neighbour)
        return neighbour

    def _advertise(self, now: float, out: list[Send]) -> None:
        """Periodic, incremental, per neighbour without its own advertisement (3.1). Nothing is
        sent to a neighbour whose view did not change; a silent one gets a keep-alive instead."""
        if not self._dirty:
            return
        self._dirty = False
        ads = None  # only plans changed: each neighbour's advertised subset is still true
        if self._subsets_dirty:
            self._subsets_dirty = False
            sets = {a: n.subset for a, n in self.neighbours.items()}
            ads = subsets.advertisements(self.weights, sets, self.settings.max_subset_hops)
        share = self.settings.share_fetch_times
        for address, neighbour in self.neighbours.items():
            added, removed = (subsets.diff(neighbour.advertised, ads[address]) if ads is not None
                              else ({}, []))
            own: dict[str, float] = {}
            schedule: dict[str, list[Plan]] = {}
            if share:
                own, schedule = self._times_for(address, self._followed_by(neighbour),
                                                neighbour.sent_plans)
                sent_own = neighbour.sent_times[0]
                neighbour.sent_times = (own, {})
                own = {f: t for f, t in own.items() if sent_own.get(f) != t}
            if added or removed or own or schedule:
                if ads is not None:
                    neighbour.advertised = ads[address]
                self.stats["update_subset"] += 1
                out.append(Send(address, UpdateSubset(added, removed, own, schedule=schedule)))

    # -- 3.2 neighbour selection and upkeep ----------------------------------------------------

    def usefulness_of(self, neighbour: Neighbour) -> float:
        return subsets.usefulness(self.weights, neighbour.subset, self.settings.usefulness_base)

    def _prefix_of(self, address: Address) -> str:
        s = self.settings
        return _prefix(address[0], s.neighbour_prefix_v4, s.neighbour_prefix_v6)

    def _prefix_full(self, address: Address) -> bool:
        """Would one more neighbour at ``address`` (not one yet) exceed ``neighbours_per_prefix``
        of its network? Connects under way count."""
        prefix = self._prefix_of(address)
        held = sum(1 for a in self.neighbours if a != address and self._prefix_of(a) == prefix)
        held += sum(1 for a in self._pending_connects
                    if a != address and a not in self.neighbours and self._prefix_of(a) == prefix)
        return held >= self.settings.neighbours_per_prefix

    def _regular(self) -> int:
        """Neighbours not on trial: what ``max_neighbours`` bounds."""
        return sum(1 for n in self.neighbours.values() if not n.probation)

    def _trials(self, now: float, out: list[Send]) -> None:
        """Newcomers on trial: one becomes a neighbour when there is room (and its network has
        none left), or displaces the neighbour with the fewest confirmed entries (of its own
        network, if that is full) once it has more of them (entries our own fetches found at
        the source: proof, not its word); one that did neither within ``probation_s`` is
        dropped and its network not tried again for as long."""
        s = self.settings
        trials = [n for n in self.neighbours.values() if n.probation]
        if not trials:
            return
        trials.sort(key=lambda n: -n.confirmed)
        for trial in trials:
            regular = [n for n in self.neighbours.values() if not n.probation]
            prefix = self._prefix_of(trial.address)
            mates = [n for n in regular if self._prefix_of(n.address) == prefix]
            crowded = len(mates) >= s.neighbours_per_prefix
            if len(regular) < s.max_neighbours and not crowded:
                trial.probation = False
                continue
            rivals = mates if crowded else regular
            if trial.confirmed > 0:
                worst = min(rivals, key=lambda n: (n.confirmed, self.usefulness_of(n)))
                if worst.confirmed < trial.confirmed:
                    self._drop(now, worst.address, "replaced by a neighbour whose entries our "
                                                   "fetches confirmed", out)
                    trial.probation = False
                    continue
            if now - trial.since > s.probation_s:
                self._no_trial[prefix] = now + s.probation_s
                self._drop(now, trial.address, "trial over: full", out)

    def _maintain(self, now: float, out: list[Send]) -> None:
        s = self.settings
        for address, at in list(self._pending_connects.items()):
            if now - at > s.connect_timeout_s:
                del self._pending_connects[address]
                self._late_connects[address] = at
        for address, at in list(self._late_connects.items()):
            if now - at > _LATE_CONNECT_FACTOR * s.connect_timeout_s:
                del self._late_connects[address]
        for address, neighbour in list(self.neighbours.items()):
            silent = now - neighbour.last_heard
            if silent > s.dead_after_s:
                self.stats["dropped_silent"] += 1
                self._drop(now, address, None, out)
            elif silent > s.dead_after_s / 2 and neighbour.probed_at is None:
                neighbour.probed_at = now
                out.append(Send(address, UpdateSubset(probe=True)))  # keep-alive, answered
        for address, pending in list(self._outgoing.items()):
            for did in [d for d, (_, at) in pending.items() if now - at > s.reply_timeout_s]:
                del pending[did]
            if not pending:
                del self._outgoing[address]
        if self._held:
            self._held = {d: until for d, until in self._held.items() if until > now}
        self._queries.sweep(now)
        self.standing.forget_calls(now)
        self._trials(now, out)
        if self._no_trial:
            self._no_trial = {p: until for p, until in self._no_trial.items() if until > now}
        if now - self._plans_expired_at >= s.fetch_time_horizon_s / 10:
            self._plans_expired_at = now
            self._plans.expire(now - s.fetch_time_horizon_s)
        if now - self._tracker_asked_at >= s.tracker_refresh_s:
            self._ask_tracker(now, out)  # stay listed; fresh candidates
        self._fill(now, out)

    def _drop(self, now: float, address: Address, reason: str | None,
              out: list[Send]) -> None:
        """Forget a neighbour; tell it why unless it is dead (``reason`` None)."""
        neighbour = self.neighbours.pop(address, None)
        if neighbour is None:
            return
        self._past.keep(now, neighbour)
        self._plans.forget_via(address, self.weights)
        self._outgoing.pop(address, None)
        self._batched.pop(address, None)
        self._dirty = self._subsets_dirty = True
        if reason is not None:
            out.append(Send(address, Disconnect(reason)))

    def _penalize(self, now: float, address: Address, amount: float, out: list[Send]) -> None:
        if self.standing.lower(now, address, amount):
            self._candidates.pop(address, None)
            self._drop(now, address, "low standing", out)

    # -- 3.4 dissemination ---------------------------------------------------------------------

    def _keep_new(self, feed: str, entries: Iterable[Entry]) -> list[Entry]:
        known = self._known.get(feed)
        if known is None:
            known = self._known[feed] = OrderedDict()
        new = []
        for entry in entries:
            if entry.key not in known:
                known[entry.key] = entry.published
                new.append(entry)
        cap = self.settings.known_entries_per_feed
        while len(known) > cap:
            known.popitem(last=False)
        return new

    def _forward(self, now: float, bundle: Bundle, sender: Address | None,
                 out: list[Send]) -> None:
        """Offer ``bundle`` to each neighbour interested in its feed within max hops, not on its
        path, not known to hold it, and not in deficit past D: check_did first (3.4, 3.5)."""
        max_hops = self.settings.max_subset_hops
        on_path = set(bundle.path)
        holders = self._holders.get(bundle.did, ())
        batch = self.settings.forward_batch_s
        ratio = self.settings.deficit_ratio
        for address, neighbour in self.neighbours.items():
            hops = neighbour.subset.get(bundle.feed)
            if (hops is None or hops > max_hops or address == sender or address in on_path
                    or address in holders):
                continue
            if neighbour.owes(ratio) > self.settings.max_deficit:
                self.stats["refused_deficit"] += 1
                continue
            pending = self._outgoing.setdefault(address, {})
            if bundle.did in pending:
                continue
            pending[bundle.did] = (bundle, now)
            if batch > 0:
                self._batched.setdefault(address, []).append(bundle.did)
                if self._timers.at(_FLUSH) is None:
                    self._timers.set(now + batch, _FLUSH)
            else:
                self.stats["check_did"] += 1
                out.append(Send(address, CheckDid([bundle.did])))

    def _flush(self, now: float, out: list[Send]) -> None:
        for address, dids in self._batched.items():
            for i in range(0, len(dids), _MAX_CHECK_DIDS):
                self.stats["check_did"] += 1
                out.append(Send(address, CheckDid(dids[i:i + _MAX_CHECK_DIDS])))
        self._batched.clear()

    def _note_holder(self, did: bytes, address: Address) -> None:
        holders = self._holders.get(did)
        if holders is None:
            holders = self._holders[did] = set()
            if len(self._holders) > _MAX_HOLDER_DIDS:
                self._holders.popitem(last=False)
        holders.add(address)

    def _on_check_did(self, now: float, sender: Address, neighbour: Neighbour | None,
                      message: CheckDid, out: list[Send]) -> None:
        if neighbour is None:
            out.append(Send(sender, Error("not_neighbour", "check_did from a node that is not "
                                                           "a neighbour")))
            return
        unseen, seen = [], []
        hold = self.settings.check_hold_s
        credit = self.settings.offer_credit
        for did in message.dids:
            if credit and did in self._got and sender not in self._holders.get(did, ()):
                self._credit_offer(now, neighbour, did, credit)
            self._note_holder(did, sender)
            pending = self._outgoing.get(sender)
            if pending is not None:
                pending.pop(did, None)  # it has it: no need to offer it back
            if did in self._seen or self._held.get(did, 0.0) > now:
                seen.append(did)
            else:
                unseen.append(did)
                self._held[did] = now + hold
        out.append(Send(sender, DidStatus(unseen, seen)))

    def _note_got(self, now: float, did: bytes, feed: str, entries: int) -> None:
        got = self._got
        got[did] = (now, feed, entries)
        if len(got) > _MAX_HOLDER_DIDS:
            got.popitem(last=False)
        limit = now - self.settings.offer_credit_s
        while got and next(iter(got.values()))[0] < limit:
            got.popitem(last=False)

    def _credit_offer(self, now: float, neighbour: Neighbour, did: bytes, share: float) -> None:
        """A prompt offer of a bundle we just got (not from it, not known to be held by it):
        ``share`` of what its put would have earned (:attr:`FeedExSettings.offer_credit`)."""
        at, feed, entries = self._got[did]
        if now - at > self.settings.offer_credit_s:
            return
        s = self.settings
        hops = 0 if feed in self.weights else neighbour.advertised.get(feed,
                                                                      s.max_subset_hops + 1)
        neighbour.received += share * entries * self.weights.get(feed, 1.0) \
            * s.contribution_base ** -hops
        self.stats["offers_credited"] += 1

    def _on_did_status(self, now: float, sender: Address, neighbour: Neighbour | None,
                       message: DidStatus, out: list[Send]) -> None:
        pending = self._outgoing.get(sender)
        if neighbour is None or pending is None:
            return
        for did in message.seen:
            pending.pop(did, None)
            self._note_holder(did, sender)
        bundles = []
        alpha = self.settings.contribution_base
        for did in message.unseen:
            item = pending.pop(did, None)
            if item is None:
                continue  # we never offered it: ignore
            bundle = item[0]
            bundles.append(bundle)
            self._note_holder(did, sender)
            hops = neighbour.subset.get(bundle.feed, self.settings.max_subset_hops)
            neighbour.given += len(bundle.entries) * alpha ** -hops
            neighbour.entries_to += len(bundle.entries)
        for i in range(0, len(bundles), _MAX_PUT_BUNDLES):
            self.stats["put_entries"] += 1
            out.append(Send(sender, PutEntries(bundles[i:i + _MAX_PUT_BUNDLES])))

    def _on_put(self, now: float, sender: Address, neighbour: Neighbour | None,
                message: PutEntries, out: list[Send]) -> None:
        if neighbour is None:
            out.append(Send(sender, Error("not_neighbour", "put_entries from a node that is not "
                                                           "a neighbour")))
            return
        s = self.settings
        alpha = s.contribution_base
        for bundle in message.bundles:
            path = bundle.path
            if self.address in path:
                if bundle.did in self._seen:  # it went round: a loop (3.4)
                    self.stats["loops"] += 1
                    continue
                self._forged(now, sender, out, "the path names us but we never sent this bundle")
                continue
            if sender in path or len(set(path)) != len(path):
                self._forged(now, sender, out, "the path repeats a node or names its sender")
                continue
            if not path and bundle.did != bundle_did(bundle.feed, (e.key for e in bundle.entries)):
                self._forged(now, sender, out, "the did is not the digest of the bundle")
                continue
            self._note_holder(bundle.did, sender)
            for hop in path:
                self._note_holder(bundle.did, hop)
            self._held.pop(bundle.did, None)
            if bundle.did in self._seen:
                continue
            self._seen.add(bundle.did)
            new = self._keep_new(bundle.feed, bundle.entries)
            if not new:
                continue
            self._note_got(now, bundle.did, bundle.feed, len(new))
            hops = 0 if bundle.feed in self.weights else \
                neighbour.advertised.get(bundle.feed, s.max_subset_hops + 1)
            weight = self.weights.get(bundle.feed, 1.0)
            neighbour.received += len(new) * weight * alpha ** -hops
            neighbour.entries_from += len(new)
            if bundle.feed in self.weights:
                self._deliveries.append(Deliver(bundle.feed, new, sender, now))
                self._audit.note(now, bundle.feed, sender, new)
            forward = Bundle(bundle.did, bundle.feed, new, [*path, sender], bundle.fetched_at)
            self._forward(now, forward, sender, out)

    def _forged(self, now: float, sender: Address, out: list[Send], why: str) -> None:
        self.stats["forged"] += 1
        out.append(Send(sender, Error("forged_path", why)))
        self._penalize(now, sender, self.settings.forged_path_penalty, out)

    # -- 3.6 recursive queries -----------------------------------------------------------------

    def _holding(self, feed: str, since: float | None, until: float | None) -> Holder | None:
        known = self._known.get(feed)
        if not known:
            return None
        lo = float("-inf") if since is None else since
        hi = float("inf") if until is None else until
        times = [t for t in known.values() if t is not None and lo <= t <= hi]
        undated = sum(1 for t in known.values() if t is None) if since is None and until is None \
            else 0
        count = len(times) + undated
        if count == 0:
            return None
        return Holder(self.address, count, max(times) if times else None)

    def _on_query(self, now: float, sender: Address, neighbour: Neighbour | None,
                  message: QueryFeed, out: list[Send]) -> None:
        if neighbour is None:
            out.append(Send(sender, Error("not_neighbour", "query_feed from a node that is not "
                                                           "a neighbour")))
        elif neighbour.owes(self.settings.deficit_ratio) > self.settings.max_deficit:
            out.append(Send(sender, QueryAnswer(message.qid, [])))  # not served (3.5, 3.6)
        else:
            self._queries.relay(now, sender, message, self.neighbours, out)

    # -- introspection -------------------------------------------------------------------------

    def has_entry(self, feed: str, key: str) -> bool:
        return key in self._known.get(feed, ())

    def seen_did(self, did: bytes) -> bool:
        return did in self._seen
