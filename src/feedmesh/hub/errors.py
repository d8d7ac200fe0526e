"""The errors that cross the hub's door to the web layer: raised by the front, push or a reflector
client, answered by :mod:`feedmesh.hub.web.errors` with their status and code.

::

    FeedmeshError
    ├── FollowLimitError     following would take an account past its limit (422)
    ├── PushRefusedError     a WebSub request or webhook refused (its own status and code)
    └── FeedUnavailable      a private feed's reflector cannot answer now (503, Retry-After)
"""

from __future__ import annotations

from feedmesh.errors import FeedmeshError

__all__ = ["FeedUnavailable", "FollowLimitError", "PushRefusedError"]


class FollowLimitError(FeedmeshError):
    """Following these feeds would take an account past its limit (nothing was followed)."""

    def __init__(self, following: int, adding: int, limit: int) -> None:
        super().__init__(f"an account may follow at most {limit} source feeds (you follow "
                         f"{following}, this adds {adding})")
        self.following = following
        self.adding = adding
        self.limit = limit


class PushRefusedError(FeedmeshError):
    """A WebSub request or a webhook the hub refuses: the HTTP status and code to answer with,
    and a message saying why."""

    def __init__(self, status: int, code: str, message: str, **detail: object) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail


class FeedUnavailable(FeedmeshError):
    """A private feed's owner (a reflector in another process) cannot answer now; the message
    says which and why. The web layer answers 503 with Retry-After."""
