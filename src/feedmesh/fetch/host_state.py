"""What fetch results mean for a *host*: a host that stops answering is paused, not hammered.

:mod:`.state` decides for one feed (each failed feed backs off on its own). A server that is down
(connection refused or reset, no DNS answer, no answer in time) fails every one of its feeds, and
a host carrying ten thousand feeds would be tried ten thousand times before each of them has
backed off. So after ``failures_to_pause`` such failures in a row on one host, with no answer
between, the host is paused: none of its feeds is fetched for ``pause_s``, doubled on each pause
that follows (up to ``pause_cap_s``). When the pause ends one fetch probes the host (the others
wait ``probe_s`` for its answer); an answer of any kind, even an HTTP error, means the host is up
and ends the pause; one more failure pauses it again, for twice as long.

Only failures to reach the server count: an HTTP error is the server answering, and its feed's
own backoff (:mod:`.state`) handles it; a 429 or a Retry-After pauses the host in the scheduler's
host table already. Fetches that were in flight when the host was paused and fail afterwards do
not extend the pause (they tell nothing new).

Pure: results and the time in, decisions out. The interval crawl asks :meth:`HostHealth.may_fetch`
before each fetch; the scheduled crawl gives the pause to the scheduler's host table, where every
other per-host decision lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import msgspec

from feedmesh.model import FetchOutcome

__all__ = ["HOST_FAILURES", "HostHealth", "HostPause", "HostPolicy", "host_of"]

HOST_FAILURES = frozenset({FetchOutcome.CONNECTION_ERROR, FetchOutcome.DNS_ERROR,
                           FetchOutcome.TIMEOUT})
"""The outcomes that say the host itself could not be reached."""

_ANSWERED = frozenset(FetchOutcome) - HOST_FAILURES - {FetchOutcome.BLOCKED,
                                                      FetchOutcome.INVALID_URL}
"""Outcomes that prove the server answered (BLOCKED and INVALID_URL never reached it)."""


class HostPolicy(msgspec.Struct, frozen=True, kw_only=True):
    failures_to_pause: int = 5
    """Failures to reach a host in a row that pause it (0: never pause a host)."""
    pause_s: float = 60.0
    """The first pause; each pause that follows a failed probe is twice the one before."""
    pause_cap_s: float = 3600.0
    probe_s: float = 30.0
    """How long the other feeds of a host wait for its probe's answer before another may probe
    (a probe abandoned, or slower than this, does not hold the host forever)."""

    def __post_init__(self) -> None:
        if self.failures_to_pause < 0 or not 0 < self.pause_s <= self.pause_cap_s \
                or self.probe_s <= 0:
            raise ValueError("HostPolicy: failures_to_pause >= 0, 0 < pause_s <= pause_cap_s "
                             "and probe_s > 0 are required")


class HostPause(msgspec.Struct, frozen=True):
    """A host just paused: until when, after how many failures, the last one's message."""

    host: str
    until: float
    failures: int
    pauses: int
    """This pause's number in the host's current run of pauses (1: the first)."""
    last_error: str


@dataclass(slots=True)
class _Host:
    failures: int = 0  # failures to reach it in a row
    pauses: int = 0  # pauses in a row (the next lasts pause_s * 2**pauses)
    until: float = 0.0  # paused until then (0: not paused since the last answer)
    probe_until: float = 0.0  # a probe is out until then


class HostHealth:
    """The hosts that failed lately (a host that answers is forgotten: 100k healthy hosts cost
    nothing)."""

    def __init__(self, policy: HostPolicy | None = None) -> None:
        self.policy = policy or HostPolicy()
        self._hosts: dict[str, _Host] = {}
        self.pauses_begun = 0
        """How many pauses have begun: who keeps its own table of pauses (a scheduler) reads
        :meth:`paused` again when this moved."""

    def may_fetch(self, host: str, now: float) -> bool:
        """Whether a fetch from ``host`` may start now. True at most once per ``probe_s`` for a
        host whose pause has ended (that fetch is the probe)."""
        state = self._hosts.get(host)
        if state is None or state.until == 0.0:
            return True
        if now < state.until or now < state.probe_until:
            return False
        state.probe_until = now + self.policy.probe_s
        return True

    def troubled(self) -> bool:
        """Whether any host failed lately (when none did, no feed needs asking about)."""
        return bool(self._hosts)

    def paused_until(self, host: str, now: float) -> float:
        """When ``host``'s pause ends (0.0: not paused now)."""
        state = self._hosts.get(host)
        return state.until if state is not None and state.until > now else 0.0

    def paused(self, now: float) -> dict[str, float]:
        """Every host paused now, with the end of its pause."""
        return {host: s.until for host, s in self._hosts.items() if s.until > now}

    def record(self, host: str, outcome: FetchOutcome, now: float,
               error: str = "") -> HostPause | None:
        """Learn from one fetch's outcome; the pause it starts, if it starts one."""
        policy = self.policy
        if outcome in _ANSWERED:
            self._hosts.pop(host, None)
            return None
        if outcome not in HOST_FAILURES or policy.failures_to_pause == 0:
            return None
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        if now < state.until:
            return None  # in flight when the host was paused: nothing new
        state.failures += 1
        if state.failures < policy.failures_to_pause and state.until == 0.0:
            return None
        # Enough failures in a row, or the first failure after a pause (the probe's).
        state.pauses += 1
        state.until = now + min(policy.pause_cap_s, policy.pause_s * 2.0 ** (state.pauses - 1))
        state.probe_until = 0.0
        self.pauses_begun += 1
        return HostPause(host, state.until, state.failures, state.pauses, error)

    def pauses(self, host: str) -> int:
        """How many times in a row ``host`` has been paused (0: it answered since, or never
        failed)."""
        state = self._hosts.get(host)
        return state.pauses if state is not None else 0


def host_of(url: str) -> str:
    """The host a feed URL names, lowercased ("" when it names none): the key of per-host
    decisions here and in the scheduler's host table."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""
