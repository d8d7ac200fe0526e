"""One client connection to NATS as :class:`~feedmesh.bus.jetstream.JetStreamBus` opens it: to
one server or any of a cluster's, as a role (its nkey seed, from a file 0600), replies under
that role's own inbox, and refusals told apart from outages.

nats-py retries a refused ``CONNECT`` as it retries an unreachable server (for ever), and a
request whose subject the server refuses just goes unanswered (the refusal comes separately, to
the error callback). Left alone, both look like an outage and would be waited out for ever. So
a first connection refused for its credentials fails at once with a :class:`BusError` saying
so, and :class:`Denials` keeps each subject the server refused on this connection, for the bus
to report an unanswered request as refused rather than wait (permissions are fixed for a
connection: a subject refused once stays refused).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import nats.aio.client
import nats.errors

from feedmesh.bus.nats_auth import inbox_prefix, public_key, read_seed
from feedmesh.bus.ports import BusError
from feedmesh.secret_file import SecretFileError

__all__ = ["Denials", "dial", "server_urls"]

log = logging.getLogger("feedmesh.bus")

_DENIED = re.compile(r'permissions violation for (publish|subscription) to "([^"]*)"',
                     re.IGNORECASE)


def server_urls(url: str | Sequence[str]) -> list[str]:
    """The servers named by ``url``: one URL, several separated by commas (a cluster's), or a
    list of them."""
    urls = [u.strip() for u in (url.split(",") if isinstance(url, str) else url) if u.strip()]
    if not urls:
        raise BusError("bus: no NATS server URL given")
    for one in urls:
        if not one.startswith(("nats://", "tls://")):
            raise BusError(f"bus: NATS server {one!r}: give a nats:// URL such as "
                           "nats://127.0.0.1:4222")
    return urls


class Denials:
    """The subjects the server refused this connection, and when it first did."""

    def __init__(self) -> None:
        self._refused: dict[str, float] = {}

    def note(self, message: str) -> bool:
        """Keep the subject of a permissions-violation ``message``; whether it was one."""
        found = _DENIED.search(message)
        if found is None:
            return False
        subject = found.group(2).lower()  # nats-py hands the server's message on lower-cased
        if subject not in self._refused:
            self._refused[subject] = time.monotonic()
            log.error("bus: the NATS server refused %s to %s: these credentials do not allow it",
                      found.group(1).lower(), subject)
        return True

    def refused(self, subject: str) -> bool:
        return subject.lower() in self._refused

    def since(self, moment: float) -> str | None:
        """A subject first refused at or after ``moment`` (monotonic), if any."""
        for subject, first in self._refused.items():
            if first >= moment:
                return subject
        return None


async def dial(urls: list[str], *, name: str, credentials: str | Path | None,
               timeout: float, denials: Denials,
               disconnected: Callable[[], Awaitable[None]],
               reconnected: Callable[[], Awaitable[None]]) -> Any:
    """A connected nats-py client (it reconnects by itself, to any of ``urls``, for ever).
    Waits up to ``timeout`` for a first server; fails at once when one refuses the
    credentials. Without ``credentials`` it connects as nobody (a server with no
    authorization)."""
    options: dict[str, Any] = {}
    if credentials is not None:
        try:
            seed = read_seed(credentials)
        except SecretFileError as exc:
            raise BusError(f"bus: {exc}") from exc
        options = {"nkeys_seed_str": seed.decode(), "inbox_prefix": inbox_prefix(public_key(seed))}
    loop = asyncio.get_running_loop()
    refusal: asyncio.Future[str] = loop.create_future()

    async def error(e: Exception) -> None:
        text = str(e)
        if denials.note(text):
            return
        if "authorization violation" in text.lower() and not refusal.done():
            refusal.set_result(text)
        log.debug("bus: NATS client error: %s", e)

    deadline = time.monotonic() + timeout
    while True:
        client = nats.aio.client.Client()
        # nats-py retries a first connection as it reconnects (for ever): bound it.
        connecting = asyncio.ensure_future(client.connect(
            urls, name=name, connect_timeout=2, max_reconnect_attempts=-1,
            reconnect_time_wait=0.25, allow_reconnect=True, disconnected_cb=disconnected,
            reconnected_cb=reconnected, error_cb=error, **options))
        await asyncio.wait({connecting, refusal}, timeout=max(0.1, deadline - time.monotonic()),
                           return_when=asyncio.FIRST_COMPLETED)
        if connecting.done() and connecting.exception() is None:
            return client
        if not connecting.done():
            connecting.cancel()
            with contextlib.suppress(BaseException):
                await connecting
        failure = None if connecting.cancelled() else connecting.exception()
        with contextlib.suppress(Exception):
            await client.close()
        where = ", ".join(urls)
        if refusal.done():
            whose = f"the credentials in {credentials}" if credentials else "no credentials"
            raise BusError(f"bus: the NATS server at {where} refused {whose} "
                           f"({refusal.result().strip()})")
        if time.monotonic() >= deadline:
            why = f"{type(failure).__name__}: {failure}" if failure is not None and str(
                failure) else type(failure).__name__ if failure is not None else "timed out"
            raise BusError(f"bus: cannot reach the NATS server at {where} within "
                           f"{timeout:g} s ({why})") from failure
        await asyncio.sleep(0.25)
