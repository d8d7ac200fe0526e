"""What a WebSub hub accepts (W3C WebSub sections 5.1-5.3): a subscription request's fields,
validated; the lease the hub grants; the verification of intent it sends back to the callback.

A request is form-encoded (``hub.mode``, ``hub.topic``, ``hub.callback``, optional
``hub.lease_seconds`` and ``hub.secret``); parameters the hub does not know are ignored
(websub.rocks hub test 102). The lease asked for is clamped into the hub's bounds (section 5.1: the
hub decides; section 5.3 tells the subscriber which). Whether the topic is one of the hub's feeds is
the caller's to decide: this module knows nothing of feeds.

Errors::

    HubRequestError    a field is missing or malformed (a ValueError naming the field)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec

from feedmesh.errors import FeedmeshError
from feedmesh.websub.signature import MAX_SECRET_BYTES

__all__ = [
    "HubRequest",
    "HubRequestError",
    "LeaseBounds",
    "challenge_echoed",
    "check_push_url",
    "denial_url",
    "parse_hub_request",
    "read_form",
    "verification_url",
]

MAX_URL_CHARS = 2000
MAX_FORM_FIELDS = 50
MODES = ("subscribe", "unsubscribe")


class HubRequestError(FeedmeshError, ValueError):
    """A subscription request the hub refuses: which field, and why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class LeaseBounds(msgspec.Struct, frozen=True, kw_only=True):
    """The leases a hub grants, in seconds: what a request without ``hub.lease_seconds`` gets,
    and the least and most any request gets."""

    default_s: int = 10 * 86400
    min_s: int = 300
    max_s: int = 30 * 86400

    def __post_init__(self) -> None:
        if not 1 <= self.min_s <= self.default_s <= self.max_s:
            raise ValueError(f"LeaseBounds: need 1 <= min_s ({self.min_s}) <= default_s "
                             f"({self.default_s}) <= max_s ({self.max_s})")

    def grant(self, asked: int | None) -> int:
        """The lease given for one asked for (None: not asked), clamped into the bounds."""
        if asked is None:
            return self.default_s
        return max(self.min_s, min(self.max_s, asked))


class HubRequest(msgspec.Struct, frozen=True, kw_only=True):
    mode: str
    """``subscribe`` or ``unsubscribe``."""
    topic: str
    callback: str
    lease_seconds: int
    """As granted (clamped into the hub's bounds), not as asked."""
    secret: str = ""
    """Empty: deliveries are not signed."""


def read_form(body: bytes) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body as a mapping (the first value of a name
    given twice); raises :class:`HubRequestError` when it is not UTF-8 or has too many fields."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HubRequestError("body", f"not UTF-8 at byte {exc.start}") from exc
    try:
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS,
                          errors="strict")
    except (ValueError, UnicodeDecodeError) as exc:
        raise HubRequestError("body", f"not a form of at most {MAX_FORM_FIELDS} fields "
                              f"({exc})") from exc
    form: dict[str, str] = {}
    for name, value in pairs:
        form.setdefault(name, value)
    return form


def check_push_url(url: str, field: str) -> str:
    """``url`` when it is an absolute http(s) URL a hub may send to (no credentials, no
    fragment, a host, at most 2,000 characters); else :class:`HubRequestError`. Where the host
    points is the address guard's to judge, at connection time."""
    if not url:
        raise HubRequestError(field, "is required")
    if len(url) > MAX_URL_CHARS:
        raise HubRequestError(field, f"is {len(url)} characters long; at most {MAX_URL_CHARS}")
    if any(ord(c) <= 32 or ord(c) == 127 for c in url):
        raise HubRequestError(field, "contains spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise HubRequestError(field, f"is not a URL: {exc}") from exc
    if parts.scheme.lower() not in ("http", "https"):
        raise HubRequestError(field, f"must be an http:// or https:// URL, not "
                              f"{(parts.scheme or 'relative')[:20]!r}")
    if not parts.hostname:
        raise HubRequestError(field, "has no host")
    if parts.username is not None or parts.password is not None:
        raise HubRequestError(field, "must not carry a user name or password")
    if parts.fragment:
        raise HubRequestError(field, "must not have a #fragment")
    if port == 0:
        raise HubRequestError(field, "has port 0")
    return url


def parse_hub_request(form: Mapping[str, str], bounds: LeaseBounds) -> HubRequest:
    """The request a form holds, validated (unknown fields ignored); the lease clamped."""
    mode = form.get("hub.mode", "")
    if mode not in MODES:
        raise HubRequestError("hub.mode", f"must be subscribe or unsubscribe, not "
                              f"{mode[:30]!r}" if mode else "is required (subscribe or "
                              "unsubscribe)")
    callback = check_push_url(form.get("hub.callback", ""), "hub.callback")
    topic = form.get("hub.topic", "")
    if not topic:
        raise HubRequestError("hub.topic", "is required: the URL of the feed to subscribe to")
    if len(topic) > MAX_URL_CHARS:
        raise HubRequestError("hub.topic", f"is {len(topic)} characters long; at most "
                              f"{MAX_URL_CHARS}")
    raw_lease = form.get("hub.lease_seconds", "").strip()
    asked: int | None = None
    if raw_lease:
        if not (raw_lease.isascii() and raw_lease.isdigit()) or len(raw_lease) > 12:
            raise HubRequestError("hub.lease_seconds", f"must be a whole number of seconds, "
                                  f"not {raw_lease[:20]!r}")
        asked = int(raw_lease)
    secret = form.get("hub.secret", "")
    if len(secret.encode()) > MAX_SECRET_BYTES:
        raise HubRequestError("hub.secret", f"is {len(secret.encode())} bytes; WebSub allows "
                              "fewer than 200")
    return HubRequest(mode=mode, topic=topic, callback=callback,
                      lease_seconds=bounds.grant(asked) if mode == "subscribe" else 0,
                      secret=secret if mode == "subscribe" else "")


def verification_url(request: HubRequest, challenge: str) -> str:
    """The callback URL with the verification of intent's parameters (section 5.3) added to
    whatever query it already has."""
    params: Sequence[tuple[str, str]] = [("hub.mode", request.mode),
                                         ("hub.topic", request.topic),
                                         ("hub.challenge", challenge)]
    if request.mode == "subscribe":
        params = [*params, ("hub.lease_seconds", str(request.lease_seconds))]
    return _with_params(request.callback, params)


def denial_url(callback: str, topic: str, reason: str) -> str:
    """The GET that tells a callback its subscription to ``topic`` is denied (section 5.2),
    including one the hub cancels after it was granted; ``reason`` says why (at most 200
    characters are sent)."""
    return _with_params(callback, [("hub.mode", "denied"), ("hub.topic", topic),
                                   ("hub.reason", reason[:200])])


def _with_params(callback: str, params: Sequence[tuple[str, str]]) -> str:
    """``callback`` with ``params`` added to whatever query it already has."""
    parts = urlsplit(callback)
    query = "&".join(q for q in (parts.query, urlencode(params)) if q)
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", query, ""))


def challenge_echoed(status: int, body: bytes, challenge: str) -> bool:
    """Whether the callback confirmed: a 2xx whose body is exactly the challenge (section 5.3:
    otherwise the hub must not act on the request)."""
    return 200 <= status < 300 and body.strip() == challenge.encode()
