"""`feedmesh up` attacked as another user of the same machine would (issue 31): every secret of
the running hub (the PostgreSQL passwords, each role's NATS seed, the reflectors' token) is
looked for on every command line of the machine and found on none; its files are 0600 and its
folders 0700; a NATS client without credentials is refused and the crawler's key cannot forge a
match; the roles' PostgreSQL login can neither run a program as the server's account nor reach
another database; the reflector API answers 401 without the token. And, with `--nats-cluster
3`, kill -9 of a NATS node mid-run loses and doubles nothing while the hub keeps matching.

Not in pytest's folders: up starts a PostgreSQL of its own in DATA/postgres, and as root its
server's user must pass through every folder above."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import stat
import tempfile
from pathlib import Path

import aiohttp
import nats
import psycopg
import pytest

from feedmesh.bus import BusError
from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.store.pg_login import APP_ROLE
from tests.eventually import eventually
from tests.hub.test_distributed_faults import crawled, held, oracle, subscriptions
from tests.postgres import postgres_server, postgres_url  # noqa: F401 - fixtures
from tests.upprocess import running_up

from .test_up import ORIGIN, feedmesh


def listing(data: Path) -> dict:
    return json.loads((data / "up.json").read_text())


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # ended meanwhile
        return b""


def every_cmdline() -> dict[int, bytes]:
    """What every user of this machine reads: each process's command line."""
    return {int(p.name): cmdline(int(p.name)) for p in Path("/proc").iterdir()
            if p.name.isdigit()}


def role_argv(data: Path, role: str) -> list[str]:
    pid = next(p["pid"] for p in listing(data)["processes"] if p["role"] == role)
    return cmdline(pid).decode().split("\0")


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def secrets_of(data: Path) -> dict[str, bytes]:
    """Every secret of the running hub, as it is written in its files."""
    found = {"postgres superuser": (data / "postgres" / "password").read_bytes().strip(),
             "app login": (data / "secrets" / "feedmesh.pgpass").read_bytes().strip()
             .rsplit(b":", 1)[1],
             "reflector token": (data / "secrets" / "reflector.token").read_bytes().strip()}
    for seed in (data / "secrets" / "nats").glob("*.nk"):
        found[f"nats seed {seed.stem}"] = seed.read_bytes().strip()
    assert all(len(value) >= 32 for value in found.values()), found
    return found


def open_to_others(data: Path) -> list[str]:
    """Files under ``data`` that group or others may use at all, and folders they may list
    or write (DATA itself may let others pass through, as root, for the postgres user)."""
    out = []
    for path in [data, *data.rglob("*")]:
        try:
            if path.is_symlink():
                continue
            info = path.lstat()
        except FileNotFoundError:  # a server's temporary file, gone since the listing
            continue
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISDIR(info.st_mode):
            allowed = 0o011 if path == data else 0
            if mode & 0o077 & ~allowed:
                out.append(f"{path} {mode:04o}")
        elif mode & 0o077:
            out.append(f"{path} {mode:04o}")
    return out


async def test_up_keeps_its_secrets_off_command_lines_and_its_bus_and_database_locked():
    data = Path(tempfile.mkdtemp(prefix="feedmesh-test-up-locked-"))
    config = FarmConfig(feeds=6, seed=3, faults="none", speed=3600.0, origin=ORIGIN)
    async with FarmServer(config) as farm, aiohttp.ClientSession() as session, running_up(
            "--data", str(data), "--filters", "1", "--reflectors", "1", "--web", "1",
            "--port", "0", "--opml", farm.opml_url, "--allow-network", "127.0.0.0/8",
            timeout=150) as up:
        web = up.web
        # The hub works under its locks: an account's subscription fills (crawler -> filter
        # -> reflector over the authenticated bus, the web asking the reflector with its token)
        async with session.post(f"{web}/api/accounts", json={"name": "ann"}) as answer:
            token = (await answer.json())["token"]
        auth = {"Authorization": f"Bearer {token}"}
        async with session.post(f"{web}/api/subscriptions", headers=auth,
                                json={"query": "people OR time OR world"}) as answer:
            assert answer.status == 201, await answer.text()
            sub = (await answer.json())["subscription"]["id"]

        async def filled() -> bool:
            async with session.get(f"{web}/api/subscriptions/{sub}/entries",
                                   headers=auth) as answer:
                body = await answer.json()
                assert answer.status == 200, body
                return len(body["entries"]) >= 3

        await eventually(filled, timeout=120, interval=0.5)

        # 1. No secret on any command line of the machine (the roles', PostgreSQL's, NATS's)
        secrets = secrets_of(data)
        lines = every_cmdline()
        roles = {p["pid"] for p in listing(data)["processes"]}
        assert roles <= set(lines)
        leaks = [(name, pid) for pid, line in lines.items() for name, value in secrets.items()
                 if value in line]
        assert not leaks, leaks
        crawler = role_argv(data, "crawler")
        store = flag(crawler, "--store")
        assert store.startswith(f"postgresql://{APP_ROLE}@127.0.0.1:") and "passfile=" in store
        assert flag(crawler, "--bus-credentials").endswith("/crawler.nk")
        assert flag(role_argv(data, "reflector"), "--token-file").endswith("/reflector.token")

        # 5. up's files 0600, its folders 0700
        assert not open_to_others(data), open_to_others(data)
        for path in ("up.json", "nats/nats.conf", "nats/nats-server.log",
                     "secrets/reflector.token", "secrets/nats/crawler.nk"):
            assert stat.S_IMODE((data / path).stat().st_mode) == 0o600, path
        assert stat.S_IMODE((data / "nats").stat().st_mode) == 0o700

        # 3. NATS: no credentials, no entry; the crawler's key publishes no match
        bus = listing(data)["bus"]
        with pytest.raises(BusError, match="Authorization Violation"):
            await JetStreamBus.connect(bus, connect_timeout=10)
        with pytest.raises(nats.errors.Error):
            await nats.connect(bus, allow_reconnect=False, connect_timeout=5)
        as_crawler = await JetStreamBus.connect(bus, connect_timeout=10,
                                                credentials=data / "secrets/nats/crawler.nk")
        try:
            with pytest.raises(BusError, match=r"refused publishing to matches\.0"):
                await as_crawler.publish("matches.0", b"a forged match")
            assert await as_crawler.last_seq("articles") > 0  # what it did publish
        finally:
            await as_crawler.close()

        # 2. The roles' PostgreSQL login: its own database, nothing more
        with psycopg.connect(store, autocommit=True, connect_timeout=5) as conn:
            assert conn.execute("SELECT current_user, rolsuper FROM pg_roles WHERE "
                                "rolname = current_user").fetchone() == (APP_ROLE, False)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("COPY (SELECT 1) TO PROGRAM 'id'")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT pg_read_file('/etc/passwd')")
        for other in ("postgres", "template1"):
            with pytest.raises(psycopg.OperationalError):
                psycopg.connect(store.replace("/feedmesh?", f"/{other}?"), connect_timeout=5)

        # 4. The reflector API: 401 without the token, 200 with it
        reflector = f"http://{flag(role_argv(data, 'reflector'), '--listen')}"
        async with session.get(f"{reflector}/reflector/v1/feeds/{sub}/items") as answer:
            assert answer.status == 401
        bearer = {"Authorization": f"Bearer {secrets['reflector token'].decode()}"}
        async with session.get(f"{reflector}/reflector/v1/feeds/{sub}/items",
                               headers=bearer) as answer:
            assert answer.status == 200, await answer.text()

        code, out, err = await feedmesh("stats", "--up", str(data), "--json")  # with the token
        assert code == 0, err
        rows = {row["role"]: row for row in json.loads(out)}
        assert rows["reflector"]["queue_messages"] is not None
        code, _, err = await feedmesh("down", "--data", str(data))
        assert code == 0, err
        assert await asyncio.wait_for(up.process.wait(), 120) == 0
    assert "Traceback" not in up.text(), up.text()
    shutil.rmtree(data, ignore_errors=True)


