"""What keeps ``feedmesh up``'s hub closed to the other users of its machine: no secret on a
command line, in a world-readable file, or on an open port.

``up`` (:mod:`feedmesh.compose.processes`) calls these and builds no credential itself:

* :func:`lock_up`: the folder ``DATA/secrets`` (0700) with one NATS nkey seed per role (0600;
  bus/nats_auth.py) and the reflectors' API bearer token (0600), each made once and kept;
* :meth:`UpLocks.start_nats`: the NATS server (or a cluster of three, ``--nats-cluster 3``) whose
  config lists only the roles' *public* keys and each role's permissions, so a client without a
  key is refused and a crawler's key may publish articles but not matches;
  :meth:`UpLocks.prepare_bus` then makes the hub's streams (``replicas`` copies each) and every
  group the roles bind to, with the admin's key: no role may make or delete one;
* :meth:`UpLocks.store_url`: the URL the roles connect to PostgreSQL with, holding no password:
  for the server ``up`` starts, its app login (owner of the feedmesh database and nothing else;
  the superuser is used for that set-up only), its password in a passfile 0600 named by the URL
  (``?passfile=``); a ``--store`` URL given with a password in it has the password moved into a
  passfile the same way;
* :meth:`UpLocks.flags`: the flags that hand each role its credentials by the files' *paths*;
* :func:`write_private`: ``up.json`` and the like, 0600.

Everything ``up`` writes is made under the umask 0077 (commands/up.py), so files are 0600 and
folders 0700; PostgreSQL's own folder is the server's (store/pg_server.py).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from feedmesh.bus import BusError
from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.bus.nats_auth import ADMIN, NatsCredentials, authorization_block, create_credentials
from feedmesh.bus.nats_cluster import LocalNatsCluster, prepare_placed
from feedmesh.bus.nats_server import LocalNats, NatsServerError
from feedmesh.compose.settings import UpSettings
from feedmesh.hub.tiers.crawling import crawler_group
from feedmesh.secret_file import new_token, write_secret
from feedmesh.store.pg_login import passfile_line
from feedmesh.store.pg_server import LocalPostgres

__all__ = ["SECRETS", "TOKEN_FILE", "UpLocks", "hub_groups", "lock_up", "nats_rows",
           "secure_bus", "url_without_password", "write_private"]

SECRETS = "secrets"
"""``DATA/secrets``: every credential of the hub ``up`` runs (0700, its files 0600)."""
TOKEN_FILE = "reflector.token"
NAMESPACE = "feedmesh"

# The flags by which each role is handed its files (the paths only: never a secret).
_TOKEN_FLAG = {"reflector": "--token-file", "crawler": "--reflector-token-file",
               "web": "--reflector-token-file"}


def hub_groups(*, filters: int, reflectors: int, crawlers: list[int | str],
               republish: bool) -> list[tuple[str, str]]:
    """The durable (subject, group) pairs of a hub of ``filters`` shards, ``reflectors``
    reflectors and the crawlers of ``crawlers`` (each its shard number or its name); with
    ``republish`` each crawler's republisher's group of ``articles`` too."""
    groups = [(subject, f"filter-{shard}") for shard in range(filters)
              for subject in ("articles", "control")]
    groups += [(subject, f"reflector-{r}") for r in range(reflectors)
               for subject in ("control", f"matches.{r}")]
    groups += [("feeds", crawler_group(c)) for c in crawlers]
    if republish:
        groups += [("articles", f"republish-{crawler_group(c)}") for c in crawlers]
    return groups


@dataclass(frozen=True)
class UpLocks:
    """The credentials of one ``up`` (:func:`lock_up`)."""

    folder: Path
    nats: NatsCredentials
    token_file: Path

    def flags(self, role: str, *, authenticated_bus: bool = True) -> list[str]:
        """The flags that give ``role`` (crawler, filter, reflector, web, or ``admin`` for a
        set-up tool) its credentials: its NATS seed file (when ``authenticated_bus``: the bus
        ``up`` started), and the reflectors' token file."""
        out = ["--bus-credentials", str(self.nats.path(role))] if authenticated_bus else []
        if role in _TOKEN_FLAG:
            out += [_TOKEN_FLAG[role], str(self.token_file)]
        return out

    def start_nats(self, folder: Path, *, nodes: int, reflectors: int,
                   republishers: list[int | str]) -> tuple[list[LocalNats], str]:
        """A NATS server in ``folder`` (``nodes`` 0 or 1), or a cluster of ``nodes`` on
        127.0.0.1, .2, ..., that lets in only these roles' keys, each to what it does
        (``republishers``: the crawlers, by shard or name, whose republishers read
        ``articles``). Returns the servers and the URL (every node's, by commas)."""
        pulls = {"crawler": [("articles", f"republish-{crawler_group(c)}")
                             for c in republishers]}
        authorization = authorization_block(self.nats, NAMESPACE, reflectors, pulls)
        if nodes <= 1:
            server = LocalNats(folder, authorization=authorization).start()
            return [server], server.url
        cluster = LocalNatsCluster(folder, hosts=[f"127.0.0.{n + 1}" for n in range(nodes)],
                                   authorization=authorization)
        try:
            cluster.start()
        except BaseException:
            cluster.stop()
            raise
        return list(cluster.nodes), cluster.url

    def prepare_bus(self, url: str, groups: list[tuple[str, str]], *, reflectors: int,
                    replicas: int, timeout: float = 60.0) -> None:
        """Make the hub's streams (``replicas`` copies each) and ``groups`` with the admin's
        key, before any role starts: the roles may only find them."""
        subjects = ["articles", "control", "feeds", *(f"matches.{r}" for r in range(reflectors))]

        async def prepare() -> None:
            admin = JetStreamBus(url, namespace=NAMESPACE, credentials=self.nats.path(ADMIN),
                                 replicas=replicas, connect_timeout=timeout)
            try:
                await prepare_placed(admin, subjects, groups, timeout=timeout)
            finally:
                await admin.close()

        try:
            asyncio.run(prepare())
        except BusError as exc:
            raise NatsServerError(f"the NATS server at {url} did not take the hub's streams "
                                  f"within {timeout:.0f} s: {exc}") from exc

    def store_url(self, postgres: LocalPostgres | None, given: str) -> str:
        """The PostgreSQL URL every role is given, which holds no password: the app login of
        the server ``up`` started (``postgres``), else ``given`` with any password it holds
        moved into a passfile 0600 here."""
        if postgres is not None:
            return postgres.app_login(self.folder / "feedmesh.pgpass").url
        return url_without_password(given, self.folder / "store.pgpass")


