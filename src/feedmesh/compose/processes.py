"""``feedmesh up``: a hub as several processes on this machine, joined by NATS JetStream.

It starts a NATS server (unless given one), one ``feedmesh reflector`` process per reflector, the
crawlers (``feedmesh crawler --external-filters --external-reflectors``), one ``feedmesh web``
process per web, and one ``feedmesh filter`` process per shard; prints where the web UI is; and
stops everything cleanly on Ctrl-C, SIGTERM or ``feedmesh down`` (the web processes, then the
crawler, which drains what the filters and reflectors still hold, then the filters, then the
reflectors, which checkpoint, then NATS). A process that exits is started again with the same
argv, after a pause that grows, and one in a crash loop stays down while the others run on
(:mod:`feedmesh.compose.supervised`); the web processes serve throughout.

Every process is listed in ``DATA/up.json`` (role, shard, pid, metrics address; its state
``running``, ``restarting``, ``down`` or ``stopped`` and its restarts), which
``feedmesh down`` and ``feedmesh stats --up DATA`` read.

``crawlers`` > 1 runs that many crawler processes, each fetching its share of the feeds
(``--shard i/N``), on the ingest store of ``store`` (PostgreSQL: SQLite takes one writer at a
time).

``republish`` makes every crawler a SCRIBE-RSS republisher (``feedmesh crawler --republish``): each
multicasts what it finds new in the feeds it crawls, signed with the one key folder, from an
overlay node of its own (a UDP port on 127.0.0.1; the first crawler's node starts the ring, the
others join through it). Each serves every feed of the hub with its ``<subscribe>`` element
(naming that crawler's node) at ``/mesh/opml`` on its metrics address, listed in ``up.json`` as
``mesh_opml``: any of them is a way into the one ring.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import msgspec

from feedmesh.bus.nats_server import LocalNats, NatsServerError
from feedmesh.compose.engines import open_feed_ownership, open_hub_state
from feedmesh.compose.lifecycle import stop_on_signals
from feedmesh.compose.settings import UpSettings
from feedmesh.compose.supervised import listing_saver, supervise
from feedmesh.compose.supervisor import RUNNING
from feedmesh.compose.up_secrets import lock_up, nats_rows, secure_bus
from feedmesh.secret_file import SecretFileError
from feedmesh.store import StoreError
from feedmesh.store.pg_server import LocalPostgres, LocalPostgresError

__all__ = ["UP_FILE", "down", "up"]

UP_FILE = "up.json"


def _crawl_flags(args: UpSettings) -> list[str]:
    flags = ["--delivery", args.delivery]
    if args.crawl_interval > 0:
        flags += ["--policy", "interval", "--interval", str(args.crawl_interval)]
    if args.per_host > 0:
        flags += ["--per-host", str(args.per_host)]
    if args.no_backlog:
        flags.append("--no-backlog")
    return flags


def _free_port(host: str, kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class _Role:
    """One child process, its standard error copied to ours with its name in front."""

    def __init__(self, name: str, argv: list[str], **info: Any) -> None:
        self.name = name
        self.info = info
        self.argv = argv
        self.ready_prefix = ""
        self.process = self._start()
        self.first_line = ""

    def _start(self) -> subprocess.Popen[str]:
        # A session of its own: Ctrl-C reaches `up` alone, which stops the roles in drain
        # order (the hub before the filters it waits for).
        return subprocess.Popen(self.argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, text=True, start_new_session=True)

    def restart(self) -> None:
        """Start it again as it was started first (its supervisor's call, once it exited)."""
        self.process = self._start()

    def wait_ready(self, prefix: str, timeout: float = 600.0) -> str:
        """Read its standard error until a line starts with ``prefix`` (its ready line);
        then copy the rest to ours in the background."""
        self.ready_prefix = prefix
        stream: IO[str] = self.process.stderr  # type: ignore[assignment]
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while time.monotonic() < deadline:
            line = stream.readline()
            if not line:  # it exited
                raise RuntimeError(f"{self.name} exited with status {self.process.wait()} "
                                   f"before it was ready: {''.join(seen[-5:]).strip()}")
            if line.startswith(prefix):
                self.first_line = line.strip()
                threading.Thread(target=self._copy, args=(stream,), daemon=True).start()
                return self.first_line
            seen.append(line)
        raise RuntimeError(f"{self.name} was not ready within {timeout:.0f} s")

    def _copy(self, stream: IO[str]) -> None:
        for line in stream:
            sys.stderr.write(f"[{self.name}] {line}")

    def stop(self, timeout: float = 120.0) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def read_topology(path: str) -> tuple[int, int, int, int]:
    """(crawlers, filter shards, replicas per shard, reflectors) of a provisioner's plan."""
    try:
        plan = json.loads(Path(path).read_text())
        services = plan["services"]
        crawlers = sum(1 for s in services if s["role"] == "crawler")
        reflectors = sum(1 for s in services if s["role"] == "reflector")
        shards: dict[str, int] = {}
        for s in services:
            if s["role"] == "filter":
                shards[s["process_shard"]] = shards.get(s["process_shard"], 0) + 1
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--topology {path}: not a plan of `feedmesh provision --json` "
                         f"({exc!r})") from exc
    replicas = set(shards.values())
    if not crawlers or not reflectors or not shards or len(replicas) != 1:
        raise ValueError(f"--topology {path}: needs crawlers, reflectors and filter shards "
                         "with as many replicas each")
    return crawlers, len(shards), replicas.pop(), reflectors


