"""Many UDP endpoints spread over worker processes, driven from one coordinator (benchmarks, tests).

One process cannot carry a thousand :class:`~feedmesh.mesh.transport.UdpNode` endpoints: their
keep-alives alone outrun one event loop. A :class:`Fleet` starts ``workers`` processes (``spawn``),
each running its own event loop and hosting a share of the endpoints, every endpoint on its own
loopback address and port. The coordinator talks to each worker over a pipe: one command at a time,
answered in order. Times are the event loop's clock, ``time.monotonic()``, which every process on
the machine shares, so a delivery time taken in a worker compares with a publish time taken in the
coordinator.

Commands (:class:`Worker` methods): ``open`` the endpoints, ``start`` them at given times through
given bootstrap handles, ``subscribe`` at given times, ``status`` (joined, attached, roots),
``counters``, ``progress`` (how many endpoints hold every seq up to n), ``kill`` (close at once,
like a crash), ``report`` (every delivery: seq, time, recovered, digest of the record's bytes).
A worker that fails answers with the error's text, which :meth:`Fleet.call` raises as
:class:`FleetError` in the coordinator. :func:`open_publisher` opens the coordinator's own
publisher endpoint where it cannot be the group's root.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import multiprocessing
import time
import traceback
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from feedmesh.errors import FeedmeshError
from feedmesh.mesh.overlay import Delivery, Handle, group_id
from feedmesh.mesh.overlay.ids import RING, ring_distance
from feedmesh.mesh.transport.udp import UdpNode

__all__ = ["Fleet", "FleetError", "Worker", "digest", "fleet_address", "open_publisher"]


class FleetError(FeedmeshError, RuntimeError):
    """A worker process failed a command, or died."""


def digest(wire: bytes) -> bytes:
    """What a worker reports of a delivered record: 8 bytes that tell genuine from forged."""
    return hashlib.blake2b(wire, digest_size=8).digest()


def fleet_address(index: int, net: str = "127.4") -> str:
    """Endpoint ``index``'s own loopback address: ``127.4.0.1`` .. ``127.4.0.250``,
    ``127.4.1.1``..."""
    return f"{net}.{index // 250}.{1 + index % 250}"


async def open_publisher(url: str, net: str = "127.4") -> UdpNode:
    """The coordinator's publisher of ``url``, open at endpoint 0's address, never the group's root.

    A node's id is drawn from its address and the port is any free one, so a publisher of a group
    of n endpoints would be its root in one run in n + 1; it does not subscribe, and a run that
    kills the root to test the tree's repair would find no root among the endpoints to kill. The
    port is drawn again (two tries on average) until the id is at least a quarter of the ring from
    the group's: an endpoint is nearer unless all n drew ids as far, odds of 2^-n."""
    gid = group_id(url)
    while True:
        node = UdpNode(fleet_address(0, net))
        await node.open()
        if ring_distance(node.handle.id, gid) >= RING // 4:
            return node
        node.close()


@dataclass
class _Hosted:
    node: UdpNode
    deliveries: list[tuple[int, float, bool, bytes]]


class Worker:
    """The endpoints of one process, and the commands the coordinator sends them."""

    def __init__(self) -> None:
        self.hosted: list[_Hosted] = []
        self.lag_ms: list[float] = []
        self._cpu_start = time.process_time()
        self._wall_start = time.monotonic()

    async def open(self, hosts: list[str]) -> list[Handle]:
        for host in hosts:
            deliveries: list[tuple[int, float, bool, bytes]] = []

            def record(delivery: Delivery, deliveries=deliveries) -> None:
                deliveries.append((delivery.record.seq, delivery.at, delivery.recovered,
                                   digest(delivery.record.wire)))
            node = UdpNode(host, on_delivery=record, keep_deliveries=False)
            await node.open()
            self.hosted.append(_Hosted(node, deliveries))
        return [h.node.handle for h in self.hosted[-len(hosts):]]

    def start(self, plan: list[tuple[int, float, Handle | None]]) -> None:
        """Start endpoint ``index`` at time ``at`` through ``bootstrap``."""
        loop = asyncio.get_running_loop()
        for index, at, bootstrap in plan:
            node = self.hosted[index].node
            loop.call_at(at, lambda node=node, b=bootstrap: node.closed or
                         node.act(lambda n, now: n.start(now, b)))

    def subscribe(self, url: str, feed_key: str, plan: list[tuple[int, float]]) -> None:
        loop = asyncio.get_running_loop()
        for index, at in plan:
            node = self.hosted[index].node
            loop.call_at(at, lambda node=node: node.closed or node.subscribe(url, feed_key))

    def status(self, group: int) -> dict[str, Any]:
        live = [h.node for h in self.hosted if not h.node.closed]
        attached = roots = 0
        root_indices = []
        for index, hosted in enumerate(self.hosted):
            g = hosted.node.node.groups.get(group) if not hosted.node.closed else None
            if g is not None and (g.parent is not None or g.root):
                attached += 1
            if g is not None and g.root:
                roots += 1
                root_indices.append(index)
        return {"endpoints": len(live), "joined": sum(n.node.pastry.joined for n in live),
                "attached": attached, "roots": root_indices}

    def counters(self) -> list[dict[str, int]]:
        """Per endpoint: the node's counters (duplicates, forwarded, refused-*) and the socket's."""
        return [dict(h.node.node.counters) | {f"udp-{k}": v for k, v in h.node.counters.items()}
                for h in self.hosted]

    def progress(self, upto: int) -> int:
        """How many live endpoints hold every seq from 1 to ``upto``."""
        wanted = set(range(1, upto + 1))
        return sum(1 for h in self.hosted if not h.node.closed
                   and wanted <= {seq for seq, *_ in h.deliveries})

    def kill(self, indices: list[int]) -> None:
        for index in indices:
            self.hosted[index].node.close()

    def report(self) -> dict[str, Any]:
        return {"deliveries": [h.deliveries for h in self.hosted],
                "closed": [h.node.closed for h in self.hosted],
                "lag_ms": self.lag_ms,
                "cpu_s": time.process_time() - self._cpu_start,
                "wall_s": time.monotonic() - self._wall_start}

    def usage(self) -> tuple[float, float]:
        """CPU seconds and wall seconds of this process so far."""
        return time.process_time() - self._cpu_start, time.monotonic() - self._wall_start

    def close(self) -> None:
        for hosted in self.hosted:
            hosted.node.close()


