"""The FeedEx wire format: versioned msgspec Structs, msgpack on the wire, sizes capped.

Table 1 of the paper as messages (a call and its return are two messages; a transport over HTTP
carries the return as the response body)::

    GetNeighbors(want)            -> Neighbors(peers)            bootstrapping, 3.1 (tracker)
    Connect(subset)               -> ConnectReply(accepted, subset)
    UpdateSubset(added, removed)                                 incremental, periodic, 3.1
    Disconnect(reason)                                           a neighbour drops us, 3.2
    CheckDid(dids)                -> DidStatus(unseen)           3.4 (several dids per call)
    PutEntries(bundles)                                          3.4
    QueryFeed(qid, feed, ...)     -> QueryAnswer(qid, holders)   3.6, recursive
    Error(code, detail)                                          any refused call

Every message travels in an :class:`Envelope` with the protocol version and the sender's
*stated listening port*; the sender's host is never in the message: the transport takes it from
the connection, and the node's identity is (that host, the stated port). A claimed id is never
trusted, so there is none.

Errors: :class:`MessageError` (a ``ValueError``) for anything that is not a valid message of this
version within the caps; its text says what was wrong and where.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from feedmesh.errors import FeedmeshError

__all__ = ["MAX_MESSAGE_BYTES", "VERSION", "Address", "Bundle", "CheckDid", "Connect",
           "ConnectReply", "DidStatus", "Disconnect", "Entry", "Envelope", "Error",
           "GetNeighbors", "Holder", "Message", "MessageError", "Neighbors", "Plan", "PutEntries",
           "QueryAnswer", "QueryFeed", "UpdateSubset", "decode", "encode", "size_of"]

VERSION = 1
MAX_MESSAGE_BYTES = 1 << 20

Url = Annotated[str, Meta(min_length=1, max_length=2048)]
Text = Annotated[str, Meta(max_length=16_384)]
Host = Annotated[str, Meta(min_length=1, max_length=255)]
Port = Annotated[int, Meta(ge=1, le=65535)]
Address = tuple[Host, Port]
Hops = Annotated[int, Meta(ge=0, le=64)]
Did = Annotated[bytes, Meta(min_length=20, max_length=20)]
Subset = Annotated[dict[Url, Hops], Meta(max_length=10_000)]
FetchTimes = Annotated[dict[Url, float], Meta(max_length=10_000)]
RelayedTimes = Annotated[dict[Url, Annotated[list[float], Meta(max_length=64)]],
                        Meta(max_length=10_000)]


class Plan(msgspec.Struct, frozen=True, array_like=True):
    """One follower's fetch time of a feed, relayed with its origin: ``origin`` (the address its
    neighbour knows it by) fetches at ``at``; ``heard`` is when the first relay heard it from
    the origin itself, so of two copies of one origin's plan the later heard is the newer."""

    origin: Address
    at: float
    heard: float


Schedule = Annotated[dict[Url, Annotated[list[Plan], Meta(max_length=64)]],
                     Meta(max_length=10_000)]


class Entry(msgspec.Struct, frozen=True, array_like=True):
    """One entry of a feed: its key (the feed's guid/id, see ``feeds/identity.py``), when it was
    published (Unix seconds, None if the feed did not say) and what a reader shows."""

    key: Annotated[str, Meta(min_length=1, max_length=2048)]
    published: float | None = None
    title: Text = ""
    link: Annotated[str, Meta(max_length=2048)] = ""
    summary: Text = ""


class Bundle(msgspec.Struct, frozen=True):
    """The new entries of one fetch (3.4). ``did`` is the SHA-1 of the feed and its first entry
    keys and never changes on the way; ``path`` lists the forwarders, each added by its receiver."""

    did: Did
    feed: Url
    entries: Annotated[list[Entry], Meta(min_length=1, max_length=500)]
    path: Annotated[list[Address], Meta(max_length=64)] = []
    fetched_at: float = 0.0
    """When the origin fetched it (unchecked, informative: how old the news is on arrival)."""


class Holder(msgspec.Struct, frozen=True, array_like=True):
    """An answer to a query: ``address`` holds ``count`` entries of the feed, newest at
    ``newest``."""

    address: Address
    count: Annotated[int, Meta(ge=0)]
    newest: float | None = None


class GetNeighbors(msgspec.Struct, frozen=True, tag="get_neighbors"):
    want: Annotated[int, Meta(ge=0, le=1000)] = 20


class Neighbors(msgspec.Struct, frozen=True, tag="neighbors"):
    peers: Annotated[list[Address], Meta(max_length=1000)]


