"""The exceptions of the matching engine, in one tree.

::

    MatchError                      anything this package raises on purpose
    ├── QueryError (ValueError)     a subscription query that cannot be accepted, with position
    ├── IndexSnapshotError (ValueError)   index bytes that are truncated, corrupt or foreign
    └── SubscriptionIdError (ValueError)  a subscription id outside 0 <= id < 2**31

A :class:`QueryError` always says *what* is wrong, *where* (0-based character offset into the text
the user typed) and gives a *hint* for fixing it, so the web UI and ``feedmesh query check`` can
point at the offending character.
"""

from __future__ import annotations

from feedmesh.errors import FeedmeshError

__all__ = ["IndexSnapshotError", "MatchError", "QueryError", "SubscriptionIdError"]


class MatchError(FeedmeshError):
    """Base class of every error the matching engine raises deliberately."""


class QueryError(MatchError, ValueError):
    """A query was refused. ``str(error)`` reads ``"<message> at <position>"``."""

    def __init__(self, message: str, position: int, hint: str = "") -> None:
        super().__init__(message, position, hint)
        self.message = message
        self.position = position
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} at {self.position}"

    def describe(self, text: str) -> str:
        """A multi-line explanation with a caret under the offending character of ``text``."""
        # Show at most 70 characters around the position so that a 1,000-character query stays
        # legible.
        start = max(0, min(self.position, len(text)) - 35)
        shown = text[start : start + 70]
        visible = "".join(c if c.isprintable() else " " for c in shown)
        lines = [str(self), "  " + visible, "  " + " " * (self.position - start) + "^"]
        if self.hint:
            lines.append("hint: " + self.hint)
        return "\n".join(lines)


class IndexSnapshotError(MatchError, ValueError):
    """Serialized index bytes could not be loaded (wrong magic, version, sizes or invariants)."""


class SubscriptionIdError(MatchError, ValueError):
    """A subscription id is not an int in ``0 <= id < 2**31`` (the index stores them as int32)."""
