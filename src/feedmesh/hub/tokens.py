"""Private feed URLs: a token that *is* an HMAC of the subscription it names.

The reflector checks a token without a lookup table (a million subscriptions cost no memory), and a
guessed token for another subscription fails the MAC. The key is the composition root's to give:
the embedded hub keeps it in a file of its own, 0600 (:mod:`feedmesh.store.key_file`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

__all__ = ["FeedTokens"]


class FeedTokens:
    """Private feed tokens that encrypt and authenticate ``(sub_id, generation)``.

    The token is ``base64url(tag || header XOR pad)`` with ``tag = HMAC(secret, "tag" || header)``
    (16 bytes) and ``pad = HMAC(secret, "pad" || tag)`` (a synthetic-IV construction): 128 bits
    of tag make a token unguessable, and the subscription id it carries is hidden, so a token
    reveals neither whose subscription it is nor how many exist. Generations let a person revoke
    a leaked URL. Checking one needs no table: two HMACs and a constant-time comparison.
    """

    _LAYOUT = struct.Struct(">QI")
    LENGTH = 38

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 32:
            raise ValueError("feed token secret must be at least 32 bytes")
        self._secret = secret

    def _prf(self, label: bytes, data: bytes) -> bytes:
        return hmac.new(self._secret, label + data, hashlib.sha256).digest()

    def make(self, sub_id: int, generation: int) -> str:
        header = self._LAYOUT.pack(sub_id, generation)
        tag = self._prf(b"tag", header)[:16]
        hidden = bytes(a ^ b for a, b in zip(header, self._prf(b"pad", tag), strict=False))
        return base64.urlsafe_b64encode(tag + hidden).decode().rstrip("=")

    def read(self, token: str) -> tuple[int, int] | None:
        """``(sub_id, generation)`` when the token is authentic and spelled exactly as issued,
        else None."""
        if len(token) != self.LENGTH or not token.isascii():
            return None
        try:
            raw = base64.urlsafe_b64decode(token + "==")
        except (ValueError, TypeError):
            return None
        if len(raw) != 28 or base64.urlsafe_b64encode(raw).decode().rstrip("=") != token:
            return None  # only the canonical spelling: no second URL for the same feed
        tag, hidden = raw[:16], raw[16:]
        header = bytes(a ^ b for a, b in zip(hidden, self._prf(b"pad", tag), strict=False))
        if not hmac.compare_digest(tag, self._prf(b"tag", header)[:16]):
            return None
        return self._LAYOUT.unpack(header)
