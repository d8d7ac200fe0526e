"""Who may do what on the hub's NATS server: one nkey per role, and each role's permissions.

Each role (``crawler``, ``filter``, ``reflector``, ``web``, and ``admin`` for set-up) has an
nkey: an Ed25519 key pair. Its *seed* (the private half) is a file 0600 that only that role's
processes read (:func:`create_credentials`, :class:`NatsCredentials`); the server's config holds
only the *public* keys (:func:`authorization_block`), so the config reveals no secret, and
nats-py proves the seed by signing the server's nonce (it never crosses the wire). A client
without a known key is refused at ``CONNECT``.

What each role may publish and subscribe to follows what the hub's code does with the bus
(hub/*.py, and bus/jetstream.py for the JetStream API under it):

======== ======================== ============================ ==============================
role     publishes                consumes (its own groups)    binds to (groups made at set-up)
======== ======================== ============================ ==============================
crawler  articles, feeds          feeds                        articles, control, matches.*
filter   matches.*                articles, control
reflector                         matches.*, control
web      control, feeds,          (none)                       feeds
         matches.* [#]_
admin    everything (creates the streams and every group: :meth:`JetStreamBus.prepare`)
======== ======================== ============================ ==============================

.. [#] a new subscription's first entries are published by the web process to its reflector's
   ``matches.r`` (hub/front.py, ``_start_full``), from entries already stored.

Every role may read any hub stream's *state* (``STREAM.INFO``, ``CONSUMER.LIST``: counts, never
messages: ``wait_acked``, ``last_seq`` and the queue-depth metrics need them) and park a poison
message. "Consumes" is creating its groups on those streams, pulling and acknowledging; "binds
to" is only finding a group that exists (the crawler makes sure the filters' and reflectors'
groups exist before it publishes; the web, the crawlers'): creating a consumer would let a
role read that stream, so those groups are made at set-up, with the admin key. Nobody but the
admin may delete a group, delete or purge a stream, or read a stored message by number.

Replies: a role subscribes only under an inbox prefix of its own (:func:`inbox_prefix`, derived
from its public key, which :class:`~feedmesh.bus.jetstream.JetStreamBus` uses for the same key),
and publishes to no inbox: so it neither reads another role's deliveries (a pull consumer's
messages arrive on the puller's inbox) nor forges them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import nkeys

from feedmesh.secret_file import SecretFileError, read_secret, write_secret

__all__ = ["ADMIN", "ROLES", "NatsCredentials", "authorization_block", "create_credentials",
           "hub_stream", "inbox_prefix", "public_key", "read_seed", "role_permissions"]

ADMIN = "admin"
ROLES = ("crawler", "filter", "reflector", "web", ADMIN)

# What each role does with which subjects ("matches.*" is every reflector's matches.r).
_PUBLISHES = {"crawler": ("articles", "feeds"), "filter": ("matches.*",), "reflector": (),
              "web": ("control", "feeds", "matches.*")}
_CONSUMES = {"crawler": ("feeds",), "filter": ("articles", "control"),
             "reflector": ("matches.*", "control"), "web": ()}
_BINDS = {"crawler": ("articles", "control", "matches.*"), "filter": (), "reflector": (),
          "web": ("feeds",)}
_PARKS = {"crawler", "filter", "reflector"}
_HUB_SUBJECTS = ("articles", "control", "feeds", "matches.*")


def hub_stream(namespace: str, subject: str) -> str:
    """The stream holding bus ``subject`` (as :class:`JetStreamBus` names it)."""
    return f"{namespace}_{subject.replace('.', '_')}"


def _expanded(subjects: Iterable[str], reflectors: int) -> list[str]:
    out: list[str] = []
    for subject in subjects:
        if subject == "matches.*":
            out += [f"matches.{r}" for r in range(reflectors)]
        else:
            out.append(subject)
    return out


def inbox_prefix(public: str) -> str:
    """The reply-subject prefix of the client holding the key ``public``: one token, its own."""
    return f"_INBOX_{public[1:17]}"


def role_permissions(role: str, namespace: str, reflectors: int, public: str,
                     pulls: Iterable[tuple[str, str]] = ()
                     ) -> dict[str, dict[str, list[str]]] | None:
    """The NATS ``permissions`` of ``role`` (None for the admin: no limit), for a hub of
    ``reflectors`` reflectors on bus namespace ``namespace``, whose key is ``public``.
    ``pulls``: (subject, group) pairs this role also pulls from and acknowledges, by that
    group's name alone (a crawler's republisher reads ``articles`` through a group of its
    own, made at set-up: never the filters')."""
    if role == ADMIN:
        return None
    if role not in _PUBLISHES:
        raise ValueError(f"NATS role {role!r}: one of {', '.join(ROLES)}")
    if reflectors < 1:
        raise ValueError(f"a hub has at least one reflector, not {reflectors}")
    api = "$JS.API"
    parked = f"{namespace}__parked"
    streams = [hub_stream(namespace, s) for s in _expanded(_HUB_SUBJECTS, reflectors)]
    publish = [f"{namespace}.{s}" for s in _expanded(_PUBLISHES[role], reflectors)]
    for stream in (*streams, parked):
        publish += [f"{api}.STREAM.INFO.{stream}", f"{api}.CONSUMER.LIST.{stream}"]
    for subject in _expanded(_CONSUMES[role], reflectors):
        stream = hub_stream(namespace, subject)
        publish += [f"{api}.CONSUMER.CREATE.{stream}.>", f"{api}.CONSUMER.INFO.{stream}.*",
                    f"{api}.CONSUMER.MSG.NEXT.{stream}.*", f"$JS.ACK.{stream}.>"]
    for subject in _expanded(_BINDS[role], reflectors):
        publish.append(f"{api}.CONSUMER.INFO.{hub_stream(namespace, subject)}.*")
    for subject, group in pulls:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", group):
            raise ValueError(f"bus group {group!r}: use letters, digits, '-' and '_'")
        stream = hub_stream(namespace, subject)
        publish += [f"{api}.CONSUMER.INFO.{stream}.{group}",
                    f"{api}.CONSUMER.MSG.NEXT.{stream}.{group}", f"$JS.ACK.{stream}.{group}.>"]
    if role in _PARKS:
        publish.append(f"{namespace}._parked")
    return {"publish": {"allow": publish},
            "subscribe": {"allow": [f"{inbox_prefix(public)}.>"]}}


