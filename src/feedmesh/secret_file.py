"""Secrets in files readable by their owner only: how every credential reaches a process.

A command line is readable by every user of the machine (``/proc/PID/cmdline``, ``ps``), and so
is a file created with the usual umask. So each credential feedmesh hands a process (its role's
NATS seed, a PostgreSQL passfile, the reflector API's token) is a file created here 0600, inside
a folder 0700, written all at once (a crash leaves the old file or the new one, never a part),
and the process is given the file's *path*. Reading one refuses a file that others could read
or that someone other than this user (or root) owns, as ssh refuses such a private key: a
secret that may have leaked is reported, not used.

Exceptions drawn from this module::

    Exception
     └── SecretFileError   a secret file is missing, unreadable, too open or malformed
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from feedmesh.errors import FeedmeshError

__all__ = ["MIN_TOKEN_CHARS", "SecretFileError", "new_token", "read_secret", "read_token",
           "write_secret"]

MIN_TOKEN_CHARS = 32
"""A bearer token shorter than this is refused (``new_token`` makes 43)."""


class SecretFileError(FeedmeshError):
    """A secret file is missing, unreadable, readable by others, or not what it should hold."""


def write_secret(path: str | Path, data: bytes) -> Path:
    """``data`` in ``path``, created 0600 (its folder made 0700 when missing) and replaced all
    at once. Returns the path."""
    path = Path(path)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise SecretFileError(f"cannot make the folder of {path}: {exc.strerror or exc}") from exc
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        # O_EXCL: never write into a file someone else made (and may hold open) beforehand
        temporary.unlink(missing_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                             0o600)
        with os.fdopen(descriptor, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise SecretFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def read_secret(path: str | Path, what: str) -> bytes:
    """The bytes of the secret file ``path`` (``what`` names it in errors). Refused when it is
    not a regular file, when group or others have any access to it, or when it belongs to
    another user than this one or root."""
    path = Path(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise SecretFileError(f"{what} {path}: cannot open it ({exc.strerror or exc})") from exc
    with os.fdopen(descriptor, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SecretFileError(f"{what} {path}: not a regular file")
        if info.st_mode & 0o077:
            raise SecretFileError(
                f"{what} {path}: others may read it (mode {stat.S_IMODE(info.st_mode):04o}); "
                f"it may have leaked: make a new one, or `chmod 600` it if it cannot have")
        if info.st_uid not in (os.geteuid(), 0):
            raise SecretFileError(f"{what} {path}: owned by user {info.st_uid}, not by this "
                                  f"user ({os.geteuid()}) or root")
        data = f.read()
    if not data.strip():
        raise SecretFileError(f"{what} {path}: empty")
    return data


def new_token() -> bytes:
    """A fresh bearer token: 256 random bits, URL-safe base64 (43 ASCII characters)."""
    return secrets.token_urlsafe(32).encode("ascii")


def read_token(path: str | Path, what: str) -> bytes:
    """The bearer token in ``path`` (checked as :func:`read_secret` does), without its line
    end: printable ASCII, no spaces, at least :data:`MIN_TOKEN_CHARS` long."""
    token = read_secret(path, what).strip()
    if not all(0x21 <= byte <= 0x7E for byte in token):
        raise SecretFileError(f"{what} {path}: a token is printable ASCII without spaces")
    if len(token) < MIN_TOKEN_CHARS:
        raise SecretFileError(f"{what} {path}: a token of {len(token)} characters is too "
                              f"short to be secret (at least {MIN_TOKEN_CHARS})")
    return token