async def stream_leader(admin: JetStreamBus, stream: str) -> str | None:
    try:
        info = await admin._js.stream_info(stream)
    except nats.errors.Error:  # 'stream not found' (10059) or no answer, while one is elected
        return None
    return info.cluster.leader if info.cluster else None


@pytest.mark.slow
async def test_up_on_a_nats_cluster_loses_and_doubles_nothing_when_a_node_is_killed(
        postgres_url):  # noqa: F811 - the fixture
    data = Path(tempfile.mkdtemp(prefix="feedmesh-test-up-cluster-"))
    subs = subscriptions(postgres_url)  # two accounts, one per reflector, every query each
    config = FarmConfig(feeds=20, seed=5, faults="none", speed=3600.0, origin=ORIGIN)
    async with FarmServer(config) as farm, running_up(
            "--data", str(data), "--store", postgres_url, "--nats-cluster", "3",
            "--filters", "1", "--reflectors", "2", "--web", "1", "--port", "0",
            "--crawl-interval", "0.5", "--opml", farm.opml_url,
            "--allow-network", "127.0.0.0/8", timeout=120) as up:
        nodes = {p["node"]: p for p in listing(data)["processes"] if p["role"] == "nats"}
        assert len(nodes) == 3
        assert len({p["address"].split(":")[1] for p in nodes.values()}) == 3  # 127.0.0.1-3
        admin = await JetStreamBus.connect(listing(data)["bus"], connect_timeout=10,
                                           credentials=data / "secrets/nats/admin.nk")
        try:
            info = await admin._js.stream_info("feedmesh_articles")
            assert info.config.num_replicas == 3
            await crawled(postgres_url, more=10)  # matching under way
            victim = await eventually(lambda: stream_leader(admin, "feedmesh_articles"),
                                      what="the articles stream's leader")
            os.kill(nodes[victim]["pid"], signal.SIGKILL)  # mid-run
            # the stream's leader moves, the hub goes on crawling and matching
            await eventually(lambda: _other_leader(admin, victim), timeout=30,
                             what="a new leader")
            await crawled(postgres_url, more=20)
        finally:
            await admin.close()
        code, _, err = await feedmesh("down", "--data", str(data))
        assert code == 0, err
        assert await asyncio.wait_for(up.process.wait(), 120) == 0
    assert "Traceback" not in up.text(), up.text()
    # Offline: every stored entry re-matched against every subscription must be held by the
    # subscription's reflector, once.
    truth = oracle(postgres_url, subs)
    assert truth.twice == 0
    lost = doubled = 0
    for reflector in (0, 1):
        for sub_id, pairs in held(postgres_url, reflector, subs).items():
            ids = [entry_id for entry_id, _ in pairs]
            doubled += len(ids) - len(set(ids))
            lost += len(truth.want[sub_id] - set(ids))
    pairs = sum(len(w) for w in truth.want.values())
    print(f"nats_node_kill_lost={lost} nats_node_kill_duplicated={doubled} pairs={pairs} "
          f"(node {victim} killed)")
    assert pairs > 100  # worth checking
    assert (lost, doubled) == (0, 0)
    shutil.rmtree(data, ignore_errors=True)


async def _other_leader(admin: JetStreamBus, victim: str) -> bool:
    found = await stream_leader(admin, "feedmesh_articles")
    return found is not None and found != victim
