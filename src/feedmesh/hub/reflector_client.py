"""How the hub's other processes (the crawling hub's replay, the web processes) ask a reflector
process (``feedmesh reflector``) over its internal API (:mod:`feedmesh.hub.reflector_api`).

A reflector that cannot be reached, or answers with an error, is a :class:`ReflectorUnavailable`
naming it, which the web layer answers with 503 and Retry-After, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable

import aiohttp
import msgspec

from feedmesh.hub.errors import FeedUnavailable
from feedmesh.hub.reflector_api import (
    MAX_BATCH,
    MAX_BODY_BYTES,
    MSGPACK,
    PREFIX,
    TIMEOUT_S,
    FeedVersion,
    ReflectorStatus,
    bearer,
    decode_items,
    decode_marks,
    decode_status,
    decode_version,
    decode_versions,
    pack,
)
from feedmesh.store import ReflectedItem

__all__ = ["ReflectorClient", "ReflectorUnavailable"]


class ReflectorUnavailable(FeedUnavailable):
    """A reflector process could not be reached or answered with an error; says which and why."""


class ReflectorClient:
    """One reflector process, as the hub and the web processes ask it (a shared session,
    created on first use). ``token``: the reflector's bearer token (None: sent without one)."""

    def __init__(self, number: int, url: str, *, token: bytes | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"reflector {number} at {url!r}: give an http:// URL such as "
                             "http://127.0.0.1:8301")
        self.number = number
        self.url = url.rstrip("/")
        if token is not None and not all(0x21 <= byte <= 0x7E for byte in token):
            raise ValueError(f"reflector {number}: a token is printable ASCII without spaces")
        self._headers = ({"Authorization": bearer(token).decode("ascii")}
                         if token is not None else {})
        self._session: aiohttp.ClientSession | None = None

    async def _get(self, path: str, body: bytes | None = None) -> bytes | None:
        """The answer's body (to a POST of ``body`` if given), None on 404;
        ReflectorUnavailable on anything else."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
                connector=aiohttp.TCPConnector(limit=64))
        where = f"reflector {self.number} at {self.url}"
        try:
            async with self._session.request(
                    "GET" if body is None else "POST", self.url + PREFIX + path, data=body,
                    headers=self._headers if body is None else
                    {**self._headers, "Content-Type": MSGPACK}) as answer:
                if answer.status == 404:
                    return None
                if answer.status != 200:
                    text = (await answer.text())[:200]
                    raise ReflectorUnavailable(f"{where} answered {answer.status}: {text}")
                chunks, size = [], 0
                async for chunk in answer.content.iter_chunked(1 << 16):
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        raise ReflectorUnavailable(f"{where}: answer larger than "
                                                   f"{MAX_BODY_BYTES >> 20} MB")
                    chunks.append(chunk)
                return b"".join(chunks)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ReflectorUnavailable(f"{where} cannot be reached: "
                                       f"{exc!r}"[:300]) from exc

    async def _decoded(self, path: str, decode: Callable[[bytes], object],
                       sent: bytes | None = None) -> object:
        body = await self._get(path, sent)
        if body is None:
            return None
        try:
            return decode(body)
        except msgspec.DecodeError as exc:
            raise ReflectorUnavailable(f"reflector {self.number} at {self.url} sent an "
                                       f"undecodable answer to {path}: {exc}") from exc

    async def feed_version(self, sub_id: int, generation: int) -> FeedVersion | None:
        return await self._decoded(f"/feeds/{sub_id}/{generation}", decode_version)  # type: ignore[return-value]

    async def feed_versions(self, pairs: list[tuple[int, int]]) -> list[FeedVersion | None]:
        """Many feeds' versions in one round trip (None: not served there), in order."""
        found: list[FeedVersion | None] = []
        for start in range(0, len(pairs), MAX_BATCH):
            batch = pairs[start:start + MAX_BATCH]
            answer = await self._decoded("/versions", decode_versions,
                                         pack(batch))
            if not isinstance(answer, list) or len(answer) != len(batch):
                raise ReflectorUnavailable(f"reflector {self.number} at {self.url} answered "
                                           f"{len(batch)} feeds' versions with "
                                           f"{len(answer) if isinstance(answer, list) else 0}")
            found.extend(answer)
        return found

    async def items(self, sub_id: int) -> list[ReflectedItem]:
        return await self._decoded(f"/feeds/{sub_id}/items", decode_items) or []  # type: ignore[return-value]

    async def watermarks(self) -> dict[int, int]:
        return await self._decoded("/watermarks", decode_marks) or {}  # type: ignore[return-value]

    async def status(self) -> ReflectorStatus | None:
        return await self._decoded("/status", decode_status)  # type: ignore[return-value]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