def crawler_hosts(path: str) -> list[str]:
    """The hosts a provisioner's plan gives its crawlers, in order."""
    plan = json.loads(Path(path).read_text())
    return [s["host"] for s in plan["services"] if s["role"] == "crawler" and s.get("host")]


def _owned_before(store: str, hub: Path) -> bool:
    """Whether any feed of this hub has an owner yet (an earlier `up` or `map --apply`), read
    before the crawlers start and claim the unowned ones by their provisional rule."""
    if not store and not (hub / "feedmesh.db").exists():
        return False
    table = open_feed_ownership(store or hub / "feedmesh.db")
    try:
        return bool(table.owners())
    finally:
        table.close()


def _map_by_locality(python: list[str], where: list[str], url: str, crawlers: dict[str, str],
                     args: UpSettings, fresh: bool, credentials: list[str]) -> None:
    """Map the loaded feeds to the nearest crawlers while they run (the handover is theirs);
    a failure leaves the feeds where the crawlers' own rule put them, and says so.

    ``fresh``: no feed had an owner before these crawlers started, so where they are now is
    the crawlers' provisional rule (every feed of a server together, the fewest feeds first),
    not a mapping by latency: map from scratch (``--fresh``). Reassigning from it keeps as many
    feeds in place as balance allows, and a placement made without any latency is not worth
    keeping: on the 12-feed test farm it left a European feed with the Asian crawler when the
    feeds' sizes happened to make a feed of America look heavier (a fresh mapping put every
    feed near in 98% of 3,000 random sizings, reassigning from one crawler in 71%:
    benchmarks/locality_first_mapping.py). Otherwise (an earlier mapping in the table)
    reassign: few feeds move."""
    argv = [*python, "map", "--apply", *where, "--bus", url, *credentials, "--probes", "3",
            *(["--fresh"] if fresh else []),
            *(f"--crawler={name}={address}" for name, address in crawlers.items()),
            *(f"--allow-network={network}" for network in args.allow_network)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        print("feedmesh up: mapping the feeds by locality took over 300 s; the crawlers keep "
              "the feeds their own rule gave them", file=sys.stderr, flush=True)
        return
    said = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode != 0:
        print(f"feedmesh up: mapping the feeds by locality failed (exit {done.returncode}): "
              f"{said[-1] if said else 'no message'}; the crawlers go on with the feeds the "
              "table gives them (`feedmesh map --apply` again to retry)", file=sys.stderr,
              flush=True)
        return
    for line in said:
        print(f"feedmesh up: map: {line}", file=sys.stderr, flush=True)


def up(args: UpSettings) -> int:
    if args.topology:
        try:
            crawlers, filters, replicas, reflectors = read_topology(args.topology)
        except ValueError as exc:
            print(f"feedmesh up: {exc}", file=sys.stderr)
            return 2
        args = msgspec.structs.replace(args, crawlers=crawlers, filters=filters,
                                       filter_replicas=replicas, reflectors=reflectors)
        print(f"feedmesh up: the plan {args.topology}: {args.crawlers} crawlers, "
              f"{args.filters} filter shards x {args.filter_replicas}, {args.reflectors} "
              "reflectors", file=sys.stderr, flush=True)
    if not 1 <= args.crawlers <= 16:
        print("feedmesh up: --crawlers must be in 1..16", file=sys.stderr)
        return 2
    if args.crawlers > 1 and args.store == "sqlite":
        print("feedmesh up: several crawlers share one ingest store: give --store "
              "postgresql://... (SQLite takes one writer at a time)", file=sys.stderr)
        return 2
    if not 1 <= args.web <= 16:
        print("feedmesh up: --web must be in 1..16", file=sys.stderr)
        return 2
    if not 1 <= args.filters <= 64 or not 1 <= args.reflectors <= 64 or \
            not 1 <= args.filter_replicas <= 16:
        print("feedmesh up: --filters and --reflectors must be in 1..64, --filter-replicas "
              "in 1..16", file=sys.stderr)
        return 2
    if args.nats_cluster and (args.nats or not 3 <= args.nats_cluster <= 5):
        print("feedmesh up: --nats-cluster starts 3 to 5 NATS servers of its own (not with "
              "--nats)", file=sys.stderr)
        return 2
    if args.republish:
        from feedmesh.mesh.keys import KeyFileError, KeyStore  # (only a republishing up)
        try:
            KeyStore(args.republish).signing_key()
        except KeyFileError as exc:
            print(f"feedmesh up: --republish: {exc}", file=sys.stderr)
            return 2
    data = Path(args.data).resolve()
    try:
        data.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        print(f"feedmesh up: cannot create {data}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    stop = stop_on_signals()
    servers: list[LocalNats] = []  # the NATS server, or the cluster's nodes
    postgres: LocalPostgres | None = None
    roles: list[_Role] = []
    python = [sys.executable, "-m", "feedmesh"]
    try:
        locks = lock_up(data)  # every role's credentials, in files 0600
        secured = not args.nats  # a server given with --nats has credentials of its own
        url = args.nats or secure_bus(locks, data / "nats", args, servers)
        if args.store == "sqlite":
            store = ""
        elif args.store:
            store = locks.store_url(None, args.store)  # its password, if any, to a passfile
        else:
            if os.geteuid() == 0:  # the server runs as its own user, who must reach its folder
                _reachable_by_others(data)
                data.chmod(0o711)  # (others may pass through DATA, not list it)
            postgres = LocalPostgres(data / "postgres").start()
            store = locks.store_url(postgres, "")  # its app login: no superuser, no password
        state = store or str(data / "hub" / "hub.db")
        _create_state(data / "hub", store)  # the reflectors read it before the hub starts
        reflectors = []
        for number in range(args.reflectors):
            listen = f"127.0.0.1:{_free_port('127.0.0.1')}"
            shard = f"{number}/{args.reflectors}"
            role = _Role(f"reflector {shard}",
                         [*python, "reflector", "--bus", url, "--state", state, "--store", store,
                          "--shard", shard, "--data", str(data / "hub"), "--listen", listen,
                          "--delivery", args.delivery, "--log-level", "warning",
                          *locks.flags("reflector", authenticated_bus=secured),
                          *(f"--allow-network={network}" for network in args.allow_network)],
                         shard=shard, metrics=f"http://{listen}/metrics",
                         token_file=str(locks.token_file))
            roles.append(role)
            role.wait_ready("feedmesh reflector")
            reflectors.append(f"http://{listen}")
        hosts = crawler_hosts(args.topology) if args.topology else []
        mapped_before = args.by_locality and _owned_before(store, data / "hub")
        named: dict[str, str] = {}  # crawler name -> its address (--by-locality)
        ring = ""   # the first republishing crawler's overlay node: the others join through it
        for shard in range(args.crawlers):
            metrics_port = _free_port("127.0.0.1")
            share = f"{shard}/{args.crawlers}"
            owned = ["--shard", share]
            if args.by_locality:
                share = f"crawler-{shard}"
                named[share] = hosts[shard] if shard < len(hosts) else f"127.1.0.{shard + 1}"
                owned = ["--name", share, "--source-address", named[share]]
            crawler_argv = [*python, "crawler", "--data", str(data / "hub"), "--bus", url,
                            "--store", store, "--filters", str(args.filters),
                            "--external-filters", "--host", "127.0.0.1", "--port",
                            str(metrics_port), "--reflectors", str(args.reflectors),
                            "--external-reflectors", ",".join(reflectors), *owned,
                            *locks.flags("crawler", authenticated_bus=secured),
                            *_crawl_flags(args)]
            if args.opml:
                crawler_argv += ["--opml", args.opml]
            for network in args.allow_network:
                crawler_argv += ["--allow-network", network]
            mesh: dict[str, str] = {}
            if args.republish:
                node = f"127.0.0.1:{_free_port('127.0.0.1', socket.SOCK_DGRAM)}"
                crawler_argv += ["--republish", str(Path(args.republish).resolve()),
                                 "--republish-listen", node,
                                 *(["--republish-bootstrap", ring] if ring else [])]
                ring = ring or node
                mesh = {"overlay": node,
                        "mesh_opml": f"http://127.0.0.1:{metrics_port}/mesh/opml"}
            crawler = _Role(f"crawler {share}", crawler_argv, shard=share,
                            metrics=f"http://127.0.0.1:{metrics_port}/metrics", **mesh)
            roles.insert(shard, crawler)  # stopped before the tiers: it drains what it sent
            said = crawler.wait_ready("feedmesh crawler:")  # the first made the database and key
            if " feeds, metrics at " not in said:  # its one-line error has the same prefix
                raise RuntimeError(f"{crawler.name} failed at start: {said}")
        webs = []
        for n in range(args.web):
            port = (args.port if n == 0 and args.port else _free_port(args.host))
            role = _Role(f"web {n}", [*python, "web", "--data", str(data / "hub"), "--bus", url,
                                      "--store", store, "--reflectors", ",".join(reflectors),
                                      "--crawlers",
                                      ",".join(named) if named else str(args.crawlers),
                                      "--listen", f"{args.host}:{port}", "--log-level",
                                      "warning", *locks.flags("web", authenticated_bus=secured),
                                      *(f"--allow-network={network}"
                                                   for network in args.allow_network)],
                         metrics=f"http://{args.host}:{port}/metrics")
            roles.insert(n, role)  # stopped first: they hold nothing
            webs.append(role.wait_ready("feedmesh web on ").split()[3].rstrip("/"))
        web = webs[0]
        place = args.web + args.crawlers  # after them, before the reflectors
        for shard in range(args.filters):
            for replica in range(args.filter_replicas):
                metrics = f"127.0.0.1:{_free_port('127.0.0.1')}"
                folder = f"filter-{shard}-of-{args.filters}" + (f"-r{replica}" if replica else "")
                role = _Role(f"filter {shard}/{args.filters}",
                             [*python, "filter", "--bus", url, "--state", state,
                              "--shard", f"{shard}/{args.filters}", "--data",
                              str(data / folder), "--metrics", metrics,
                              "--delivery", args.delivery, "--log-level", "warning",
                              *locks.flags("filter", authenticated_bus=secured)],
                             shard=f"{shard}/{args.filters}", metrics=f"http://{metrics}/metrics")
                roles.insert(place, role)
                place += 1
                role.wait_ready("feedmesh filter shard")
        if named:
            where = ["--store", store] if store else ["--data", str(data / "hub")]
            _map_by_locality(python, where, url, named, args, fresh=not mapped_before,
                             credentials=locks.flags("admin", authenticated_bus=secured))
        listing = {"pid": os.getpid(), "web": web, "webs": webs, "bus": url, "processes": [
            *nats_rows(servers),
            *([{"role": "postgres", "pid": postgres.pid,
                "address": f"{postgres.host}:{postgres.port}"}]
              if postgres is not None and postgres.pid is not None else []),

            *({"role": role.name.split()[0], "pid": role.process.pid, "state": RUNNING,
               "restarts": 0, **role.info} for role in roles)]}
        save = listing_saver(data / UP_FILE, listing)
        save()
        if args.republish:
            opmls = [role.info["mesh_opml"] for role in roles if "mesh_opml" in role.info]
            print(f"feedmesh up: republishing on the mesh (overlay ring through {ring}); "
                  f"peers follow any of {' '.join(opmls)}", file=sys.stderr, flush=True)
        others = f" (and {', '.join(w + '/' for w in webs[1:])})" if len(webs) > 1 else ""
        print(f"feedmesh up: web UI at {web}/{others}; {args.filters} filter and "
              f"{args.reflectors} reflector processes on {url}; "
              f"`feedmesh stats --up {data}` shows them; Ctrl-C or `feedmesh down --data {data}` "
              f"stops them", file=sys.stderr, flush=True)
        supervise(roles, listing["processes"][-len(roles):], stop, save)
        print("feedmesh up: stopping (the crawler drains first)", file=sys.stderr, flush=True)
        return 0
    except (RuntimeError, NatsServerError, LocalPostgresError, OSError, StoreError,
            SecretFileError) as exc:
        print(f"feedmesh up: {exc}", file=sys.stderr)
        return 2
    finally:
        for role in roles:  # the hub first: it drains what the others still hold
            role.stop()
        for server in servers:
            server.stop()
        if postgres is not None:
            postgres.stop()

        (data / UP_FILE).unlink(missing_ok=True)


def _reachable_by_others(data: Path) -> None:
    """As root, PostgreSQL runs as the ``postgres`` user: every folder above DATA must let
    others pass through, or its server cannot reach DATA/postgres."""
    for parent in data.parents:
        if not parent.stat().st_mode & 0o001:
            raise RuntimeError(
                f"PostgreSQL runs as the postgres user here (this is root), and {parent} does "
                f"not let other users pass through, so it cannot reach {data}/postgres: give a "
                "--data folder it can reach (under /tmp or /var/lib, say), or --store "
                "postgresql://... (or --store sqlite)")


def _create_state(folder: Path, store: str) -> None:
    """The hub's database, made (or migrated) before any process reads it."""
    if not store:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    open_hub_state(store or folder / "hub.db").close()


def down(data: str, timeout: float) -> int:
    listing = Path(data) / UP_FILE
    try:
        pid = int(json.loads(listing.read_text())["pid"])
    except (OSError, ValueError, KeyError) as exc:
        print(f"feedmesh down: no running topology in {data} ({listing}: {exc})",
              file=sys.stderr)
        return 2
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        print(f"feedmesh down: the topology's process {pid} is gone; removing {listing}",
              file=sys.stderr)
        listing.unlink(missing_ok=True)
        return 1
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or not listing.exists():
            print("feedmesh down: stopped", file=sys.stderr)
            return 0
        time.sleep(0.2)
    print(f"feedmesh down: still stopping after {timeout:.0f} s (pid {pid})",
          file=sys.stderr)
    return 1
