"""Entries that did not come through the parser, held to the parser's standard.

A neighbour's FeedEx bundle and a multicast record carry an entry's title, link and summary as
whoever sent them chose; they are served by the peer's local proxy to a person's browser or
reader exactly as the hub serves what its parser read. So each field passes the same code the
parser uses (:mod:`.sanitize`, :mod:`.urls`) before it is archived:

* the title becomes plain text (:func:`~.sanitize.html_to_text` when it looks like HTML);
* the link is absolute against the feed's URL, and empty when its scheme is not http(s)
  (``javascript:``, ``data:``, ``vbscript:``...);
* the summary and content are sanitized HTML (scripts, iframes, event handlers, unsafe URLs go);
* a date later than ``now`` plus :data:`CLOCK_SKEW_S` is clamped to ``now``: an entry cannot
  claim the top of a reader's list for days by dating itself ahead.

Pure: ``now`` is given (Unix seconds); nothing here reads a clock.
"""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from feedmesh.model import Entry

from .sanitize import collapse_space, html_to_text, looks_like_html, sanitize_html
from .urls import resolve_url

__all__ = ["CLOCK_SKEW_S", "clamp_date", "clean_foreign"]

CLOCK_SKEW_S = 300.0
"""Dates up to this far ahead of ``now`` are believed (clocks differ); later ones are clamped."""


def clamp_date(moment: datetime | None, now: float | None) -> datetime | None:
    """``moment``, or ``now`` when it is more than :data:`CLOCK_SKEW_S` ahead of ``now``."""
    if moment is None or now is None:
        return moment
    if moment.timestamp() > now + CLOCK_SKEW_S:
        return datetime.fromtimestamp(now, UTC)
    return moment


def _title(value: str) -> str:
    return html_to_text(value) if looks_like_html(value) else collapse_space(value)


def _link(value: str, base: str) -> str:
    link = resolve_url(base, value)
    return link if link.startswith(("http://", "https://")) else ""


def clean_foreign(entry: Entry, base: str, now: float | None) -> Entry:
    """``entry`` as the parser would have made it: plain-text title, a safe absolute link,
    sanitized HTML, no date beyond ``now`` (see the module docstring). ``base`` is the feed's URL;
    the content hash is left as given (the caller decides what it is computed from)."""
    return msgspec.structs.replace(
        entry, title=_title(entry.title), link=_link(entry.link, base),
        summary=sanitize_html(entry.summary, base) if entry.summary else "",
        content=sanitize_html(entry.content, base) if entry.content else "",
        published=clamp_date(entry.published, now), updated=clamp_date(entry.updated, now))
