"""Private feed URLs: a token that *is* an HMAC of the subscription it names.

The reflector checks a token without a lookup table (a million subscriptions cost no memory), and a
guessed token for another subscription fails the MAC. The key is the composition root's to give:
the embedded hub keeps it in a file of its own, 0600 (:mod:`feedmesh.store.key_file`), a
distributed one in its PostgreSQL database.

Keys rotate (``feedmesh url-key rotate``): new URLs are made with the new key while the URLs made
with the one before keep working until it is retired (``feedmesh url-key retire``). Every process
that checks tokens reads the keys again when a token fails all the keys it holds (a URL made by a
process that already knows the new key), at most every ``recheck_s``, and in any case every
``refresh_s``: a rotation or a retirement reaches running processes by itself.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from feedmesh.store.ports import StoreError

__all__ = ["FeedTokens", "key_fingerprint", "token_of_feed_url"]

log = logging.getLogger(__name__)

TOKENS_CACHED = 1 << 15
"""Tokens kept made, and kept read (each map emptied when full): ~250 bytes an entry, so
about 16 MB at most for the two."""


def token_of_feed_url(url: str) -> str:
    """The token of a private feed URL (``.../f/<token>.<ext>``), "" when it is not one."""
    _, found, name = url.rpartition("/f/")
    token = name.partition(".")[0]
    return token if found and "/" not in name else ""


def key_fingerprint(key: bytes) -> str:
    """A short name for a key that reveals nothing of it (for logs and ``url-key show``)."""
    return hashlib.sha256(b"feedmesh feed-url key" + key).hexdigest()[:16]


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

    def __init__(self, secret: bytes, older: Sequence[bytes] = (), *,
                 load: Callable[[], Sequence[bytes]] | None = None,
                 clock: Callable[[], float] = time.monotonic, recheck_s: float = 5.0,
                 refresh_s: float = 60.0) -> None:
        """``secret`` makes tokens; it and each of ``older`` (keys rotated out but not retired)
        read them. ``load()``, when given, returns the keys as they are now, current first
        (it may block briefly: a file or a database read)."""
        self._keys = self._checked([secret, *older])
        self._load = load
        self._clock = clock
        self.recheck_s = recheck_s
        """A token no key held reads makes the keys read again, at most this often."""
        self.refresh_s = refresh_s
        """The keys are read again this often anyway (a retired key stops reading in time)."""
        self._loaded_at = clock()
        self._rechecked_at = -float("inf")
        self._error = ""
        self._lock = threading.Lock()
        self._cached_for: tuple[bytes, ...] = ()
        self._made: dict[tuple[int, int], str] = {}
        self._known: dict[str, tuple[int, int]] = {}
        self.changes = 0
        """How many times the keys read again differed from those held (a process that acts
        on every URL it holds, like the WebSub delivery workers, checks them again then)."""

    @classmethod
    def loaded_later(cls, load: Callable[[], Sequence[bytes]], **options: Any) -> FeedTokens:
        """Tokens whose keys are read at first use, for a process that may start before the
        hub has made a key (a reflector starts before its crawler): until ``load()`` succeeds
        it holds none (:attr:`has_keys`), reads no token and makes none."""
        tokens = cls(b"\0" * 32, load=load, **options)
        tokens._keys = ()
        tokens._loaded_at = -float("inf")
        return tokens

    @property
    def has_keys(self) -> bool:
        return bool(self._keys)

    @staticmethod
    def _checked(keys: Sequence[bytes]) -> tuple[bytes, ...]:
        if not keys:
            raise ValueError("feed tokens need a key")
        for key in keys:
            if len(key) < 32:
                raise ValueError("feed token secret must be at least 32 bytes")
        return tuple(keys)

    @property
    def fingerprints(self) -> list[str]:
        """The keys held, current first, by fingerprint."""
        return [key_fingerprint(k) for k in self._keys]

    def _reload(self, *, recheck: bool = False) -> bool:
        """Read the keys again if the last read is over ``refresh_s`` old (``recheck``: if the
        last recheck is over ``recheck_s`` old); whether they changed."""
        if self._load is None or not self._due(self._clock(), recheck):
            return False
        with self._lock:
            now = self._clock()
            if not self._due(now, recheck):
                return False
            self._loaded_at = self._rechecked_at = now  # (not at start: see read)
            try:
                keys = self._checked(list(self._load()))
            except (StoreError, ValueError) as exc:  # keep the keys held; try again later
                if str(exc) != self._error:  # once, not every minute
                    log.warning("feed_url_keys_not_read error=%s", exc)
                self._error = str(exc)
                return False
            self._error = ""
            changed = keys != self._keys
            if changed:
                self.changes += 1
                log.info("feed_url_keys_changed keys=%s",
                         ",".join(key_fingerprint(k) for k in keys))
                self._keys = keys  # (only then: the tokens cached under the old ones go)
            return changed

    def _due(self, now: float, recheck: bool) -> bool:
        if recheck:
            return now - self._rechecked_at >= self.recheck_s
        return now - self._loaded_at >= self.refresh_s

    def refresh(self) -> bool:
        """Read the keys again if the last read is over ``refresh_s`` old; whether they
        changed (for a process that makes and reads no URL itself)."""
        return self._reload()

    @staticmethod
    def _prf(key: bytes, label: bytes, data: bytes) -> bytes:
        return hmac.new(key, label + data, hashlib.sha256).digest()

    def _cache(self) -> tuple[dict[tuple[int, int], str], dict[str, tuple[int, int]]]:
        """The tokens made and read under the keys held now (a new set of keys, after a
        rotation or a retirement, starts empty ones): every poll of a private feed reads its
        token and makes the current one: three HMACs, 10-19% of the serving process's samples at
        case (b) (docs/measurements.md)."""
        if self._cached_for is not self._keys:
            self._made, self._known = {}, {}
            self._cached_for = self._keys
        return self._made, self._known

    def make(self, sub_id: int, generation: int) -> str:
        self._reload()
        if not self._keys:
            raise StoreError("no key for private feed URLs could be read yet")
        made, _ = self._cache()
        token = made.get((sub_id, generation))
        if token is not None:
            return token
        key = self._keys[0]
        header = self._LAYOUT.pack(sub_id, generation)
        tag = self._prf(key, b"tag", header)[:16]
        hidden = bytes(a ^ b for a, b in zip(header, self._prf(key, b"pad", tag), strict=False))
        token = base64.urlsafe_b64encode(tag + hidden).decode().rstrip("=")
        if len(made) >= TOKENS_CACHED:
            made.clear()
        made[(sub_id, generation)] = token
        return token

    def reads_url(self, url: str) -> bool:
        """Whether ``url`` is a private feed URL (``.../f/<token>.<ext>``) a key signed."""
        return self.read(token_of_feed_url(url)) is not None

    def read(self, token: str) -> tuple[int, int] | None:
        """``(sub_id, generation)`` when the token is authentic (under the current key or one
        rotated out but not retired) and spelled exactly as issued, else None."""
        if len(token) != self.LENGTH or not token.isascii():
            return None
        self._reload()
        # Taken once: a token read under keys changed meanwhile goes to a set no one uses.
        _, known = self._cache()
        found = known.get(token)
        if found is not None:
            return found
        try:
            raw = base64.urlsafe_b64decode(token + "==")
        except (ValueError, TypeError):
            return None
        if len(raw) != 28 or base64.urlsafe_b64encode(raw).decode().rstrip("=") != token:
            return None  # only the canonical spelling: no second URL for the same feed
        found = self._read(raw)
        if found is None and self._reload(recheck=True):
            found = self._read(raw)  # made by a process that knew a newer key first
        if found is not None:  # only authentic tokens: forgeries cannot fill it
            if len(known) >= TOKENS_CACHED:
                known.clear()
            known[token] = found
        return found

    def sign(self, data: bytes) -> str:
        """A short MAC of ``data`` under the current key (16 hex digits, 64 bits): for the
        boundaries in archive page URLs, which only the hub may mint."""
        self._reload()
        if not self._keys:
            raise StoreError("no key for private feed URLs could be read yet")
        return self._prf(self._keys[0], b"mac", data)[:8].hex()

    def verify(self, data: bytes, tag: str) -> bool:
        """Whether ``tag`` is :meth:`sign`'s of ``data`` under a key held (current or rotated
        out but not retired), compared in constant time."""
        if len(tag) != 16 or not tag.isascii():
            return False
        self._reload()
        return any(hmac.compare_digest(tag, self._prf(key, b"mac", data)[:8].hex())
                   for key in self._keys)

    def _read(self, raw: bytes) -> tuple[int, int] | None:
        tag, hidden = raw[:16], raw[16:]
        for key in self._keys:
            header = bytes(a ^ b for a, b in zip(hidden, self._prf(key, b"pad", tag),
                                                 strict=False))
            if hmac.compare_digest(tag, self._prf(key, b"tag", header)[:16]):
                return self._LAYOUT.unpack(header)
        return None
