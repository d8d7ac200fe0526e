"""A reply of the farm and how to deliver it: the value the request handlers (``routes``,
``control``) return and the connection (``server``) carries out."""

from __future__ import annotations

from collections.abc import Awaitable, Iterator

from feedmesh.farm.faults import Fault

__all__ = ["Reply", "text_reply"]


class Reply:
    """A response and how to deliver it (at once, late, trickled, streamed, or never)."""

    __slots__ = ("body", "chunked", "chunks", "delay_s", "fault", "headers", "hold", "pending",
                 "status", "trickle")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes = b"", *,
                 fault: Fault = Fault.NONE) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.fault = fault
        self.chunks: Iterator[bytes] | None = None
        self.chunked = False
        self.delay_s = 0.0
        self.trickle: tuple[int, float] | None = None
        self.hold = False
        self.pending: Awaitable[Reply] | None = None
        """Set when the reply is still being made (off the event loop): await it, then deliver."""


def text_reply(status: int, text: str, content_type: str = "text/plain; charset=utf-8",
               extra: list[tuple[str, str]] | None = None) -> Reply:
    body = text.encode()
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
    return Reply(status, headers + (extra or []), body)
