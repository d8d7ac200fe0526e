"""Structured logs: one line per event, ``key=value`` pairs with stable keys (logfmt).

Code logs an event name and keys, e.g. ``log.warning("fetch_failed feed=%s status=%s", ...)``;
the formatter adds ``ts=``, ``level=`` and ``logger=`` in front so every line can be grepped and
parsed the same way.
"""

from __future__ import annotations

import logging
import sys
import time

__all__ = ["LogfmtFormatter", "setup_logging"]


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = (f"ts={stamp}.{int(record.msecs):03d}Z level={record.levelname.lower()} "
                f"logger={record.name} event={record.getMessage()}")
        if record.exc_info:
            line += " exc=" + repr(self.formatException(record.exc_info))
        return line


def setup_logging(level: str = "info", stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger("feedmesh")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
