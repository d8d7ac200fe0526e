"""Posting traces: which feed posted when, read from CSV and checked line by line.

A trace CSV has a header with ``feed_id`` and one timestamp column, ``published_utc`` or
``first_seen_utc`` (ISO 8601; a time without offset is taken as UTC). Optional columns: a host
(``host``, or ``feed_site`` / ``feed_url`` from which the host is taken) for per-host politeness,
``entry_id`` and ``title``. Any other column is an error (it is usually a misspelt required one)
unless ``allow_extra_columns``.

Row order: the file must be either grouped by feed (each feed's rows together, in any time order
within the group, as a per-feed dump lists them) or sorted by time (a crawl log). A file that is
neither is reported at the first line that breaks both, because such files are usually several
exports concatenated or a sort gone wrong; ``sort_rows`` accepts any order instead.
"""

from __future__ import annotations

import csv
import math
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import msgspec
import numpy as np

from .errors import TraceError

__all__ = ["KNOWN_COLUMNS", "Trace", "load_trace", "write_trace"]

TIME_COLUMNS = ("published_utc", "first_seen_utc")
HOST_COLUMNS = ("host", "feed_site", "feed_url")
KNOWN_COLUMNS = ("feed_id", *TIME_COLUMNS, *HOST_COLUMNS, "entry_id", "title")


class Trace(msgspec.Struct, frozen=True):
    """Per-feed sorted posting times (epoch seconds), with hosts."""

    feed_ids: list[str]
    hosts: list[str]
    times: list[np.ndarray]
    source: str = ""

    @property
    def posting_count(self) -> int:
        return int(sum(len(t) for t in self.times))

    @property
    def first_time(self) -> float:
        return min((float(t[0]) for t in self.times if len(t)), default=0.0)

    @property
    def last_time(self) -> float:
        return max((float(t[-1]) for t in self.times if len(t)), default=0.0)


def _parse_time(text: str, path: str, line: int, column: str) -> float:
    value = text.strip()
    if not value:
        raise TraceError(f"empty {column}", path=path, line=line)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as error:
        raise TraceError(f"{column} {value!r} is not an ISO 8601 time ({error})",
                         path=path, line=line) from error
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    stamp = parsed.timestamp()
    if not math.isfinite(stamp):
        raise TraceError(f"{column} {value!r} is out of range", path=path, line=line)
    return stamp


def _host_of(value: str) -> str:
    value = value.strip()
    if "//" in value:
        return urlsplit(value).hostname or value
    return value


def load_trace(path: str | Path, *, sort_rows: bool = False,
               allow_extra_columns: bool = False) -> Trace:
    """Read and check a trace CSV. Raises :class:`TraceError` naming the file and line."""
    name = str(path)
    try:
        handle = open(path, newline="", encoding="utf-8")  # noqa: SIM115 (with below)
    except OSError as error:
        raise TraceError(f"cannot open trace: {error.strerror or error}", path=name) from error
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise TraceError("the file is empty; expected a header with feed_id and "
                             "published_utc or first_seen_utc", path=name, line=1) from None
        except (csv.Error, UnicodeDecodeError) as error:
            raise TraceError(f"unreadable header: {error}", path=name, line=1) from error
        columns = [c.strip() for c in header]
        unknown = [c for c in columns if c not in KNOWN_COLUMNS]
        if unknown and not allow_extra_columns:
            raise TraceError(
                f"unknown column(s) {', '.join(map(repr, unknown))}; known columns are "
                f"{', '.join(KNOWN_COLUMNS)} (pass allow_extra_columns / --allow-extra-columns "
                "to ignore others)", path=name, line=1)
        if "feed_id" not in columns:
            raise TraceError("no feed_id column in the header", path=name, line=1)
        time_column = next((c for c in TIME_COLUMNS if c in columns), None)
        if time_column is None:
            raise TraceError("no timestamp column: expected published_utc or first_seen_utc",
                             path=name, line=1)
        feed_index = columns.index("feed_id")
        time_index = columns.index(time_column)
        host_column = next((c for c in HOST_COLUMNS if c in columns), None)
        host_index = columns.index(host_column) if host_column else None
        width = len(columns)

        order: dict[str, int] = {}
        hosts: list[str] = []
        times: list[list[float]] = []
        first_line: list[int] = []
        grouped = time_sorted = True
        previous_feed = ""
        previous_stamp = -math.inf
        previous_text = ""
        line = 1
        try:
            for row in reader:
                line = reader.line_num
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                if len(row) != width:
                    raise TraceError(f"expected {width} fields, found {len(row)}", path=name,
                                     line=line)
                feed = row[feed_index].strip()
                if not feed:
                    raise TraceError("empty feed_id", path=name, line=line)
                stamp = _parse_time(row[time_index], name, line, time_column)
                index = order.get(feed)
                if index is None:
                    index = order[feed] = len(hosts)
                    host = _host_of(row[host_index]) if host_index is not None else ""
                    hosts.append(host or feed)
                    times.append([])
                    first_line.append(line)
                elif feed != previous_feed and grouped:
                    grouped = False
                    regrouped_at = (feed, first_line[index])
                if stamp < previous_stamp and time_sorted:
                    time_sorted = False
                    unsorted_at = (row[time_index].strip(), previous_text)
                if not (grouped or time_sorted) and not sort_rows:
                    again, first = regrouped_at
                    now_text, before_text = unsorted_at
                    raise TraceError(
                        "rows are neither grouped by feed nor sorted by time: feed "
                        f"{again!r} (first seen on line {first}) comes back after other feeds, "
                        f"and {now_text} is earlier than {before_text} on an earlier line "
                        "(pass sort_rows / --sort-rows to accept any order)",
                        path=name, line=line)
                times[index].append(stamp)
                previous_feed, previous_stamp = feed, stamp
                previous_text = row[time_index].strip()
        except csv.Error as error:
            raise TraceError(f"malformed CSV: {error}", path=name, line=line) from error
        except UnicodeDecodeError as error:
            raise TraceError(f"not UTF-8: {error}", path=name, line=line + 1) from error
    if not hosts:
        raise TraceError("the trace has a header but no rows", path=name, line=2)
    arrays = [np.sort(np.asarray(series, dtype=np.float64)) for series in times]
    return Trace(feed_ids=list(order), hosts=hosts, times=arrays, source=name)


def write_trace(trace: Trace, path: str | Path) -> None:
    """Write ``trace`` as a CSV that :func:`load_trace` reads back (grouped by feed)."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["feed_id", "host", "published_utc"])
        for feed_id, host, series in zip(trace.feed_ids, trace.hosts, trace.times, strict=True):
            stamps = np.datetime_as_string((series * 1e3).astype("datetime64[ms]"), unit="ms")
            for stamp in stamps:
                writer.writerow([feed_id, host, f"{stamp}Z"])
