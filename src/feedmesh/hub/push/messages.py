"""What push sends: a WebSub fat ping (the topic's document, its ``Link`` header, signed with the
subscriber's secret when it gave one, by its target's method: sha256 unless its owner chose
another) and a webhook's JSON of new entries (always signed, sha256), and the documents rendered
for push, kept per version so the subscribers of one topic share them."""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from datetime import UTC, datetime

from feedmesh.feeds.render import CONTENT_TYPES
from feedmesh.hub.entry_ids import entry_id_in
from feedmesh.store import PushTarget, ReflectedItem, Subscription
from feedmesh.websub.signature import sign

__all__ = ["RenderedDocuments", "webhook_entry", "webhook_message", "websub_message"]


def websub_message(target: PushTarget, document: bytes,
                   link: str) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a delivery to a WebSub subscriber of ``target.topic``: its
    document and the ``Link`` header the topic is served with."""
    headers = {"Content-Type": CONTENT_TYPES[target.format], "Link": link}
    if target.secret:
        headers["X-Hub-Signature"] = sign(target.secret, document, target.signature)
    return document, headers


def webhook_message(target: PushTarget, sub: Subscription | None,
                    items: list[ReflectedItem]) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a delivery to a webhook: ``items`` (none: a test)."""
    event = "entries" if items else "test"
    body = json.dumps({
        "event": event,
        "delivery": str(uuid.uuid4()),
        "subscription": {"id": target.sub_id, "name": sub.name if sub else "",
                         "query": sub.query if sub else ""},
        "entries": [webhook_entry(item, sub) for item in items],
    }).encode()
    return body, {"Content-Type": "application/json", "X-Feedmesh-Event": event,
                  "X-Feedmesh-Signature": sign(target.secret, body, "sha256")}


def webhook_entry(item: ReflectedItem, sub: Subscription | None) -> dict[str, object]:
    """One new entry as a webhook's JSON carries it (JSON Feed 1.1 item names), with the id it
    has in the private feed of ``sub``."""
    entry = item.entry
    published = entry.published or entry.updated
    return {"id": entry_id_in(sub, item.entry_id), "url": entry.link,
            "title": entry.title, "summary": entry.summary,
            "date_published": (published or datetime.fromtimestamp(item.first_seen_at, UTC))
            .isoformat(),
            "first_seen_at": item.first_seen_at,
            "source": {"title": item.feed_title, "feed_url": item.feed_url}}


class RenderedDocuments:
    """The last documents rendered for push, by (subscription, format, version, topic): the
    subscribers of one topic share one rendering of each version."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._held: OrderedDict[tuple[int, str, int, str], bytes] = OrderedDict()

    def get(self, key: tuple[int, str, int, str]) -> bytes | None:
        found = self._held.get(key)
        if found is not None:
            self._held.move_to_end(key)
        return found

    def put(self, key: tuple[int, str, int, str], body: bytes) -> None:
        self._held[key] = body
        if len(self._held) > self.size:
            self._held.popitem(last=False)