def url_without_password(url: str, passfile: Path) -> str:
    """``url`` without its password, which goes to ``passfile`` (0600), named by the URL
    (``?passfile=``) instead; a URL without a password is returned as it is."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = unquote(parts.username or "")
    write_secret(passfile, passfile_line(parts.hostname or "localhost", parts.port or 5432, "*",
                                         user or "*", unquote(parts.password)).encode())
    where = parts.netloc.rpartition("@")[2]
    query = "&".join(q for q in (parts.query, f"passfile={quote(str(passfile), safe='/')}") if q)
    return urlunsplit(parts._replace(netloc=f"{quote(user)}@{where}" if user else where,
                                     query=query))


def secure_bus(locks: UpLocks, folder: Path, args: UpSettings,
               servers: list[LocalNats]) -> str:
    """Start ``up``'s NATS server (``args.nats_cluster`` nodes: a cluster) in ``folder``, each
    server added to ``servers`` as it starts (for the caller to stop), and prepare the hub's
    streams, R3 on a cluster, and groups; returns the URL the roles are given."""
    crawlers: list[int | str] = [f"crawler-{n}" if args.by_locality else n
                                 for n in range(args.crawlers)]
    started, url = locks.start_nats(folder, nodes=args.nats_cluster, reflectors=args.reflectors,
                                    republishers=crawlers if args.republish else [])
    servers += started
    groups = hub_groups(filters=args.filters, reflectors=args.reflectors, crawlers=crawlers,
                        republish=bool(args.republish))
    locks.prepare_bus(url, groups, reflectors=args.reflectors,
                      replicas=3 if args.nats_cluster >= 3 else 1)
    return url


def lock_up(data: Path) -> UpLocks:
    """``DATA/secrets`` (0700) with a seed per NATS role and the reflectors' token (0600),
    each made when missing and kept otherwise."""
    folder = data / SECRETS
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    nats = create_credentials(folder / "nats")
    token_file = folder / TOKEN_FILE
    if not token_file.exists():
        write_secret(token_file, new_token() + b"\n")
    return UpLocks(folder=folder, nats=nats, token_file=token_file)


def nats_rows(servers: list[LocalNats]) -> list[dict[str, object]]:
    """The rows of ``up.json`` for the NATS servers ``up`` started and that run."""
    return [{"role": "nats", "pid": server.pid, "address": server.url,
             **({"node": server.cluster.server_name} if server.cluster is not None else {})}
            for server in servers if server.pid is not None]


def write_private(path: Path, text: str) -> None:
    """``text`` in ``path``, 0600 whatever the umask (replaced all at once)."""
    write_secret(path, text.encode())
    os.chmod(path, 0o600)
