"""A secret kept in a file of its own, readable by its owner only (0600).

The key that signs private feed URLs is such a secret: whoever reads it can mint a working URL for
any subscription. It used to sit in ``hub.db`` beside data that is far less sensitive (and is
backed up, copied and inspected far more freely); now it lives in its own file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from feedmesh.store.ports import StoreError, storage_error

__all__ = ["MIN_KEY_BYTES", "read_key", "read_or_create_key", "retire_key", "rotate_key"]

MIN_KEY_BYTES = 32


def read_or_create_key(path: str | Path, initial: Callable[[], bytes]) -> bytes:
    """The key in ``path``; when there is none, ``initial()`` written there first (created
    0600, all at once: a crash leaves no file or the whole key)."""
    path = Path(path)
    if not path.exists():
        _write(path, initial())
    return read_key(path)


def _write(path: Path, key: bytes) -> None:
    """``key`` in ``path``, created 0600 and replaced all at once (a crash leaves the old file
    or the new one, never a part)."""
    if len(key) < MIN_KEY_BYTES:
        raise StoreError(f"a key needs at least {MIN_KEY_BYTES} bytes, got {len(key)}")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as f:
            f.write(key)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise storage_error(f"cannot write the key file {path}: {exc.strerror or exc}",
                            exc) from exc


def rotate_key(path: str | Path, previous: str | Path, new: bytes) -> None:
    """Make ``new`` the key in ``path`` and keep the one it replaces in ``previous`` (where a
    key rotated out before is dropped: the URLs it made stop working). Written in that order, so
    a crash between leaves both files holding the old key: nothing made with it stops working."""
    path, previous = Path(path), Path(previous)
    _write(previous, read_key(path))
    _write(path, new)


def retire_key(previous: str | Path) -> bool:
    """Drop the key rotated out (what it made stops working); whether there was one."""
    previous = Path(previous)
    try:
        previous.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise storage_error(f"cannot remove the key file {previous}: {exc.strerror or exc}",
                            exc) from exc
    return True


def read_key(path: str | Path) -> bytes:
    """The key in ``path`` (StoreError when it is missing, unreadable or too short)."""
    path = Path(path)
    try:
        key = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"cannot read the key file {path}: {exc.strerror or exc}") from exc
    if len(key) < MIN_KEY_BYTES:
        raise StoreError(f"the key file {path} holds {len(key)} bytes, fewer than the "
                         f"{MIN_KEY_BYTES} a key needs: restore it from a backup (a new key "
                         "would invalidate every private feed URL)")
    return key
