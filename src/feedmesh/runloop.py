"""The event loop every long-running feedmesh process runs on.

uvloop's loop (libuv, the ``fast`` extra that the README's install brings) where it is
installed, asyncio's own otherwise: the same code runs on both (aiohttp, nats-py and the store
threads do not care), and uvloop spends less CPU per socket read, write and callback, which is
much of what a crawler, a web process or a reflector does between its real work. With it (and
two changes of the crawler and the reflectors) the 1+2+2 hub at case (b) used ~147% of this
machine's two cores instead of ~186%, every process less (docs/measurements.md, "The queue
found"). ``FEEDMESH_LOOP=asyncio`` chooses asyncio's loop even where uvloop is installed: to
compare the two, or to rule uvloop out when chasing a problem.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from feedmesh import environment
from feedmesh.errors import FeedmeshError

__all__ = ["LoopChoiceError", "loop_factory", "loop_name", "run"]

T = TypeVar("T")

ENV = "FEEDMESH_LOOP"
CHOICES = ("uvloop", "asyncio")


class LoopChoiceError(FeedmeshError, ValueError):
    """``FEEDMESH_LOOP`` names no loop this machine can run."""


def loop_name() -> str:
    """``uvloop`` or ``asyncio``: what :func:`run` will use here (:class:`LoopChoiceError`: a
    ``FEEDMESH_LOOP`` that names neither, or uvloop asked for by name but not installed)."""
    asked = environment.get(ENV).strip().lower()
    if asked and asked not in CHOICES:
        raise LoopChoiceError(f"{ENV}={asked!r}: the event loop is one of {', '.join(CHOICES)}")
    if asked == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if asked == "uvloop":
            raise LoopChoiceError(f"{ENV}=uvloop, but uvloop is not installed (pip install "
                                  "'feedmesh[fast]')") from None
        return "asyncio"
    return "uvloop"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for :class:`asyncio.Runner`: uvloop's, or None for asyncio's own."""
    if loop_name() == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return None


def run(main: Coroutine[Any, Any, T]) -> T:
    """:func:`asyncio.run` on the loop :func:`loop_name` chooses."""
    try:
        factory = loop_factory()
    except LoopChoiceError:
        main.close()  # never awaited: no warning about it on top of the error
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
