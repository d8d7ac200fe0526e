"""Work caps for one document, and the collector of problems met while reading it.

A feed comes from a stranger, so every dimension of the work it can cause is bounded: its size in
bytes, its number of entries, the text kept per field and its nesting depth. When a cap is hit the
parser keeps what fit and reports a ``too_large`` problem; it never spends seconds on one document.
Nesting depth has no setting here because the decoders enforce it: libxml2 stops at 256 levels
without ``huge_tree`` and msgspec at its recursion guard; both become ``too_large`` problems.

:class:`Problems` keeps the first problem met (the one :class:`~feedmesh.model.ParsedFeed`
reports) and whether any cap was hit, so format modules can record and move on.
"""

from __future__ import annotations

import msgspec

from feedmesh.model import ParseProblem

__all__ = ["DEFAULT_LIMITS", "ParseLimits", "Problems"]


class ParseLimits(msgspec.Struct, frozen=True):
    """Caps on the work one document may cause. Defaults suit real feeds with a wide margin.

    The largest real feeds are podcast archives of a few MB; the store keeps a bounded number of
    entries per feed anyway, so the newest ``max_entries`` (feeds list newest first) are enough.
    """

    max_bytes: int = 8 * 1024 * 1024
    """Documents longer than this are cut at the last complete entry that fits (XML) or refused
    (JSON), with a ``too_large`` problem."""
    max_entries: int = 1000
    """Entries after this many are dropped (``too_large``)."""
    max_html_chars: int = 256 * 1024
    """Summary and content are cut to this many characters before sanitizing."""
    max_text_chars: int = 4096
    """Titles, ids, links, names and other short fields are cut to this many characters."""


DEFAULT_LIMITS = ParseLimits()


class Problems:
    """What went wrong while reading one document; the first problem is the one reported."""

    __slots__ = ("first", "kinds", "warnings")

    def __init__(self) -> None:
        self.first: ParseProblem | None = None
        self.kinds: set[str] = set()
        self.warnings: list[ParseProblem] = []

    def warn(self, message: str) -> None:
        """A problem with an optional element that is then ignored: a warning, not the error."""
        if len(self.warnings) < 20:
            self.warnings.append(ParseProblem(kind="invalid", message=message))

    def add(self, kind: str, message: str, line: int | None = None,
            column: int | None = None) -> None:
        self.kinds.add(kind)
        if self.first is None:
            self.first = ParseProblem(kind=kind, message=message, line=line, column=column)

    def add_problem(self, problem: ParseProblem | None) -> None:
        if problem is not None:
            self.add(problem.kind, problem.message, problem.line, problem.column)

    def cut(self, value: str, limit: int, what: str) -> str:
        """Return ``value`` cut to ``limit`` characters, noting the cut as ``too_large``."""
        if len(value) <= limit:
            return value
        self.add("too_large", f"{what} is {len(value)} characters long; kept the first {limit}")
        return value[:limit]
