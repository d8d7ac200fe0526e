"""Signed records: the unit a feed multicasts, in the spirit of Secure Scuttlebutt's per-author
logs.

Wire form (what travels, what is stored, what is hashed)::

    b"FMR1" | signature (64 bytes, Ed25519) | payload (RFC 8785 canonical JSON, UTF-8)

The signature covers the payload bytes exactly as they travel. A record is never re-serialized to be
checked: the receiver verifies the bytes it got, then parses them, and refuses a payload that is not
already canonical (so one record has one byte form, and its hash is stable). The payload::

    {"v": 1,
     "feed": "<base64 Ed25519 key that started the log: the feed's identity>",
     "url": "<canonical URL of the feed: the Scribe group>",
     "seq": 1, 2, 3 ...          (monotonic per feed, no gaps)
     "prev": "<hex SHA-256 of the previous record's wire bytes>" or null for seq 1,
     "key": "<base64 key that signed this record>",
     "type": "entry" | "rotate" | "revoke",
     "entry": {...}              (type entry: the feed entry as a JSON object)
     "new_key": "<base64>"       (type rotate: the key that signs from the next record on)
     "republication": true|false (signed by a republisher with its own log, not by the publisher)}

A rotation is announced in the log itself, signed by the old key; a revocation closes the log.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from feedmesh.mesh.records.canonical import canonical_bytes, is_canonical

__all__ = [
    "MAGIC", "RECORD_TYPES", "FeedWriter", "InvalidRecord", "Record", "encode_key", "open_record",
    "record_hash",
]

MAGIC = b"FMR1"
SIGNATURE_BYTES = 64
RECORD_TYPES = ("entry", "rotate", "revoke")
_FIELDS = {"v", "feed", "url", "seq", "prev", "key", "type", "republication"}


class InvalidRecord(ValueError):
    """A record was refused; ``reason`` is one stable word (counted by receivers)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def encode_key(key: VerifyKey | bytes) -> str:
    raw = bytes(key)
    return base64.b64encode(raw).decode("ascii")


def record_hash(wire: bytes) -> str:
    """The hash a successor names in ``prev``: SHA-256 of the whole wire record, signature
    included."""
    return hashlib.sha256(wire).hexdigest()


@dataclass(frozen=True, slots=True)
class Record:
    """A record whose signature held, with the exact bytes it came in."""

    wire: bytes
    feed: str
    url: str
    seq: int
    prev: str | None
    key: str
    type: str
    republication: bool
    entry: dict[str, Any] | None = field(default=None, compare=False)
    new_key: str | None = None

    @property
    def hash(self) -> str:
        return record_hash(self.wire)


def _decode_key(text: Any, what: str) -> VerifyKey:
    try:
        raw = base64.b64decode(text, validate=True)
        if len(raw) != 32:
            raise ValueError(f"{len(raw)} bytes, not 32")
        return VerifyKey(raw)
    except Exception as error:
        raise InvalidRecord("malformed", f"{what} is not a base64 Ed25519 key ({error})") from error


def open_record(wire: bytes) -> Record:
    """Check the signature over the payload bytes as received, then parse them.

    Raises :class:`InvalidRecord` with reason ``unsigned``, ``malformed``, ``not-canonical`` or
    ``bad-signature``. Whether the signing key is the *right* key is the log's decision."""
    if not isinstance(wire, bytes | bytearray):
        raise InvalidRecord("malformed", f"a record is bytes, not {type(wire).__name__}")
    wire = bytes(wire)
    if wire[:1] == b"{":
        raise InvalidRecord("unsigned", "bare JSON without the signed envelope")
    if len(wire) < len(MAGIC) + SIGNATURE_BYTES + 2 or not wire.startswith(MAGIC):
        raise InvalidRecord("malformed", f"not a {MAGIC.decode()} record ({len(wire)} bytes)")
    signature = wire[len(MAGIC):len(MAGIC) + SIGNATURE_BYTES]
    payload = wire[len(MAGIC) + SIGNATURE_BYTES:]
    if signature == bytes(SIGNATURE_BYTES):
        raise InvalidRecord("unsigned", "the signature is all zeroes")
    canonical, body = is_canonical(payload)
    if body is None or not isinstance(body, dict):
        raise InvalidRecord("malformed", "the payload is not a JSON object")
    if not canonical:
        raise InvalidRecord("not-canonical", "the payload is not in RFC 8785 form")
    missing = _FIELDS - body.keys()
    if missing:
        raise InvalidRecord("malformed", f"fields missing: {', '.join(sorted(missing))}")
    signer = _decode_key(body["key"], "key")
    try:
        signer.verify(payload, signature)
    except BadSignatureError as error:
        raise InvalidRecord("bad-signature", "the signature does not match the payload") from error
    return _parse(wire, body)


