"""Where private feeds are held, as the front reads them: :class:`LocalHolders`, the reflectors of
this process (the embedded hub), and :class:`RemoteHolders`, ``feedmesh reflector`` processes
asked over their API (a web process of its own). Both answer a feed's version from memory (a
reader's 304 costs no disk) and its items from the reflector's log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from feedmesh.hub.errors import FeedUnavailable
from feedmesh.hub.reflector_api import FeedVersion
from feedmesh.hub.reflector_client import ReflectorClient
from feedmesh.store import HubState, ReflectedItem, StoreThread

__all__ = ["VERSION_TTL_S", "FeedHolders", "HeldFeeds", "LocalHolders", "Owners",
           "RemoteHolders", "VersionBatches"]


class Owners:
    """Which reflector serves each subscription (-1: none), two bytes per subscription id, so a
    feed request finds its reflector without a lookup in storage."""

    def __init__(self) -> None:
        self._of = np.full(1024, -1, dtype=np.int16)

    def set(self, sub_ids: np.ndarray | int, reflector: np.ndarray | int) -> None:
        top = int(np.max(sub_ids)) if np.size(sub_ids) else -1
        if top >= len(self._of):
            grown = np.full(max(top + 1, 2 * len(self._of)), -1, dtype=np.int16)
            grown[: len(self._of)] = self._of
            self._of = grown
        self._of[sub_ids] = reflector

    def get(self, sub_id: int) -> int:
        return int(self._of[sub_id]) if 0 <= sub_id < len(self._of) else -1


class FeedHolders(Protocol):
    owners: Owners

    async def version(self, sub_id: int, generation: int) -> FeedVersion | None: ...
    async def items(self, sub_id: int) -> list[ReflectedItem]: ...
    async def held(self) -> int:
        """Subscriptions the reflectors hold, as far as this process can tell."""
        ...

    def forget(self, sub_id: int) -> None:
        """The subscription changed: what is known of its feed is not current."""
        ...

    async def close(self) -> None: ...


class HeldFeeds(Protocol):
    """A reflector of this process, as the front reads its feeds (:class:`LocalHolders`)."""

    def holds(self, sub_id: int) -> bool:
        """Whether it holds ``sub_id``'s feed (at any URL generation)."""
        ...

    def serves(self, sub_id: int, generation: int) -> bool: ...
    def version(self, sub_id: int) -> tuple[int, float]: ...

    async def items(self, sub_id: int,
                    known: Mapping[int, ReflectedItem] | None = None) -> list[ReflectedItem]: ...

    def subscription_count(self) -> int: ...


class LocalHolders:
    """The reflectors of this process: a feed's version from memory, its items from its log."""

    def __init__(self, reflectors: Sequence[HeldFeeds], owners: Owners | None = None) -> None:
        self.reflectors = reflectors
        self.owners = owners or Owners()

    def serving(self, sub_id: int, generation: int | None = None) -> HeldFeeds | None:
        owner = self.owners.get(sub_id)
        if owner < 0:
            return None
        reflector = self.reflectors[owner]
        if generation is None:
            return reflector if reflector.holds(sub_id) else None
        return reflector if reflector.serves(sub_id, generation) else None

    async def version(self, sub_id: int, generation: int) -> FeedVersion | None:
        reflector = self.serving(sub_id, generation)
        return FeedVersion(*reflector.version(sub_id)) if reflector is not None else None

    async def items(self, sub_id: int) -> list[ReflectedItem]:
        reflector = self.serving(sub_id)
        return await reflector.items(sub_id) if reflector is not None else []

    async def held(self) -> int:
        return sum(r.subscription_count() for r in self.reflectors)

    def forget(self, sub_id: int) -> None:
        """Nothing is cached: versions are read from the reflectors' memory."""

    async def close(self) -> None:
        """The reflectors are their role's to close."""


VERSION_TTL_S = 1.0
"""How long a web process reuses a feed's version from its reflector. A reader may be told 304
for up to this long after the feed changed (its Cache-Control allows 60 s); in return a poll
that finds nothing new costs no round trip to the reflector."""
VERSIONS_KEPT = 200_000


