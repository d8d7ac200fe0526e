"""What push needs of the reflectors in its own process: the document a WebSub subscriber gets
(the feed as its topic serves it now, rendered once per version for every subscriber of the
topic) and the entries a feed holds (what a delivery worker resends after a restart). The
embedded hub and a ``feedmesh reflector`` process's delivery worker share it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from feedmesh.hub.feed_document import RenderedItems, render_private_feed
from feedmesh.hub.push_messages import RenderedDocuments
from feedmesh.store import ReflectedItem

if TYPE_CHECKING:
    from feedmesh.hub.push import PushService
    from feedmesh.hub.reflector import Reflector

__all__ = ["LocalFeeds"]


class LocalFeeds:
    """The private feeds ``serving(sub_id)`` finds a reflector of this process for (None: not
    here); ``push`` is the service the documents are for (set once it exists)."""

    def __init__(self, serving: Callable[[int], Reflector | None]) -> None:
        self.serving = serving
        self.push: PushService | None = None
        self._documents = RenderedDocuments()
        self._items = RenderedItems(16 * 1024 * 1024)

    async def document(self, sub_id: int, fmt: str, topic: str) -> bytes:
        """The feed a WebSub subscriber of ``topic`` gets now: what a reader polling the topic
        would be served."""
        assert self.push is not None
        reflector = self.serving(sub_id)
        version = reflector.version(sub_id)[0] if reflector is not None else -1
        key = (sub_id, fmt, version, topic)
        body = self._documents.get(key)
        if body is None:
            sub = await self.push.subscription(sub_id)
            items = (await reflector.items(sub_id, self.push.recent_items)
                     if reflector is not None else [])
            body = render_private_feed(sub, items, fmt, base_url=topic.rsplit("/f/", 1)[0],
                                       self_url=topic, cache=self._items)
            self._documents.put(key, body)
        return body

    async def held(self, sub_id: int) -> list[ReflectedItem]:
        """The entries the feed holds here, newest first ([]: not held here)."""
        assert self.push is not None
        reflector = self.serving(sub_id)
        return await reflector.items(sub_id, self.push.recent_items) if reflector else []
