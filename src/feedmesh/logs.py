"""Structured logs: one line per event, ``key=value`` pairs with stable keys (logfmt).

Code logs an event name and keys, e.g. ``log.warning("fetch_failed feed=%s status=%s", ...)``;
the formatter adds ``ts=``, ``level=`` and ``logger=`` in front so every line can be grepped and
parsed the same way.
"""

from __future__ import annotations

import logging
import sys
import time

__all__ = ["LogfmtFormatter", "Throttled", "setup_logging"]


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = (f"ts={stamp}.{int(record.msecs):03d}Z level={record.levelname.lower()} "
                f"logger={record.name} event={record.getMessage()}")
        if record.exc_info:
            line += " exc=" + repr(self.formatException(record.exc_info))
        return line


class _MalformedRequests(logging.Filter):
    """aiohttp logs a request it cannot even parse (a NUL in a header, a broken request line) as
    an error with a traceback; it has already answered 400. That is a client's mistake or a
    probe: one warning line, the reason and no traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and type(error).__name__ in ("BadHttpMessage", "BadStatusLine",
                                                          "LineTooLong", "InvalidHeader"):
            reason = " ".join(str(error).split())[:300]
            record.msg, record.args = "malformed_request %s reason=%r", (record.getMessage(),
                                                                         reason)
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def setup_logging(level: str = "info", stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger("feedmesh")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    server = logging.getLogger("aiohttp.server")  # the web server's own errors, same format
    server.handlers[:] = [handler]
    server.filters[:] = [_MalformedRequests()]
    server.propagate = False


class Throttled:
    """Logs an event at most once every ``every_s`` seconds per key, adding to the next line
    it logs how many were held back (``suppressed=N``): a full disk fails every write, and one
    line a minute says so as well as a thousand."""

    def __init__(self, logger: logging.Logger, every_s: float = 60.0) -> None:
        self.logger = logger
        self.every_s = every_s
        self._last: dict[str, tuple[float, int]] = {}

    def log(self, level: int, key: str, message: str, *args: object) -> bool:
        """Log unless ``key`` was logged less than ``every_s`` ago; True when logged."""
        now = time.monotonic()
        last, held = self._last.get(key, (-float("inf"), 0))
        if now - last < self.every_s:
            self._last[key] = (last, held + 1)
            return False
        if held:
            message += " suppressed=%d"
            args = (*args, held)
        self.logger.log(level, message, *args)
        self._last[key] = (now, 0)
        return True
