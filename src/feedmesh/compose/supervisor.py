"""When a role of ``feedmesh up`` that exited starts again, and when it stays down: a pure core
(the times come in as arguments; nothing here starts, reads or sleeps).

Each role has a :class:`RoleSupervision`, OTP's ``one_for_one``: one role's exit restarts that
role alone, the others run on. A role that exits (any status, a ``kill -9`` too) is started
again after a pause that doubles from ``first_delay_s`` up to ``max_delay_s``; once it has stayed
up for ``stable_after_s`` the pause starts again from ``first_delay_s``. A role that exits
``burst`` times within ``window_s`` is in a crash loop (systemd's ``StartLimitBurst`` /
``StartLimitIntervalSec``): it stays down, and says so, while the others run on. A stop request
(:meth:`Supervisor.stop`) means no more restarts: ``feedmesh down`` drains in order without a
restart racing it.

States: ``running`` (started and ready), ``restarting`` (exited, or started and not ready yet),
``down`` (a crash loop: not started again), ``stopped`` (stopping or stopped on request).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

__all__ = ["DOWN", "RESTARTING", "RUNNING", "STOPPED", "RestartPolicy", "RoleSupervision",
           "Supervisor"]

RUNNING = "running"
RESTARTING = "restarting"
DOWN = "down"
STOPPED = "stopped"


@dataclass(frozen=True)
class RestartPolicy:
    first_delay_s: float = 0.5
    max_delay_s: float = 30.0
    stable_after_s: float = 30.0
    """Up this long, a role's next exit is a first one again (the pause back to the first)."""
    burst: int = 5
    window_s: float = 60.0
    """``burst`` exits within ``window_s``: a crash loop, the role stays down."""

    def __post_init__(self) -> None:
        if not 0 < self.first_delay_s <= self.max_delay_s or self.burst < 1 or \
                self.window_s <= 0 or self.stable_after_s < 0:
            raise ValueError(f"restart policy {self}: needs 0 < first_delay_s <= max_delay_s, "
                             "burst >= 1, window_s > 0, stable_after_s >= 0")


@dataclass
class RoleSupervision:
    """One role's record: its state, how often it was restarted, when it may start again."""

    policy: RestartPolicy
    state: str = RESTARTING
    restarts: int = 0
    """Starts after the first."""
    last_status: int | None = None
    start_at: float | None = None
    """When it is due to start again (``restarting`` and not started yet)."""
    _up_since: float | None = None
    _in_a_row: int = 0
    """Exits since it last stayed up ``stable_after_s``: the pause's exponent."""
    _exits: deque[float] = field(default_factory=deque)

    def started(self, now: float, *, restart: bool = True) -> None:
        """A process of it was just started (not ready yet)."""
        self.start_at = None
        self._up_since = now
        if restart:
            self.restarts += 1

    def ready(self, now: float) -> None:
        if self.state == RESTARTING and self.start_at is None:
            self.state = RUNNING

    def exited(self, now: float, status: int | None) -> float | None:
        """Its process exited with ``status``: when it starts again, or None (down or
        stopped)."""
        self.last_status = status
        if self.state in (DOWN, STOPPED):
            return None
        policy = self.policy
        if self._up_since is not None and now - self._up_since >= policy.stable_after_s:
            self._in_a_row = 0
        self._up_since = None
        self._exits.append(now)
        while self._exits and self._exits[0] <= now - policy.window_s:
            self._exits.popleft()
        if len(self._exits) >= policy.burst:
            self.state = DOWN
            self.start_at = None
            return None
        delay = min(policy.max_delay_s, policy.first_delay_s * 2 ** self._in_a_row)
        self._in_a_row += 1
        self.state = RESTARTING
        self.start_at = now + delay
        return self.start_at

    def due(self, now: float) -> bool:
        return self.state == RESTARTING and self.start_at is not None and now >= self.start_at

    def stop(self) -> None:
        self.state = STOPPED
        self.start_at = None


class Supervisor:
    """Every role's :class:`RoleSupervision`, by name (any key: two replicas of a filter shard
    share a name, so ``up`` keys them by place)."""

    def __init__(self, names: Sequence[Hashable], policy: RestartPolicy | None = None) -> None:
        self.policy = policy or RestartPolicy()
        self.roles = {name: RoleSupervision(self.policy) for name in names}
        self.stopping = False

    def started(self, name: Hashable, now: float, *, restart: bool = True) -> None:
        self.roles[name].started(now, restart=restart)

    def ready(self, name: Hashable, now: float) -> None:
        self.roles[name].ready(now)

    def exited(self, name: Hashable, now: float, status: int | None) -> float | None:
        return self.roles[name].exited(now, status)

    def due(self, now: float) -> list[Hashable]:
        """The roles to start again now, in the order given."""
        if self.stopping:
            return []
        return [name for name, role in self.roles.items() if role.due(now)]

    def next_start(self) -> float | None:
        """The earliest time a role is due to start again (None: none waits)."""
        times = [r.start_at for r in self.roles.values() if r.start_at is not None]
        return min(times) if times and not self.stopping else None

    def stop(self) -> None:
        """A stop request: no more restarts, every role ``stopped``."""
        self.stopping = True
        for role in self.roles.values():
            role.stop()

    def state(self, name: Hashable) -> tuple[str, int]:
        """(state, restarts) of a role."""
        role = self.roles[name]
        return role.state, role.restarts
