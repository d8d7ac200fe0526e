"""The ``X-Hub-Signature`` header of WebSub content distribution (W3C WebSub section 8).

A hub that was given ``hub.secret`` signs each body it delivers: ``X-Hub-Signature: method=hex``,
an HMAC of the body's bytes with the secret, where method is one of sha1, sha256, sha384, sha512.
A subscriber that gave a secret drops any body whose signature is missing, of an unknown method,
or wrong (section 8: it must still answer 2xx, so a forger learns nothing).

Errors::

    SignatureError            the header cannot be checked or does not match (a ValueError)

``verify`` raises it with a message that says which; the caller logs it and drops the body.
"""
from __future__ import annotations

import hashlib
import hmac

from feedmesh.errors import FeedmeshError

__all__ = ["METHODS", "SignatureError", "sign", "verify"]

METHODS = ("sha1", "sha256", "sha384", "sha512")
# Longest secret the spec allows (section 5.1: "less than 200 bytes").
MAX_SECRET_BYTES = 199


class SignatureError(FeedmeshError, ValueError):
    """A delivered body's signature is missing, malformed, of an unknown method, or wrong."""


def _key(secret: str | bytes) -> bytes:
    key = secret.encode() if isinstance(secret, str) else secret
    if not key:
        raise SignatureError("the secret is empty")
    if len(key) > MAX_SECRET_BYTES:
        raise SignatureError(f"the secret is {len(key)} bytes; WebSub allows fewer than 200")
    return key


def sign(secret: str | bytes, body: bytes, method: str = "sha256") -> str:
    """The ``X-Hub-Signature`` value for ``body``: ``method=hexdigest``."""
    if method not in METHODS:
        raise SignatureError(f"unknown signature method {method!r}; "
                             f"expected one of {', '.join(METHODS)}")
    return f"{method}={hmac.new(_key(secret), body, method).hexdigest()}"


def verify(secret: str | bytes, body: bytes, header: str | None) -> str:
    """Check ``header`` against ``body``; return the method used, or raise ``SignatureError``."""
    if not header:
        raise SignatureError("no X-Hub-Signature header, but a secret was set for this "
                             "subscription")
    method, sep, digest = header.strip().partition("=")
    method = method.strip().lower()
    if not sep or not digest:
        raise SignatureError(f"X-Hub-Signature {header[:80]!r} is not of the form method=hex")
    if method not in METHODS:
        raise SignatureError(f"X-Hub-Signature method {method[:20]!r} is not one of "
                             f"{', '.join(METHODS)}")
    expected = hmac.new(_key(secret), body, method).hexdigest().encode()
    # bytes, not str: compare_digest refuses non-ASCII text (a TypeError, a 500 for the sender)
    given = digest.strip().lower().encode("utf-8", "surrogateescape")
    if not hmac.compare_digest(expected, given):
        raise SignatureError(f"X-Hub-Signature does not match the body ({method}, "
                             f"{len(body)} bytes)")
    return method


# hashlib names are what hmac.new accepts as digestmod; fail at import if one disappears.
for _name in METHODS:
    hashlib.new(_name)