def _parse(wire: bytes, body: dict[str, Any]) -> Record:
    seq, prev, kind = body["seq"], body["prev"], body["type"]
    if body["v"] != 1:
        raise InvalidRecord("malformed", f"version {body['v']!r} is not 1")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise InvalidRecord("malformed", f"seq {seq!r} is not a positive integer")
    if not ((prev is None and seq == 1)
            or (isinstance(prev, str) and len(prev) == 64 and seq > 1)):
        raise InvalidRecord("malformed", f"prev {prev!r} does not fit seq {seq}")
    if kind not in RECORD_TYPES:
        raise InvalidRecord("malformed", f"type {kind!r} is not one of {RECORD_TYPES}")
    if not isinstance(body["url"], str) or not isinstance(body["republication"], bool):
        raise InvalidRecord("malformed", "url must be a string and republication a boolean")
    _decode_key(body["feed"], "feed")
    entry = body.get("entry")
    if kind == "entry" and not isinstance(entry, dict):
        raise InvalidRecord("malformed", "an entry record carries an object in 'entry'")
    new_key = body.get("new_key")
    if kind == "rotate":
        _decode_key(new_key, "new_key")
    return Record(wire=wire, feed=body["feed"], url=body["url"], seq=seq, prev=prev,
                  key=body["key"], type=kind, republication=body["republication"],
                  entry=entry, new_key=new_key)


class FeedWriter:
    """The publisher's (or republisher's) side of one log: it numbers, chains and signs.

    Pure apart from holding the signing key: no clock, no I/O. ``head`` (seq, hash) lets a
    publisher resume a log it keeps elsewhere."""

    def __init__(self, signing_key: SigningKey, url: str, *, republication: bool = False,
                 feed: str | None = None, head: tuple[int, str | None] = (0, None)) -> None:
        self._key = signing_key
        self.url = url
        self.republication = republication
        self.feed = feed or encode_key(signing_key.verify_key)
        self.seq, self.prev = head
        self.revoked = False

    @property
    def key(self) -> str:
        return encode_key(self._key.verify_key)

    def append(self, entry: dict[str, Any]) -> bytes:
        if not isinstance(entry, dict):
            raise TypeError(f"an entry is a JSON object (dict), not {type(entry).__name__}")
        return self._sign("entry", {"entry": entry})

    def rotate(self, new_key: SigningKey) -> bytes:
        """Announce ``new_key`` in a record signed by the current key, then sign with the new
        one."""
        wire = self._sign("rotate", {"new_key": encode_key(new_key.verify_key)})
        self._key = new_key
        return wire

    def revoke(self) -> bytes:
        """Close the log: the current key signs that it signs nothing more."""
        wire = self._sign("revoke", {})
        self.revoked = True
        return wire

    def _sign(self, kind: str, extra: dict[str, Any]) -> bytes:
        if self.revoked:
            raise ValueError(f"the log of {self.url} is revoked: nothing more can be signed")
        body = {"v": 1, "feed": self.feed, "url": self.url, "seq": self.seq + 1,
                "prev": self.prev, "key": self.key, "type": kind,
                "republication": self.republication, **extra}
        payload = canonical_bytes(body)
        wire = MAGIC + self._key.sign(payload).signature + payload
        self.seq, self.prev = self.seq + 1, record_hash(wire)
        return wire
