"""Overlay messages <-> datagram bytes, for transports that cross a socket.

Format: MessagePack (msgspec), one message per datagram, after a 4-byte magic ``FMO1``. A message is
an extension value whose code names its class (:data:`MESSAGE_TYPES`, in a fixed order) and whose
data is the MessagePack list of its fields; 128-bit ids travel as 16-byte big-endian extension
values (MessagePack integers stop at 64 bits). Nothing is unpickled: only the listed classes can
be built, and every field is checked against its annotation before the object exists, so a node's
state machine never sees a wrongly typed field.

:func:`decode` raises :class:`WireError` (what is wrong, never a library traceback) for anything
that is not exactly such a message; :func:`encode` raises it for a message over ``max_bytes``.

Datagrams repeat: a node sends the same keep-alive to each of its leaves every second, the same
heartbeat to each child, the same record to each child. :func:`encode_datagram` and
:func:`decode_datagram` therefore keep the last few thousand ``(sender, message)`` <-> bytes pairs
(messages are frozen, so a decoded one can be shared); a hit skips the MessagePack walk, never the
size limit. The caches are per process and bounded (emptied when full).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Hashable
from typing import Any

import msgspec

from feedmesh.errors import FeedmeshError
from feedmesh.mesh.overlay import messages, scribe
from feedmesh.mesh.overlay.ids import RING, Handle

__all__ = ["MAGIC", "MAX_DATAGRAM", "MESSAGE_TYPES", "WireError", "decode", "decode_datagram",
           "encode", "encode_datagram"]

MAGIC = b"FMO1"
MAX_DATAGRAM = 60_000          # under UDP's 65,507 bytes, with room to spare
CACHE_ENTRIES = 32_768         # per cache; a few keep-alive kinds per node of a 1,000-node overlay
CACHE_BYTES = 2_048            # larger datagrams (leaf sets, records) are cached too, up to this
_BIG_INT = 1
_FIRST_CLASS = 16

MESSAGE_TYPES: tuple[type, ...] = (
    Handle,
    messages.Route, messages.RouteAck, messages.JoinPayload, messages.StateRows,
    messages.JoinDone, messages.Announce, messages.LeafPing, messages.LeafRequest,
    messages.LeafReply, messages.RowRequest, messages.Leaving, messages.Probe, messages.Pong,
    scribe.Subscribe, scribe.Publish, scribe.JoinAck, scribe.Item, scribe.Redirect, scribe.Adopt,
    scribe.Heartbeat, scribe.Refresh, scribe.Unsubscribe, scribe.Recover, scribe.Rumour,
    scribe.Vouch,
)
_CODE = {cls: _FIRST_CLASS + i for i, cls in enumerate(MESSAGE_TYPES)}
_CLASS = {code: cls for cls, code in _CODE.items()}
_FIELDS: dict[type, list[tuple[str, Any]]] = {}


class WireError(FeedmeshError, ValueError):
    """A datagram that is not an overlay message (or a message too big to be one)."""


def _fields(cls: type) -> list[tuple[str, Any]]:
    known = _FIELDS.get(cls)
    if known is None:
        hints = typing.get_type_hints(cls, vars(messages) | vars(scribe) | {"Hashable": Hashable})
        known = _FIELDS[cls] = [(f.name, hints[f.name]) for f in dataclasses.fields(cls)]
    return known


# ---- encoding ---------------------------------------------------------------------------------
def _to_wire(value: Any) -> Any:
    kind = type(value)
    if kind is int:
        if -(1 << 63) <= value < (1 << 64):
            return value
        if 0 <= value < RING:
            return msgspec.msgpack.Ext(_BIG_INT, value.to_bytes(16, "big"))
        raise WireError(f"integer {value} is outside the 128-bit id space")
    if kind in (str, bytes, float, bool) or value is None:
        return value
    if kind is tuple or kind is list:
        return [_to_wire(item) for item in value]
    code = _CODE.get(kind)
    if code is None:
        raise WireError(f"{kind.__name__} is not an overlay message")
    fields = _fields(kind)
    values = [getattr(value, name) for name, _ in fields]
    defaults = _TRAILING_DEFAULTS.get(kind)
    if defaults is None:
        defaults = _TRAILING_DEFAULTS[kind] = _trailing_defaults(kind)
    first = len(fields) - len(defaults)   # the first of the trailing fields with a default
    while len(values) > first and values[-1] == defaults[len(values) - 1 - first]:
        values.pop()   # defaults at the end are left out: an older version decodes the rest
    data = _encoder.encode([_to_wire(v) for v in values])
    return msgspec.msgpack.Ext(code, data)


def _trailing_defaults(cls: type) -> tuple[Any, ...]:
    """The defaults of ``cls``'s last fields that have a plain default, in order."""
    out: list[Any] = []
    for f in reversed(dataclasses.fields(cls)):
        if f.default is dataclasses.MISSING:
            break
        out.append(f.default)
    return tuple(reversed(out))


_TRAILING_DEFAULTS: dict[type, tuple[Any, ...]] = {}


_encoder = msgspec.msgpack.Encoder()


