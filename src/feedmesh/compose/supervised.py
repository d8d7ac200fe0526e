"""``feedmesh up``'s supervision loop: the edge that drives :mod:`feedmesh.compose.supervisor`.

It watches every role's process; one that exits (any status, ``kill -9`` too) is started again
with the same argv and environment once the core says it is due, and counts as ``running``
again when it prints its ready line (read by a thread of its own, so a slow start holds up
nothing else). Each change is written to the role's row of ``up.json`` (``state``, ``pid``,
``restarts``), which ``feedmesh stats --up`` shows. It returns once ``stop`` is set: from then
on nothing is restarted, and ``up`` stops the roles in drain order.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from subprocess import Popen
from typing import Any, Protocol

from feedmesh.compose.supervisor import DOWN, RestartPolicy, Supervisor
from feedmesh.secret_file import write_secret

__all__ = ["Supervised", "listing_saver", "supervise"]

READY_TIMEOUT_S = 120.0
"""How long a restarted role may take to print its ready line before it is killed (and counts
as one more exit)."""


class Supervised(Protocol):
    name: str
    process: Popen[Any]

    def restart(self) -> None:
        """Start it again, with the argv and environment of its first start."""
        ...

    def wait_ready(self, prefix: str, timeout: float = ...) -> str: ...

    @property
    def ready_prefix(self) -> str: ...


def listing_saver(path: Path, listing: dict) -> Callable[[], None]:
    """A function that writes ``listing`` (up.json) to ``path`` whole (a reader never sees half
    of it), 0600: it names ports and pids."""

    def save() -> None:
        write_secret(path, json.dumps(listing, indent=2).encode())

    return save


def _say(line: str) -> None:
    print(f"feedmesh up: {line}", file=sys.stderr, flush=True)


def supervise(roles: Sequence[Supervised], rows: Sequence[dict], stop: threading.Event,
              save: Callable[[], None], *, policy: RestartPolicy | None = None,
              clock: Callable[[], float] = time.monotonic, poll_s: float = 0.1) -> None:
    """Keep ``roles`` running until ``stop`` is set; ``rows[i]`` is role i's row of the
    listing, updated in place (then ``save()``)."""
    supervisor = Supervisor(range(len(roles)), policy)
    policy = supervisor.policy
    now = clock()
    for index in range(len(roles)):
        supervisor.started(index, now, restart=False)
        supervisor.ready(index, now)  # up waited for each before it got here
    readied: queue.SimpleQueue[tuple[int, int]] = queue.SimpleQueue()

    def update(index: int) -> None:
        state, restarts = supervisor.state(index)
        rows[index].update(state=state, restarts=restarts, pid=roles[index].process.pid)

    def wait_ready(index: int, role: Supervised, pid: int) -> None:
        try:
            role.wait_ready(role.ready_prefix, READY_TIMEOUT_S)
        except RuntimeError as exc:
            if "exited" not in str(exc):  # not ready in time: one more exit
                role.process.kill()
            _say(f"{exc}")
            return
        readied.put((index, pid))

    for index in range(len(roles)):
        update(index)
    save()
    while not stop.wait(poll_s):
        now = clock()
        changed = False
        while not readied.empty():
            index, pid = readied.get()
            if roles[index].process.pid == pid and roles[index].process.poll() is None:
                supervisor.ready(index, now)
                _say(f"{roles[index].name} is back (pid {pid}, restart "
                     f"{supervisor.state(index)[1]})")
                update(index)
                changed = True
        for index, role in enumerate(roles):
            record = supervisor.roles[index]
            if record.start_at is not None or record.state == DOWN:
                continue  # exited already, seen
            status = role.process.poll()
            if status is None:
                continue
            at = supervisor.exited(index, now, status)
            if at is None and record.state == DOWN:
                _say(f"{role.name} exited {policy.burst} times within {policy.window_s:g} s "
                     f"(last status {status}); it stays down, the others run on")
            elif at is not None:
                _say(f"{role.name} exited with status {status}; starting it again in "
                     f"{at - now:.1f} s")
            update(index)
            changed = True
        if stop.is_set():
            break  # a stop request between the poll and a restart: no restart
        for index in supervisor.due(now):
            role = roles[index]
            role.restart()
            supervisor.started(index, now)
            threading.Thread(target=wait_ready, args=(index, role, role.process.pid),
                             daemon=True, name=f"ready {role.name}").start()
            update(index)
            changed = True
        if changed:
            save()
    supervisor.stop()
    for index in range(len(roles)):
        update(index)
    save()
