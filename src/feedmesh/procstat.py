"""Another process's CPU time and resident memory, read from Linux's /proc (None elsewhere, or
when the process is gone)."""

from __future__ import annotations

import os

__all__ = ["cpu_seconds", "rss_bytes"]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds process ``pid`` has used so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the name may hold spaces and ')'
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_bytes(pid: int) -> int | None:
    """Resident memory of process ``pid``."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
