"""The key folder. Files (all JSON but the records in ``outbox/``)::

    DIR/              mode 0700
      secret.key      mode 0600   {"v": 1, "algorithm": "ed25519", "seed": "<base64, 32 bytes>"}
      keyring.json                the public side: identity, current key, history, announcements
      logs.json                   per feed URL: the head (seq, prev) of the log this key signs
      outbox/NNNNNN-<group>.fmr   rotate/revoke records still to multicast (wire bytes)
      republished.json            a republisher's: per legacy feed URL, the entries it multicast
                                  (entry key -> content hash), so a restart sends nothing twice

The identity of a publisher is its *first* public key (``feed`` in every record). ``rotate`` makes
a new key and signs, with the old one, (a) an announcement in ``keyring.json`` and (b) a ``rotate``
record in every log the old key signed; ``revoke`` signs a revocation the same way and closes the
logs. The old secret is kept nowhere once rotated: a stolen old secret file is worth nothing.

Writes go to a temporary file renamed over the old one (never half a key on disk). Bad files are
:class:`KeyFileError` with what, where and why, never a traceback. Several processes may sign
with one folder (``feedmesh up --republish``: every crawler, each for the feeds it crawls): a
log's head is read, changed and written under an exclusive lock on ``DIR/.lock``, so one
process's head never overwrites another's.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from feedmesh.errors import FeedmeshError
from feedmesh.mesh.records import FeedWriter
from feedmesh.mesh.records.record import encode_key
from feedmesh.mesh.records.rotation import Announcement, verify_announcement
from feedmesh.mesh.records.rotation import sign_statement as _sign_statement

__all__ = ["Announcement", "KeyFileError", "KeyStore", "fingerprint", "verify_announcement"]

SECRET = "secret.key"
KEYRING = "keyring.json"
LOGS = "logs.json"
OUTBOX = "outbox"
REPUBLISHED = "republished.json"
LOCK = ".lock"


class KeyFileError(FeedmeshError):
    """A key folder or file is missing, unreadable, corrupt or too open (the message says which)."""


def fingerprint(public_key: str) -> str:
    """``sha256:<hex>`` of the raw key bytes: what a ``<publicKey href=...>`` names."""
    return "sha256:" + hashlib.sha256(base64.b64decode(public_key)).hexdigest()


class KeyStore:
    """One key folder. ``make`` creates it; every other method needs it made."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    # ---- making and reading -----------------------------------------------------------------
    def exists(self) -> bool:
        return (self.folder / SECRET).exists()

    def make(self, now: float) -> str:
        """Make a new key; refuses to overwrite one. Returns the public key."""
        if self.exists():
            raise KeyFileError(f"{self.folder / SECRET} already holds a key: refusing to overwrite "
                               "it (use `feedmesh keys rotate` to replace it)")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            os.chmod(self.folder, 0o700)
        except OSError as error:
            raise KeyFileError(f"cannot make the key folder {self.folder}: {error.strerror}") \
                from error
        key = SigningKey.generate()
        public = encode_key(key.verify_key)
        self._write_secret(key)
        self._write_json(KEYRING, {"v": 1, "feed": public, "current": public, "revoked": False,
                                   "history": [{"key": public, "made": now}],
                                   "announcements": []})
        return public

    def signing_key(self) -> SigningKey:
        path = self.folder / SECRET
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
            text = path.read_text("utf-8")
        except FileNotFoundError as error:
            raise KeyFileError(f"no key in {self.folder} ({SECRET} is missing): run "
                               f"`feedmesh keys make --dir {self.folder}` first") from error
        except (OSError, UnicodeDecodeError) as error:
            raise KeyFileError(f"cannot read {path}: {error}") from error
        if mode & 0o077:
            raise KeyFileError(f"{path} is readable by others (mode {mode:04o}); a secret key must "
                               f"be 0600: run `chmod 600 {path}`")
        try:
            body = json.loads(text)
            seed = base64.b64decode(body["seed"], validate=True)
            if body.get("algorithm") != "ed25519" or len(seed) != 32:
                raise ValueError(f"an ed25519 seed of 32 bytes is expected, got "
                                 f"{body.get('algorithm')!r} of {len(seed)} bytes")
        except (ValueError, KeyError, TypeError, binascii.Error) as error:
            raise KeyFileError(f"{path} is corrupt: {error}") from error
        key = SigningKey(seed)
        if encode_key(key.verify_key) != self.keyring()["current"]:
            raise KeyFileError(f"{path} does not hold the current key of {self.folder / KEYRING} "
                               "(files from two different folders?)")
        return key

    def keyring(self) -> dict[str, Any]:
        ring = self._read_json(KEYRING, None)
        if ring is None:
            raise KeyFileError(f"no keyring in {self.folder} ({KEYRING} is missing): run "
                               f"`feedmesh keys make --dir {self.folder}` first")
        if not isinstance(ring, dict) or not {"feed", "current", "history"} <= ring.keys():
            raise KeyFileError(f"{self.folder / KEYRING} is corrupt: fields feed, current and "
                               "history are expected")
        return ring

    def identity(self) -> str:
        return self.keyring()["feed"]

    def rotations(self) -> tuple[str, ...]:
        """The signed rotation (and revocation) statements from the identity on, oldest first:
        what a feed's ``<subscribe>`` carries so a late subscriber knows the current key."""
        return tuple(self.keyring().get("announcements", ()))

    # ---- logs -------------------------------------------------------------------------------
    def writer(self, url: str, *, republication: bool = False) -> FeedWriter:
        """A writer for the log of ``url``, resumed from its saved head."""
        ring = self.keyring()
        if ring.get("revoked"):
            raise KeyFileError(f"the key of {self.folder} is revoked: it signs nothing more "
                               "(make a new folder with `feedmesh keys make`)")
        head = self.logs().get(url, {})
        return FeedWriter(self.signing_key(), url, republication=republication, feed=ring["feed"],
                          head=(int(head.get("seq", 0)), head.get("prev")))

    def save_head(self, writer: FeedWriter) -> None:
        with self._locked():
            logs = self.logs()
            logs[writer.url] = {"seq": writer.seq, "prev": writer.prev,
                                "republication": writer.republication}
            self._write_json(LOGS, logs)

    def logs(self) -> dict[str, Any]:
        logs = self._read_json(LOGS, {})
        if not isinstance(logs, dict):
            raise KeyFileError(f"{self.folder / LOGS} is corrupt: an object of URLs is expected")
        return logs

    def republished(self) -> dict[str, dict[str, str]]:
        """Per legacy feed URL, the entries a republisher multicast (key -> content hash)."""
        value = self._read_json(REPUBLISHED, {})
        if not isinstance(value, dict) or not all(
                isinstance(v, dict) and all(isinstance(h, str) for h in v.values())
                for v in value.values()):
            raise KeyFileError(f"{self.folder / REPUBLISHED} is corrupt: an object of URLs, each "
                               "an object of entry keys to content hashes, is expected")
        return value

    def save_republished(self, value: dict[str, dict[str, str]]) -> None:
        with self._locked():
            self._write_json(REPUBLISHED, value)

    def outbox(self) -> list[Path]:
        """Records signed by ``rotate``/``revoke`` not yet multicast, oldest first."""
        folder = self.folder / OUTBOX
        return sorted(folder.glob("*.fmr")) if folder.is_dir() else []

    # ---- rotation and revocation ------------------------------------------------------------
    def rotate(self, now: float) -> str:
        """A new key, announced by the old one (keyring and every log). Returns the new key."""
        old = self.signing_key()
        ring = self.keyring()
        if ring.get("revoked"):
            raise KeyFileError(f"the key of {self.folder} is revoked: nothing to rotate")
        new = SigningKey.generate()
        new_public = encode_key(new.verify_key)
        self._sign_logs(lambda writer: writer.rotate(new))
        ring["announcements"].append(_sign_statement(old, {
            "v": 1, "type": "rotate", "feed": ring["feed"], "old": ring["current"],
            "new": new_public, "at": now}))
        ring["history"][-1]["retired"] = now
        ring["history"].append({"key": new_public, "made": now})
        ring["current"] = new_public
        self._write_secret(new)
        self._write_json(KEYRING, ring)
        return new_public

    def revoke(self, now: float) -> None:
        """The current key signs that it signs nothing more; every log it signs is closed."""
        key = self.signing_key()
        ring = self.keyring()
        if ring.get("revoked"):
            raise KeyFileError(f"the key of {self.folder} is already revoked")
        self._sign_logs(lambda writer: writer.revoke())
        ring["announcements"].append(_sign_statement(key, {
            "v": 1, "type": "revoke", "feed": ring["feed"], "old": ring["current"], "at": now}))
        ring["revoked"] = True
        ring["history"][-1]["revoked"] = now
        self._write_json(KEYRING, ring)

    def _sign_logs(self, sign) -> None:
        outbox = self.folder / OUTBOX
        outbox.mkdir(exist_ok=True)
        for url, head in self.logs().items():
            writer = self.writer(url, republication=bool(head.get("republication")))
            wire = sign(writer)
            # a file name, not a check
            tag = hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()[:12]
            name = f"{writer.seq:06d}-{tag}.fmr"
            self._write_bytes(outbox / name, wire)
            self.save_head(writer)

    # ---- files ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive, across processes, for a read-change-write of a shared file."""
        try:
            fd = os.open(self.folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as error:
            raise KeyFileError(f"cannot lock {self.folder / LOCK}: {error.strerror}") from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)   # (closing releases the lock)

    def _write_secret(self, key: SigningKey) -> None:
        body = {"v": 1, "algorithm": "ed25519",
                "seed": base64.b64encode(bytes(key)).decode("ascii")}
        self._write_bytes(self.folder / SECRET, json.dumps(body).encode() + b"\n", mode=0o600)

    def _write_json(self, name: str, value: Any) -> None:
        self._write_bytes(self.folder / name, json.dumps(value, indent=1).encode() + b"\n")

    def _read_json(self, name: str, missing: Any) -> Any:
        path = self.folder / name
        try:
            return json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            return missing
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise KeyFileError(f"{path} is corrupt or unreadable: {error}") from error

    @staticmethod
    def _write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")   # (one per process)
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(temporary, mode)
            os.replace(temporary, path)
        except OSError as error:
            raise KeyFileError(f"cannot write {path}: {error.strerror}") from error
