"""Every request the farm received, so that tests can assert on a client's politeness.

A record is opened when a request's head has been read (so a request the farm never answers, the
``timeout`` fault, is still seen) and completed when its response ends (status, bytes). Records
live in a bounded ring (``log_capacity``); sequence numbers keep counting, so a reader polls with
``since=<next>`` and learns from ``dropped`` whether it fell behind. Requests to the control
endpoints (``/_farm/...``) are not logged: they are the test talking to the farm, not the client
under test.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import msgspec

__all__ = ["FarmRequest", "RequestLog"]


class FarmRequest(msgspec.Struct, frozen=True):
    """One request as the farm saw it. ``status`` is 0 while (or if never) answered."""

    seq: int
    farm_time: float
    real_time: float
    feed: int | None
    host: str
    """The farm address the request arrived on."""
    path: str
    method: str
    status: int
    if_none_match: str
    if_modified_since: str
    a_im: str
    accept_encoding: str
    user_agent: str
    body_bytes: int
    """Body bytes sent (after content coding)."""
    bytes_sent: int
    """Everything sent for this response, head included."""
    fault: str
    duration_s: float
    client: str = ""
    """The address the request came from (a crawler playing its own site binds its own)."""


# Positions in a raw record (a list, so the server can fill it in cheaply).
SEQ, FARM_TIME, REAL_TIME, FEED, HOST, PATH, METHOD, STATUS = range(8)
INM, IMS, AIM, ACCEPT_ENCODING, USER_AGENT, BODY_BYTES, BYTES_SENT, FAULT, DURATION, CLIENT = \
    range(8, 18)


class RequestLog:
    """A bounded, append-only log of :class:`FarmRequest` with monotonically increasing ``seq``."""

    def __init__(self, capacity: int = 200_000) -> None:
        self._records: deque[list] = deque(maxlen=max(1, capacity))
        self.next_seq = 0

    def open(self, farm_time: float, real_time: float, feed: int | None, host: str, path: str,
             method: str, headers: dict[str, str], client: str = "") -> list:
        get = headers.get
        record = [self.next_seq, farm_time, real_time, feed, host, path, method, 0,
                  get("if-none-match", ""), get("if-modified-since", ""), get("a-im", ""),
                  get("accept-encoding", ""), get("user-agent", ""), 0, 0, "", 0.0, client]
        self.next_seq += 1
        self._records.append(record)
        return record

    @property
    def dropped(self) -> int:
        """How many of the oldest records the ring has let go."""
        return self.next_seq - len(self._records)

    def since(self, seq: int = 0, *, feed: int | None = None, host: str | None = None,
              limit: int | None = None) -> list[FarmRequest]:
        """Records with ``seq >= seq`` (optionally of one feed or host), oldest first."""
        first = self.next_seq - len(self._records)
        start = max(0, seq - first)
        out: list[FarmRequest] = []
        for index in range(start, len(self._records)):
            raw = self._records[index]
            if (feed is not None and raw[FEED] != feed) or (host is not None and raw[HOST] != host):
                continue
            out.append(FarmRequest(*raw))
            if limit is not None and len(out) >= limit:
                break
        return out

    def __iter__(self) -> Iterable[FarmRequest]:
        return iter(self.since(0))

    def __len__(self) -> int:
        return len(self._records)

    def count(self, *, feed: int | None = None, host: str | None = None,
              status: int | None = None) -> int:
        return sum(1 for r in self._records
                   if (feed is None or r[FEED] == feed) and (host is None or r[HOST] == host)
                   and (status is None or r[STATUS] == status))

    def clear(self) -> None:
        """Forget every record (sequence numbers keep counting)."""
        self._records.clear()
