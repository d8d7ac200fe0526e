"""Key rotation statements: a key retires itself, out of band of the logs.

``feedmesh keys rotate`` signs, with the retiring key, a statement naming its successor (and
``revoke`` one naming none); the keyring keeps them and a feed's ``<subscribe>`` element carries
them (``<fm:rotation>``), so a subscriber that bootstraps after a rotation, or skipped the
``rotate`` record in a gap, learns the current key without the log from seq 1. Statement wire
form: base64 of ``signature (64 bytes) | RFC 8785 JSON {"v", "type", "feed", "old", "new", "at"}``,
signed by ``old``.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from feedmesh.mesh.records.canonical import canonical_bytes

__all__ = ["Announcement", "KeySuccession", "key_succession", "sign_statement",
           "verify_announcement"]


@dataclass(frozen=True, slots=True)
class Announcement:
    type: str          # rotate | revoke
    old: str
    new: str | None
    at: float
    feed: str = ""


def sign_statement(key: SigningKey, body: dict[str, Any]) -> str:
    payload = canonical_bytes(body)
    return base64.b64encode(key.sign(payload).signature + payload).decode("ascii")


def verify_announcement(text: str) -> Announcement:
    """Check an announcement's signature by the key it retires; ValueError says why not."""
    try:
        raw = base64.b64decode(text, validate=True)
        signature, payload = raw[:64], raw[64:]
        body = json.loads(payload)
        VerifyKey(base64.b64decode(body["old"])).verify(payload, signature)
        if body["type"] not in ("rotate", "revoke"):
            raise ValueError(f"type {body['type']!r} is neither rotate nor revoke")
        return Announcement(body["type"], body["old"], body.get("new"), float(body["at"]),
                            body.get("feed", ""))
    except BadSignatureError as error:
        raise ValueError("the announcement's signature does not match") from error
    except (binascii.Error, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"the announcement is malformed ({error})") from error


@dataclass(frozen=True, slots=True)
class KeySuccession:
    keys: tuple[str, ...]      # the identity key first, the current key last
    revoked: bool = False      # the last key revoked itself


def key_succession(identity: str, statements: list[str] | tuple[str, ...]) -> KeySuccession:
    """The keys of ``identity``'s log in order, from its rotation statements: each must be signed
    by the key before it (starting with the identity) and name that identity. ValueError says
    which statement breaks the chain and why."""
    keys = [identity]
    for index, text in enumerate(statements):
        try:
            note = verify_announcement(text)
        except ValueError as error:
            raise ValueError(f"rotation {index + 1}: {error}") from error
        if note.feed and note.feed != identity:
            raise ValueError(f"rotation {index + 1} belongs to another feed ({note.feed[:8]})")
        if note.old != keys[-1]:
            raise ValueError(f"rotation {index + 1} retires {note.old[:8]}, the chain is at "
                             f"{keys[-1][:8]}")
        if note.type == "revoke":
            if index != len(statements) - 1:
                raise ValueError(f"rotation {index + 1} revokes the key, yet more follow")
            return KeySuccession(tuple(keys), revoked=True)
        if not note.new or note.new in keys:
            raise ValueError(f"rotation {index + 1} names no new key, or one used before")
        keys.append(note.new)
    return KeySuccession(tuple(keys))