def _worker_main(conn: Connection) -> None:
    asyncio.run(_serve(conn))


async def _serve(conn: Connection) -> None:
    loop = asyncio.get_running_loop()
    worker = Worker()
    commands: asyncio.Queue[tuple[str, tuple]] = asyncio.Queue()

    def readable() -> None:
        try:
            while conn.poll():
                commands.put_nowait(conn.recv())
        except (EOFError, OSError):       # the coordinator is gone: stop
            loop.remove_reader(conn.fileno())
            commands.put_nowait(("stop", ()))

    async def lag_probe() -> None:
        while True:
            before = loop.time()
            await asyncio.sleep(0.05)
            worker.lag_ms.append((loop.time() - before - 0.05) * 1000)

    loop.add_reader(conn.fileno(), readable)
    probe = loop.create_task(lag_probe())
    try:
        while True:
            name, args = await commands.get()
            if name == "stop":
                break
            try:
                result = getattr(worker, name)(*args)
                if asyncio.iscoroutine(result):
                    result = await result
                reply = ("ok", result)
            except Exception as error:  # noqa: BLE001 - answered, not raised: the coordinator decides
                reply = ("error", f"{name}: {error!r}\n{traceback.format_exc()}")
            conn.send(reply)
    finally:
        probe.cancel()
        worker.close()
        try:
            loop.remove_reader(conn.fileno())
            conn.send(("ok", None))
        except (OSError, ValueError):
            pass


class Fleet:
    """``workers`` processes, each hosting endpoints; ``await fleet.call(w, name, *args)``."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a fleet needs at least one worker, not {workers}")
        context = multiprocessing.get_context("spawn")
        self._conns: list[Connection] = []
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._waiting: list[deque[asyncio.Future]] = []
        for _ in range(workers):
            ours, theirs = context.Pipe()
            proc = context.Process(target=_worker_main, args=(theirs,), daemon=True)
            proc.start()
            theirs.close()
            self._conns.append(ours)
            self._procs.append(proc)
            self._waiting.append(deque())
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def workers(self) -> int:
        return len(self._conns)

    def _attach(self) -> None:
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        for index, conn in enumerate(self._conns):
            self._loop.add_reader(conn.fileno(), self._readable, index)

    def _readable(self, index: int) -> None:
        conn = self._conns[index]
        try:
            while conn.poll():
                status, value = conn.recv()
                future = self._waiting[index].popleft()
                if not future.done():
                    if status == "ok":
                        future.set_result(value)
                    else:
                        future.set_exception(FleetError(f"worker {index}: {value}"))
        except (EOFError, OSError):
            self._loop.remove_reader(conn.fileno())
            while self._waiting[index]:
                future = self._waiting[index].popleft()
                if not future.done():
                    future.set_exception(FleetError(
                        f"worker {index} died (exit code {self._procs[index].exitcode})"))

    async def call(self, worker: int, name: str, *args: Any) -> Any:
        self._attach()
        assert self._loop is not None
        future = self._loop.create_future()
        self._waiting[worker].append(future)
        self._conns[worker].send((name, args))
        return await future

    async def call_all(self, name: str, args_per_worker: Iterable[tuple] | None = None) -> list:
        """The same command on every worker at once (with per-worker arguments if given)."""
        args = list(args_per_worker) if args_per_worker is not None else [()] * self.workers
        return list(await asyncio.gather(*(self.call(w, name, *a) for w, a in enumerate(args))))

    async def close(self) -> None:
        """Stop every worker (closing its endpoints) and wait for the processes to exit."""
        for index, proc in enumerate(self._procs):
            if proc.is_alive():
                with contextlib.suppress(TimeoutError, FleetError, OSError):
                    await asyncio.wait_for(self.call(index, "stop"), timeout=10)
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        if self._loop is not None:
            for conn in self._conns:
                with contextlib.suppress(ValueError, OSError):   # already closed
                    self._loop.remove_reader(conn.fileno())
        for conn in self._conns:
            conn.close()
