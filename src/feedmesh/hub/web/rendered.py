"""Each private feed's bytes, rendered once per change and compressed once, however many readers
poll it: serving a feed is then a dictionary lookup, and the event loop the crawler shares with
the web server is not spent rendering and compressing the same document for every reader.

A feed's entry is keyed by subscription and format and holds the version it was rendered at (the
URL generation and the content version the reflector bumps on every change): a request for a newer
version renders again, and readers asking at once for the same new version share one rendering.
The entries are bounded in bytes, the least recently served dropped first.
"""

from __future__ import annotations

import asyncio
import gzip
from collections import OrderedDict
from collections.abc import Awaitable, Callable

__all__ = ["Rendered", "RenderedFeeds"]


class Rendered:
    __slots__ = ("body", "gzipped")

    def __init__(self, body: bytes) -> None:
        self.body = body
        # Level 6: within a few percent of 9's size at a third of its time, paid once.
        self.gzipped = gzip.compress(body, compresslevel=6, mtime=0)

    @property
    def size(self) -> int:
        return len(self.body) + len(self.gzipped)


class RenderedFeeds:
    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[tuple[int, str], tuple[tuple[int, int], Rendered]] = \
            OrderedDict()
        self._rendering: dict[tuple[int, str, tuple[int, int]], asyncio.Future[Rendered]] = {}
        self.renders = 0
        """How many times a feed was rendered (the rest were served from memory)."""

    async def get(self, sub_id: int, fmt: str, version: tuple[int, int, str],
                  render: Callable[[], Awaitable[bytes]]) -> Rendered:
        """The feed at ``version`` (URL generation, content version, the token its links
        name), rendered by ``render`` when it is not held yet."""
        key = (sub_id, fmt)
        held = self._entries.get(key)
        if held is not None and held[0] == version:
            self._entries.move_to_end(key)
            return held[1]
        pending = (sub_id, fmt, version)
        shared = self._rendering.get(pending)
        if shared is not None:  # another reader asked first: wait for its rendering
            return await shared
        future: asyncio.Future[Rendered] = asyncio.get_running_loop().create_future()
        self._rendering[pending] = future
        try:
            rendered = Rendered(await render())
            self.renders += 1
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a failure nobody else waited for is not logged
            raise
        finally:
            del self._rendering[pending]
        future.set_result(rendered)
        self._keep(key, version, rendered)
        return rendered

    def _keep(self, key: tuple[int, str], version: tuple[int, int], rendered: Rendered) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            if old[0] > version:  # a slower rendering of an older version: keep the newer
                self._entries[key] = old
                return
            self.bytes -= old[1].size
        if rendered.size > self.max_bytes:
            return
        self._entries[key] = (version, rendered)
        self.bytes += rendered.size
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped.size