class VersionBatches:
    """The versions one reflector is asked for, sent together: a lookup that finds no request
    in flight goes at once; those that arrive while one is in flight wait for it to end and
    go as the next request, all of them (DataLoader's batching). Under load, the feeds polled
    in the same few milliseconds cost one round trip instead of one each; alone, a lookup
    waits for nothing. Lookups of the same feed share one answer."""

    def __init__(self, client: ReflectorClient) -> None:
        self.client = client
        self._waiting: dict[tuple[int, int], asyncio.Future[FeedVersion | None]] = {}
        self._sending = False
        self._sender: asyncio.Task[None] | None = None  # held: the loop keeps weak references
        self.requests = 0
        """Round trips made, for the tests and the figures."""

    async def get(self, sub_id: int, generation: int) -> FeedVersion | None:
        key = (sub_id, generation)
        future = self._waiting.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            # An answer nobody waits for any more (its reader left) is still retrieved.
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._waiting[key] = future
            if not self._sending:
                self._sending = True
                self._sender = asyncio.get_running_loop().create_task(self._send())
        # One reader leaving must not cancel the answer others wait for.
        return await asyncio.shield(future)

    async def _send(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, {}
                self.requests += 1
                try:
                    found = await self.client.feed_versions(list(batch))
                except Exception as exc:  # noqa: BLE001 - every waiter gets it, as one lookup would
                    for future in batch.values():
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for future, version in zip(batch.values(), found, strict=True):
                    if not future.done():
                        future.set_result(version)
        finally:
            self._sending = False


class RemoteHolders:
    """Reflectors in processes of their own (``feedmesh reflector``), asked over their API. The
    owner of a subscription this process has not heard of is read from the hub's state once;
    a feed's version is reused for ``VERSION_TTL_S``, and the versions asked of a reflector at
    the same time go in one request (:class:`VersionBatches`)."""

    def __init__(self, clients: Sequence[ReflectorClient], state: HubState,
                 io: StoreThread) -> None:
        self.clients = list(clients)
        self.owners = Owners()
        self._state = state
        self._io = io
        self._versions: dict[tuple[int, int], tuple[float, FeedVersion | None]] = {}
        self.batches = [VersionBatches(client) for client in self.clients]

    async def _owner(self, sub_id: int) -> int:
        owner = self.owners.get(sub_id)
        if owner < 0:
            sub = await self._io.call(self._state.subscription, sub_id)
            if sub is None or not 0 <= sub.reflector < len(self.clients):
                return -1
            owner = sub.reflector
            self.owners.set(sub_id, owner)
        return owner

    async def version(self, sub_id: int, generation: int) -> FeedVersion | None:
        now = time.monotonic()
        cached = self._versions.get((sub_id, generation))
        if cached is not None and cached[0] > now:
            return cached[1]
        owner = await self._owner(sub_id)
        found = await self.batches[owner].get(sub_id, generation) if owner >= 0 else None
        now = time.monotonic()  # the answer is as fresh as its arrival
        if len(self._versions) >= VERSIONS_KEPT:
            self._versions.clear()  # the next second fills it again with what is polled
        self._versions[(sub_id, generation)] = (now + VERSION_TTL_S, found)
        return found

    def forget(self, sub_id: int) -> None:
        """A subscription changed here: ask its reflector afresh."""
        for key in [k for k in self._versions if k[0] == sub_id]:
            del self._versions[key]

    async def items(self, sub_id: int) -> list[ReflectedItem]:
        owner = await self._owner(sub_id)
        return await self.clients[owner].items(sub_id) if owner >= 0 else []

    async def held(self) -> int:
        count = 0
        for client in self.clients:
            try:
                status = await client.status()
            except FeedUnavailable:  # a reflector that is down holds nothing we can serve
                status = None
            count += status.subscriptions if status is not None else 0
        return count

    async def close(self) -> None:
        for client in self.clients:
            await client.close()


