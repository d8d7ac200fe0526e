"""Giving memory back to the operating system after a burst of short-lived allocations.

Parsing a 100,000-feed OPML list or building start-up tables allocates hundreds of MB that are
freed at once; glibc keeps such freed memory in its heap, so the process's resident size stays
high for ever. ``malloc_trim`` returns the free pages (measured: 491 -> 274 MB after importing
100,000 feeds). Elsewhere (musl, macOS) this is a no-op.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc

__all__ = ["release_memory"]

_libc = None
try:
    _name = ctypes.util.find_library("c")
    if _name:
        _libc = ctypes.CDLL(_name)
        _libc.malloc_trim.argtypes = [ctypes.c_size_t]
except (OSError, AttributeError):  # not glibc
    _libc = None


def release_memory() -> None:
    """Collect garbage, then hand free heap pages back to the OS (glibc only)."""
    gc.collect()
    if _libc is not None:
        with contextlib.suppress(AttributeError):
            _libc.malloc_trim(0)
