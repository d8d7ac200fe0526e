"""One lifecycle for every process: its roles started in order, their loops kept running, one HTTP
server with one ``/metrics``, signals, and the close order.

A *role* (:class:`Role`) is one part of the hub or the mesh as a process runs it: a crawler, a
filter shard, a reflector, the web layer, a peer. :mod:`feedmesh.compose`'s role modules build
them from settings; a command hands them to :func:`run_roles`, which

1. binds nothing itself: the HTTP socket was bound before the roles were built
   (:func:`bind`), so a busy port fails before anything starts, and a port of 0 is known;
2. serves every role's routes and a single ``/metrics`` (every role's registry) from that
   socket at once: a role's routes answer 503 with ``Retry-After`` until it is ready, and again
   once it is stopping, so readers meet a clear answer, never a refused connection;
3. starts the roles in the order given, each one ready (its groups joined on the bus) before
   the next starts, so nothing a later role publishes is lost for want of a group;
4. runs until SIGINT or SIGTERM (or ``until`` ends), then stops the roles in the reverse order
   (the web first, then the crawler, which drains what the filters and reflectors still hold,
   then those), cancels their loops and closes what they shared (``closers``: the bus, the
   stores), in that order.

Every loop a role runs goes through :class:`Tasks`: a crash is logged and the loop started
again with a growing pause, so one bad message cannot stall the tiers upstream behind a full
queue. A loop that returns while the process is not stopping (its input closed for good), or
that keeps crashing for 10 minutes, is a fault the process cannot survive: it stops, and
:func:`run_roles` returns 1, for its supervisor (``feedmesh up``, systemd) to start it again.

This is the only module that installs signal handlers (:func:`stopping`, and
:func:`stop_on_signals` for a program that is not a loop, like ``feedmesh up``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from feedmesh.bus import BusError
from feedmesh.errors import FeedmeshError
from feedmesh.memory import release_memory

__all__ = ["HttpPart", "ListenError", "Role", "Tasks", "application", "bind", "cancel", "ended",
           "run_roles", "started",
           "stop_on_signals", "stopping"]

log = logging.getLogger("feedmesh.hub")

SIGNALS = (signal.SIGINT, signal.SIGTERM)
READY_TIMEOUT_S = 60.0
"""How long a role may take to be ready (its groups joined on the bus) once started."""


@dataclass(frozen=True)
class HttpPart:
    """What a role serves over HTTP: its routes, the middlewares they need (the web layer's
    error shape and security headers), and the largest request body they read."""

    routes: Sequence[web.RouteDef] = ()
    middlewares: Sequence[Callable] = ()
    max_body_bytes: int = 0


class Role(Protocol):
    """One part of a process (see the module)."""

    name: str
    ready: asyncio.Event
    """Set once the role serves (its groups exist on the bus, its state is loaded); cleared
    when it begins to stop."""

    @property
    def registry(self) -> CollectorRegistry | None:
        """Its Prometheus figures, served at the process's ``/metrics``."""
        ...

    def http(self) -> HttpPart: ...

    async def start(self, tasks: Tasks) -> None:
        """Load what it holds and start its loops (with ``tasks``)."""
        ...

    async def stop(self) -> None:
        """Finish or hand back the work in hand, save what it keeps, close what is its own."""
        ...


GIVE_UP_S = 600.0
"""A loop that keeps crashing this long (never running a minute without a crash) is a fault
the process cannot survive by itself: it stops, and exits 1 (:attr:`Tasks.failure`)."""
STEADY_S = 60.0


