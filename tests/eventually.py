"""The one way tests wait: on a condition, never for a fixed time.

``await eventually(lambda: hub.stats()["feeds"] == 40)`` polls the condition (a plain or async
callable) until it holds, and fails with what it was waiting for and the last value seen when it
does not within ``timeout`` seconds. ``eventually.blocking(...)`` does the same from synchronous
code (tests that drive subprocesses). A condition that raises ``AssertionError`` counts as not yet
true, so a condition may be written as assertions; the last one's message is reported.

A timed test that must *not* see something happen waits for a condition that proves the system
moved on (a later cycle, a later sequence number), not for a fixed time.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Callable
from typing import Any

__all__ = ["eventually"]

DEFAULT_TIMEOUT_S = 30.0


class _Eventually:
    """``await eventually(condition)``; ``eventually.blocking(condition)`` outside a loop."""

    async def __call__(self, condition: Callable[[], Any], *, timeout: float = DEFAULT_TIMEOUT_S,
                       interval: float = 0.02, what: str = "") -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: object = None
        while True:
            try:
                value = condition()
                if inspect.isawaitable(value):
                    value = await value
                if value:
                    return value
                last = value
            except AssertionError as exc:
                last = exc
            if loop.time() >= deadline:
                raise AssertionError(_message(condition, what, timeout, last))
            await asyncio.sleep(interval)

    def blocking(self, condition: Callable[[], Any], *, timeout: float = DEFAULT_TIMEOUT_S,
                 interval: float = 0.05, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                value = condition()
                if value:
                    return value
                last = value
            except AssertionError as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise AssertionError(_message(condition, what, timeout, last))
            time.sleep(interval)


def _message(condition: Callable[[], Any], what: str, timeout: float, last: object) -> str:
    name = what or getattr(condition, "__qualname__", repr(condition))
    if name == "<lambda>":
        with contextlib.suppress(OSError, TypeError):
            name = inspect.getsource(condition).strip()
    return f"not true within {timeout:g} s: {name} (last: {last!r})"


eventually = _Eventually()