class Connect(msgspec.Struct, frozen=True, tag="connect"):
    """``neighbours``: how many the caller has (the paper's hint; a receiver does not act on it: a
    full node takes a newcomer on trial instead, so late joiners still find room, and only
    entries its own fetches confirmed let the newcomer displace a neighbour)."""

    subset: Subset
    fetch_times: FetchTimes = {}
    relayed_times: RelayedTimes = {}
    neighbours: Annotated[int, Meta(ge=0, le=1000)] = 0
    schedule: Schedule = {}


class ConnectReply(msgspec.Struct, frozen=True, tag="connect_reply"):
    """``accepted`` False (with an empty subset, as the paper) when the node refuses."""

    accepted: bool
    subset: Subset = {}
    reason: Annotated[str, Meta(max_length=200)] = ""
    fetch_times: FetchTimes = {}
    relayed_times: RelayedTimes = {}
    schedule: Schedule = {}


class UpdateSubset(msgspec.Struct, frozen=True, tag="update_subset"):
    """The change since the previous advertisement to this neighbour (new or changed hop counts,
    feeds no longer advertised) and of the fetch times. ``probe``: a keep-alive from a neighbour
    that heard nothing from us for a while; a neighbour answers it with an empty update (no probe:
    never answered), so two idle neighbours keep each other."""

    added: Subset = {}
    removed: Annotated[list[Url], Meta(max_length=10_000)] = []
    fetch_times: FetchTimes = {}
    relayed_times: RelayedTimes = {}
    probe: bool = False
    schedule: Schedule = {}


class Disconnect(msgspec.Struct, frozen=True, tag="disconnect"):
    reason: Annotated[str, Meta(max_length=200)] = ""


class CheckDid(msgspec.Struct, frozen=True, tag="check_did"):
    dids: Annotated[list[Did], Meta(min_length=1, max_length=64)]


class DidStatus(msgspec.Struct, frozen=True, tag="did_status"):
    unseen: Annotated[list[Did], Meta(max_length=64)]
    seen: Annotated[list[Did], Meta(max_length=64)] = []


class PutEntries(msgspec.Struct, frozen=True, tag="put_entries"):
    bundles: Annotated[list[Bundle], Meta(min_length=1, max_length=64)]


class QueryFeed(msgspec.Struct, frozen=True, tag="query_feed"):
    """Who holds entries of ``feed`` published in [since, until]? Relayed ``hops_left`` more
    hops."""

    qid: Annotated[bytes, Meta(min_length=8, max_length=32)]
    feed: Url
    since: float | None = None
    until: float | None = None
    hops_left: Annotated[int, Meta(ge=0, le=16)] = 0


class QueryAnswer(msgspec.Struct, frozen=True, tag="query_answer"):
    qid: Annotated[bytes, Meta(min_length=8, max_length=32)]
    holders: Annotated[list[Holder], Meta(max_length=1000)] = []


class Error(msgspec.Struct, frozen=True, tag="error"):
    code: Annotated[str, Meta(max_length=64)]
    detail: Annotated[str, Meta(max_length=500)] = ""


Message = (GetNeighbors | Neighbors | Connect | ConnectReply | UpdateSubset | Disconnect | CheckDid
           | DidStatus | PutEntries | QueryFeed | QueryAnswer | Error)


class Envelope(msgspec.Struct, frozen=True):
    v: int
    port: Port
    body: Message


class MessageError(FeedmeshError, ValueError):
    """Bytes that are not a FeedEx message of this version within its size caps."""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Envelope)


def encode(body: Message, port: int) -> bytes:
    """The wire bytes of ``body`` sent by a node listening on ``port``."""
    data = _encoder.encode(Envelope(VERSION, port, body))
    if len(data) > MAX_MESSAGE_BYTES:
        raise MessageError(f"{type(body).__name__} would be {len(data)} bytes, over the "
                           f"{MAX_MESSAGE_BYTES}-byte cap: send it in parts")
    return data


def decode(data: bytes) -> Envelope:
    """Parse and check wire bytes; :class:`MessageError` says what is wrong, never a traceback."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise MessageError(f"message of {len(data)} bytes is over the {MAX_MESSAGE_BYTES}-byte cap")
    try:
        envelope = _decoder.decode(data)
    except msgspec.ValidationError as error:
        raise MessageError(f"invalid FeedEx message: {error}") from error
    except msgspec.DecodeError as error:
        raise MessageError(f"not a msgpack FeedEx message: {error}") from error
    if envelope.v != VERSION:
        raise MessageError(f"protocol version {envelope.v} is not supported (this node speaks "
                           f"{VERSION})")
    return envelope


def size_of(body: Message) -> int:
    """Bytes ``body`` takes on the wire (the simulator counts traffic with it)."""
    return len(_encoder.encode(body)) + 4
