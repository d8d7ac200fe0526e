"""The wire of a reflector's internal API (``feedmesh reflector``): its paths, what its answers
decode to, and its limits, shared by the server (:mod:`feedmesh.hub.tiers.reflector_service`)
and the client the hub's other processes ask it with (:mod:`feedmesh.hub.reflector_client`).

::

    GET /reflector/v1/feeds/{sub_id}/{generation}   -> FeedVersion (404: not served here)
    POST /reflector/v1/versions  [[sub_id, generation], ...] -> [FeedVersion or nil, ...]
    GET /reflector/v1/feeds/{sub_id}/items          -> [ReflectedItem], newest first
    GET /reflector/v1/watermarks                    -> {filter shard: newest entry id stored}
    GET /reflector/v1/status                        -> ReflectorStatus

Bodies are MessagePack; every request carries ``Authorization: Bearer TOKEN`` when the
reflector has a token (:func:`bearer`).
"""

from __future__ import annotations

import msgspec

from feedmesh.store import ReflectedItem

__all__ = ["MAX_BATCH", "MAX_BODY_BYTES", "MSGPACK", "PREFIX", "TIMEOUT_S", "FeedVersion",
           "ReflectorStatus", "bearer", "decode_items", "decode_marks", "decode_pairs",
           "decode_status",
           "decode_version", "decode_versions", "pack"]

PREFIX = "/reflector/v1"
TIMEOUT_S = 5.0
"""A reflector slower than this to answer one feed's request is taken as unavailable."""
MAX_BODY_BYTES = 64 << 20
"""The largest answer a client reads: a feed that keeps 10,000 entries of a few KB each."""
MAX_BATCH = 4096
"""Most feeds' versions asked in one request (``POST /versions``)."""
MSGPACK = "application/msgpack"


class FeedVersion(msgspec.Struct, frozen=True):
    """What a private feed's validators are made of: its content version and when it changed."""

    version: int
    modified: float


class ReflectorStatus(msgspec.Struct, frozen=True, kw_only=True):
    number: int
    subscriptions: int
    memory_bytes: int
    applied_seq: int


def bearer(token: bytes) -> bytes:
    """The ``Authorization`` header's value that carries ``token``."""
    return b"Bearer " + token


pack = msgspec.msgpack.Encoder().encode
decode_version = msgspec.msgpack.Decoder(FeedVersion).decode
decode_versions = msgspec.msgpack.Decoder(list[FeedVersion | None]).decode
decode_pairs = msgspec.msgpack.Decoder(list[tuple[int, int]]).decode
decode_items = msgspec.msgpack.Decoder(list[ReflectedItem]).decode
decode_marks = msgspec.msgpack.Decoder(dict[int, int]).decode
decode_status = msgspec.msgpack.Decoder(ReflectorStatus).decode
