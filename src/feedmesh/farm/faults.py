"""The misbehaviours a farm feed can be given, and how a mix of them is spread over the feeds.

Each feed has at most one fault. A *mix* gives each fault kind a share of the feeds (the rest are
healthy); exact per-feed overrides pin a fault on a given feed for tests. Spec strings, as used by
``feedmesh farm --faults``::

    default                      the realistic mix below (~11 % of feeds misbehave)
    none                         every feed healthy
    http_404=0.05,timeout=0.01   exactly these shares
    default,flood=0.001          the default mix with some shares changed or added

What each kind does is documented on :class:`Fault`; the server (``server.py`` and
``faultbodies.py``) implements it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from feedmesh.errors import FeedmeshError

__all__ = ["DEFAULT_FAULT_MIX", "Fault", "FaultSpecError", "parse_fault", "parse_fault_mix"]


class Fault(enum.StrEnum):
    """One way a feed misbehaves (``none``: it does not)."""

    NONE = "none"
    SLOW = "slow"  # waits ``slow_delay_s`` (real seconds) before sending headers
    SLOW_BODY = "slow_body"  # headers at once, then the body trickles (slowloris)
    TIMEOUT = "timeout"  # reads the request and never answers
    HTTP_500 = "http_500"
    HTTP_502 = "http_502"
    HTTP_503 = "http_503"  # with ``Retry-After: <seconds>``
    RATE_LIMIT = "rate_limit"  # 429 + ``Retry-After: <seconds>`` unless the client waited that long
    RATE_LIMIT_DATE = "rate_limit_date"  # the same with ``Retry-After: <HTTP-date>``
    REDIRECT_301 = "redirect_301"  # to /feeds/<id>/moved, which serves the same feed
    REDIRECT_302 = "redirect_302"
    REDIRECT_307 = "redirect_307"
    REDIRECT_308 = "redirect_308"
    REDIRECT_LOOP = "redirect_loop"  # /feeds/<id> -> /feeds/<id>/loop -> /feeds/<id> ...
    REDIRECT_PRIVATE = "redirect_private"  # 302 to 10.1.2.3 (even ids) or 169.254.169.254 (odd)
    NOT_FOUND = "not_found"  # 404
    GONE = "gone"  # 410
    MALFORMED = "malformed"  # a bare '&' in a title and the closing tags cut off
    HTML = "html"  # an HTML page (text/html) instead of the feed
    ENDLESS = "endless"  # chunked body that never ends
    HUGE = "huge"  # a 100 MB (``huge_bytes``) feed with Content-Length
    GZIP_BOMB = "gzip_bomb"  # a few MB of gzip that inflate to ``bomb_bytes`` (GBs)
    WRONG_CHARSET = "wrong_charset"  # declared UTF-8, encoded windows-1252
    UTF16 = "utf16"  # UTF-16 with a byte order mark, declared as such
    CHANGING_GUIDS = "changing_guids"  # every fetch gives every entry a new guid
    DUPLICATE_GUIDS = "duplicate_guids"  # all entries share one guid
    MISSING_DATES = "missing_dates"  # no dates on entries nor on the feed
    FUTURE_DATES = "future_dates"  # entries dated ``future_offset_s`` after they were posted
    FLOOD = "flood"  # each post is a burst of ``flood_entries`` entries (10,000)


_ALIASES = {"500": "http_500", "502": "http_502", "503": "http_503", "404": "not_found",
            "410": "gone", "429": "rate_limit", "301": "redirect_301", "302": "redirect_302",
            "307": "redirect_307", "308": "redirect_308", "http_404": "not_found",
            "http_410": "gone", "http_429": "rate_limit", "slowloris": "slow_body"}

# Shares of feeds, chosen to look like a real crawl: dead and moved feeds and broken documents are
# common, abusive bodies rare (every one of them still appears in a farm of a few thousand feeds).
DEFAULT_FAULT_MIX: Mapping[Fault, float] = {
    Fault.NOT_FOUND: 0.02, Fault.GONE: 0.005, Fault.HTTP_500: 0.005, Fault.HTTP_502: 0.003,
    Fault.HTTP_503: 0.003, Fault.RATE_LIMIT: 0.002, Fault.RATE_LIMIT_DATE: 0.002,
    Fault.REDIRECT_301: 0.01, Fault.REDIRECT_302: 0.005, Fault.REDIRECT_307: 0.002,
    Fault.REDIRECT_308: 0.003, Fault.REDIRECT_LOOP: 0.001, Fault.REDIRECT_PRIVATE: 0.001,
    Fault.SLOW: 0.005, Fault.SLOW_BODY: 0.001, Fault.TIMEOUT: 0.002, Fault.MALFORMED: 0.01,
    Fault.HTML: 0.005, Fault.ENDLESS: 0.0002, Fault.HUGE: 0.0002, Fault.GZIP_BOMB: 0.0002,
    Fault.WRONG_CHARSET: 0.005, Fault.UTF16: 0.002, Fault.CHANGING_GUIDS: 0.005,
    Fault.DUPLICATE_GUIDS: 0.005, Fault.MISSING_DATES: 0.01, Fault.FUTURE_DATES: 0.003,
    Fault.FLOOD: 0.0001,
}


class FaultSpecError(FeedmeshError, ValueError):
    """A fault name or mix spec could not be read; the message says which part and why."""


def parse_fault(name: str | Fault) -> Fault:
    """``"http_500"``, ``"500"``, ``Fault.HTTP_500`` -> ``Fault.HTTP_500``."""
    if isinstance(name, Fault):
        return name
    key = name.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    try:
        return Fault(key)
    except ValueError:
        known = ", ".join(f.value for f in Fault)
        raise FaultSpecError(f"unknown fault {name!r}; known faults: {known}") from None


def parse_fault_mix(spec: str | Mapping[str | Fault, float]) -> dict[Fault, float]:
    """Read a mix (a spec string, see the module docstring, or a mapping) into shares per fault."""
    if not isinstance(spec, str):
        items = [(parse_fault(k), float(v)) for k, v in spec.items()]
        mix: dict[Fault, float] = {}
    else:
        parts = [p.strip() for p in spec.split(",") if p.strip()]
        mix = {}
        items = []
        for i, part in enumerate(parts):
            if part in ("default", "none"):
                if i != 0:
                    raise FaultSpecError(f"{part!r} may only start a fault spec, "
                                         f"found at item {i + 1}")
                mix = dict(DEFAULT_FAULT_MIX) if part == "default" else {}
                continue
            name, eq, share = part.partition("=")
            if not eq:
                raise FaultSpecError(f"fault spec item {part!r} needs the form KIND=SHARE")
            try:
                value = float(share)
            except ValueError:
                raise FaultSpecError(f"share {share!r} of fault {name!r} is not a number") from None
            items.append((parse_fault(name), value))
    for fault, value in items:
        if not 0.0 <= value <= 1.0:
            raise FaultSpecError(f"share of fault {fault.value!r} must be within [0, 1], "
                                 f"got {value}")
        mix[fault] = value
    mix.pop(Fault.NONE, None)
    total = sum(mix.values())
    if total > 1.0 + 1e-9:
        raise FaultSpecError(f"fault shares add up to {total:.4f}, more than all the feeds")
    return mix