def encode(message: Any, *, max_bytes: int = MAX_DATAGRAM) -> bytes:
    data = MAGIC + _encoder.encode(_to_wire(message))
    if len(data) > max_bytes:
        raise WireError(f"{type(message).__name__} encodes to {len(data)} bytes, over the "
                        f"{max_bytes}-byte datagram limit")
    return data


# ---- decoding ---------------------------------------------------------------------------------
def _ext_hook(code: int, data: memoryview) -> Any:
    if code == _BIG_INT:
        if len(data) != 16:
            raise WireError(f"a 128-bit id is 16 bytes, not {len(data)}")
        return int.from_bytes(data, "big")
    cls = _CLASS.get(code)
    if cls is None:
        raise WireError(f"unknown message code {code}")
    values = _decoder.decode(data)
    fields = _fields(cls)
    # a sender of an older version omits the fields added since, which have defaults
    if not isinstance(values, list) or not _required(cls) <= len(values) <= len(fields):
        raise WireError(f"{cls.__name__} has {len(fields)} fields, got "
                        f"{len(values) if isinstance(values, list) else type(values).__name__}")
    built = []
    for (name, hint), value in zip(fields[:len(values)], values, strict=True):
        value = _tuples(value)
        if not _fits(value, hint):
            raise WireError(f"{cls.__name__}.{name} should be {hint}, got {type(value).__name__}")
        built.append(value)
    return cls(*built)


_decoder = msgspec.msgpack.Decoder(ext_hook=_ext_hook)


def _required(cls: type) -> int:
    """How many of ``cls``'s fields have no default (they come first in a dataclass)."""
    known = _REQUIRED.get(cls)
    if known is None:
        known = _REQUIRED[cls] = sum(
            1 for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    return known


_REQUIRED: dict[type, int] = {}


def _tuples(value: Any) -> Any:
    if type(value) is list:
        return tuple(_tuples(item) for item in value)
    return value


def _fits(value: Any, hint: Any) -> bool:
    if hint is Any:
        return type(value) in _CODE or value is None or type(value) in (int, str, bytes)
    if hint is Hashable:   # a transport address: (host, port)
        return (type(value) is tuple and len(value) == 2 and type(value[0]) is str
                and type(value[1]) is int)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, option) for option in typing.get_args(hint))
    if origin is tuple:
        args = typing.get_args(hint)
        if type(value) is not tuple:
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(item, args[0]) for item in value)
        return len(args) == len(value) and all(map(_fits, value, args))
    if hint is type(None):
        return value is None
    if hint is float:
        return type(value) in (float, int)
    if hint is int:
        return type(value) is int
    return type(value) is hint


def decode(data: bytes) -> Any:
    """One message out of a datagram; :class:`WireError` says why when it is not one."""
    message = _decode_any(data)
    if type(message) not in _CODE or type(message) is Handle:
        raise WireError(f"the datagram holds a {type(message).__name__}, not a message")
    return message


# ---- datagrams: the sender's handle, then the message ------------------------------------------
_encoded: dict[tuple[Handle, Any], bytes] = {}
_decoded: dict[bytes, tuple[Handle, Any]] = {}


def encode_datagram(sender: Handle, message: Any, *, max_bytes: int = MAX_DATAGRAM) -> bytes:
    """What a transport sends: ``FMO1`` | [sender handle, message] (the simulator's envelope)."""
    try:
        key = (sender, message)
        data = _encoded.get(key)
    except TypeError:              # a field that cannot be hashed: encode it every time
        key, data = None, None
    if data is None:
        data = MAGIC + _encoder.encode([_to_wire(sender), _to_wire(message)])
        if key is not None and len(data) <= CACHE_BYTES:
            if len(_encoded) >= CACHE_ENTRIES:
                _encoded.clear()
            _encoded[key] = data
    if len(data) > max_bytes:
        raise WireError(f"{type(message).__name__} encodes to {len(data)} bytes, over the "
                        f"{max_bytes}-byte datagram limit")
    return data


def decode_datagram(data: bytes) -> tuple[Handle, Any]:
    """``(sender, message)`` out of a datagram; :class:`WireError` says why when it is not one."""
    known = _decoded.get(data)
    if known is not None:
        return known
    envelope = _decode_any(data)
    if (type(envelope) is not list or len(envelope) != 2 or type(envelope[0]) is not Handle
            or type(envelope[1]) not in _CODE or type(envelope[1]) is Handle):
        raise WireError("the datagram is not a [sender, message] envelope")
    decoded = envelope[0], envelope[1]
    if len(data) <= CACHE_BYTES:
        if len(_decoded) >= CACHE_ENTRIES:
            _decoded.clear()
        _decoded[bytes(data)] = decoded
    return decoded


def _decode_any(data: bytes) -> Any:
    if not data.startswith(MAGIC):
        raise WireError(f"no {MAGIC.decode()} magic ({len(data)} bytes)")
    try:
        return _decoder.decode(memoryview(data)[len(MAGIC):])
    except WireError:
        raise
    except (msgspec.DecodeError, TypeError, ValueError, OverflowError, RecursionError) as error:
        raise WireError(f"not MessagePack of a message: {error}") from error