def public_key(seed: bytes) -> str:
    """The public key (``U...``) of an nkey user seed (``SU...``)."""
    try:
        pair = nkeys.from_seed(bytearray(seed.strip()))
    except nkeys.NkeysError as exc:
        raise SecretFileError(f"not an nkey user seed ({exc})") from exc
    try:
        return pair.public_key.decode()
    finally:
        pair.wipe()


def read_seed(path: str | Path) -> bytes:
    """The nkey seed in ``path`` (a file 0600 holding ``SU...``, as ``nk -gen user`` writes)."""
    seed = read_secret(path, "NATS credentials").strip()
    if not seed.startswith(b"SU"):
        raise SecretFileError(f"NATS credentials {path}: not an nkey user seed (SU...)")
    public_key(seed)  # checks its checksum
    return seed


@dataclass(frozen=True)
class NatsCredentials:
    """A folder (0700) of one seed file (0600) per role, and the roles' public keys."""

    folder: Path
    public_keys: Mapping[str, str]

    def path(self, role: str) -> Path:
        """The seed file of ``role``: what that role's processes are given."""
        if role not in self.public_keys:
            raise KeyError(f"no NATS credentials for the role {role!r} in {self.folder}")
        return self.folder / f"{role}.nk"


def create_credentials(folder: str | Path, roles: Iterable[str] = ROLES) -> NatsCredentials:
    """The credentials in ``folder``, a seed made for each role that has none (kept: a role's
    key lives as long as its file)."""
    folder = Path(folder)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    keys = {}
    for role in roles:
        if role not in ROLES:
            raise ValueError(f"NATS role {role!r}: one of {', '.join(ROLES)}")
        path = folder / f"{role}.nk"
        if not path.exists():
            write_secret(path, nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER) + b"\n")
        keys[role] = public_key(read_seed(path))
    return NatsCredentials(folder, keys)


def authorization_block(credentials: NatsCredentials, namespace: str, reflectors: int,
                        pulls: Mapping[str, Iterable[tuple[str, str]]] | None = None) -> str:
    """The server config's ``authorization`` block: each role's public key and permissions
    (``pulls``: the groups a role also pulls from, by role; :func:`role_permissions`).
    No secret is in it. A client whose key is not listed is refused."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", namespace):
        raise ValueError(f"bus namespace {namespace!r}: use letters, digits, '-' and '_'")
    users = []
    for role, public in sorted(credentials.public_keys.items()):
        user: dict[str, object] = {"nkey": public}
        permissions = role_permissions(role, namespace, reflectors, public,
                                       (pulls or {}).get(role, ()))
        if permissions is not None:
            user["permissions"] = permissions
        users.append(f"    # {role}\n    {json.dumps(user)}")
    # NATS's config format reads JSON objects and arrays as they are
    return "authorization {\n  users = [\n" + ",\n".join(users) + "\n  ]\n}\n"