class Tasks:
    """The loops of a process's roles, each kept running until ``stop`` (see the module).

    A loop that ends while the process is not stopping (its input closed for good: the bus
    connection closed, not merely lost), or that keeps crashing for ``give_up_s``, is a fault
    the process cannot survive: it records :attr:`failure` and sets ``stop``, and
    :func:`run_roles` returns 1 once every role stopped, so a supervisor (``feedmesh up``,
    systemd's ``Restart=on-failure``) starts the process again."""

    def __init__(self, stop: asyncio.Event, *, give_up_s: float = GIVE_UP_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stop = stop
        self.give_up_s = give_up_s
        self.clock = clock
        self.failure = ""
        """Why the process stops by itself ("" while it does not)."""
        self._tasks: list[asyncio.Task[None]] = []

    def fail(self, reason: str) -> None:
        if not self.failure:
            self.failure = reason
            log.error("process_failing reason=%s exit=1", reason)
        self.stop.set()

    def spawn(self, name: str, run: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        task = asyncio.create_task(self._supervise(name, run), name=name)
        self._tasks.append(task)
        return task

    async def _supervise(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        delay = 0.1
        crashing_since: float | None = None
        while not self.stop.is_set():
            began = self.clock()
            try:
                await run()
                if self.stop.is_set():
                    return
                log.error("tier_stopped tier=%s reason=its input closed", name)
                self.fail(f"the {name} loop ended: its input closed")
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                now = self.clock()
                if crashing_since is None or now - began >= STEADY_S:
                    crashing_since, delay = now, 0.1
                if now - crashing_since >= self.give_up_s:
                    log.exception("tier_crashed tier=%s giving_up_after_s=%.0f", name,
                                  now - crashing_since)
                    self.fail(f"the {name} loop kept crashing for {self.give_up_s:.0f} s")
                    return
                log.exception("tier_crashed tier=%s restart_in_s=%.1f", name, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def close(self) -> None:
        """Cancel the loops still running and wait for them."""
        await cancel(self._tasks)
        self._tasks.clear()


async def cancel(tasks: Sequence[asyncio.Task]) -> None:
    """Cancel ``tasks`` (a role's loops, in its :meth:`Role.stop`) and wait until they ended."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def ended(tasks: Sequence[asyncio.Task], timeout_s: float = 10.0) -> None:
    """Wait for ``tasks`` to end by themselves (their input closed: a role of its own process
    closes its bus, and what its loops held unacknowledged goes back to the server at once),
    cancelling those still running after ``timeout_s``."""
    if tasks:
        await asyncio.wait(tasks, timeout=timeout_s)
    await cancel([task for task in tasks if not task.done()])


class ListenError(FeedmeshError, OSError):
    """A role's address cannot be listened on (busy, not this machine's, not allowed)."""


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket at ``host:port`` (0: any free port), bound before anything starts:
    a busy port is an OSError that names it, and the port the OS chose is known to build URLs
    from."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on the address {host}:{port}: "
                          f"{exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


@contextlib.contextmanager
def stopping(stop: asyncio.Event) -> object:
    """SIGINT and SIGTERM set ``stop`` while inside (the loop's own handlers, removed after)."""
    loop = asyncio.get_running_loop()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    try:
        yield stop
    finally:
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)


def stop_on_signals() -> threading.Event:
    """For a program that is not an event loop (``feedmesh up``): an event SIGINT and SIGTERM
    set."""
    stop = threading.Event()
    for sig in SIGNALS:
        signal.signal(sig, lambda *_: stop.set())
    return stop


def _gate(role: Role, handler: Callable) -> Callable:
    """``handler``, answering 503 (Retry-After: 1) while ``role`` is not ready."""
    async def gated(request: web.Request) -> web.StreamResponse:
        if not role.ready.is_set():
            raise web.HTTPServiceUnavailable(
                text=f"the {role.name} is starting or stopping; retry in a second",
                headers={"Retry-After": "1"})
        return await handler(request)
    return gated


def application(roles: Sequence[Role]) -> web.Application:
    """The one HTTP application of a process of ``roles``: every role's routes (503 while it is
    not ready) and one ``/metrics``."""
    parts = [(role, role.http()) for role in roles]
    middlewares = [m for _, part in parts for m in part.middlewares]
    app = web.Application(middlewares=middlewares,
                          client_max_size=max([1024 ** 2, *(p.max_body_bytes for _, p in parts)]))
    registries = list({id(r): r for role in roles
                       if (r := role.registry) is not None}.values())

    async def metrics(_: web.Request) -> web.Response:
        body = b"".join(generate_latest(registry) for registry in registries)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/metrics", metrics)
    app.add_routes([web.RouteDef(route.method, route.path, _gate(role, route.handler),
                                 route.kwargs)
                    for role, part in parts for route in part.routes])
    return app


@contextlib.asynccontextmanager
async def _serving(roles: Sequence[Role], sock: socket.socket | None) -> AsyncIterator[None]:
    if sock is None:
        yield
        return
    runner = web.AppRunner(application(roles), handle_signals=False, access_log=None)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        yield
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def started(roles: Sequence[Role], *, http: socket.socket | None = None,
                  closers: Sequence[Callable[[], Awaitable[object] | object]] = (),
                  stop: asyncio.Event | None = None,
                  ready_timeout_s: float = READY_TIMEOUT_S) -> AsyncIterator[Tasks]:
    """``roles`` started in order and served (see the module) inside; stopped in the reverse
    order, their loops cancelled and ``closers`` called, on the way out. What
    :func:`run_roles` runs, without the signals (tests, programs that run a hub inside)."""
    tasks = Tasks(stop or asyncio.Event())
    begun: list[Role] = []
    try:
        async with _serving(roles, http):
            try:
                for role in roles:
                    begun.append(role)
                    await role.start(tasks)
                    try:
                        await asyncio.wait_for(role.ready.wait(), ready_timeout_s)
                    except TimeoutError:
                        raise BusError(f"the {role.name} was not ready within "
                                       f"{ready_timeout_s:.0f} s (its groups did not join the "
                                       "bus)") from None
                release_memory()  # start-up tables are gone: give them back
                # What start-up loaded lives as long as the process: keep it out of the full
                # collections that stop everything else while they run.
                gc.freeze()
                yield tasks
            finally:
                tasks.stop.set()
                for role in reversed(begun):
                    role.ready.clear()
                    try:
                        await role.stop()
                    except Exception:  # the others still stop, and what they hold is saved
                        log.exception("role_stop_failed role=%s", role.name)
                await tasks.close()
    finally:
        for close in closers:
            done = close()
            if asyncio.iscoroutine(done) or isinstance(done, asyncio.Future):
                await done


async def run_roles(roles: Sequence[Role], *, http: socket.socket | None = None,
                    closers: Sequence[Callable[[], Awaitable[object] | object]] = (),
                    announce: Callable[[], object] | None = None,
                    until: Callable[[asyncio.Event], Awaitable[object]] | None = None,
                    stop: asyncio.Event | None = None,
                    ready_timeout_s: float = READY_TIMEOUT_S) -> int:
    """Run ``roles`` as one process (see the module) until SIGINT or SIGTERM; 0 once stopped
    cleanly, 1 after a fault it cannot survive (:class:`Tasks`). ``announce`` is called
    (awaited, if it is a coroutine function) once every role is ready: the process's ready line;
    ``until(stop)``, when given, runs beside them and stops the process when it returns."""
    stop = stop or asyncio.Event()
    with stopping(stop):
        async with started(roles, http=http, closers=closers, stop=stop,
                           ready_timeout_s=ready_timeout_s) as tasks:
            if announce is not None:
                said = announce()
                if asyncio.iscoroutine(said):
                    await said
            watcher = asyncio.ensure_future(until(stop)) if until is not None else None
            waiters = [asyncio.ensure_future(stop.wait()),
                       *([watcher] if watcher is not None else [])]
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            stop.set()
            for waiter in waiters:
                if waiter is not watcher:
                    waiter.cancel()
            if watcher is not None:
                await asyncio.gather(watcher, return_exceptions=True)
                if not watcher.cancelled() and watcher.exception() is not None:
                    raise watcher.exception()  # type: ignore[misc]
    return 1 if tasks.failure else 0
