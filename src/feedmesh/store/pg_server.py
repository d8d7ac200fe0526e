"""A real PostgreSQL server of our own, in a folder: what the tests start when no
``FEEDMESH_TEST_POSTGRES`` URL is given, and what ``feedmesh up`` starts when it is given no
``postgresql://`` URL.

``LocalPostgres(folder).start()`` runs Debian's (or any) ``initdb`` into ``folder/data`` the
first time, then ``postgres`` listening on ``127.0.0.1`` (or the address given) on a free port,
its Unix socket in ``folder`` too; :attr:`LocalPostgres.url` is where to connect; :meth:`stop`
shuts it down cleanly (a *fast* shutdown: open sessions are ended, committed work is on disk).
The data folder stays: starting again on the same folder serves the same databases.

PostgreSQL refuses to run as root. When this process is root, the server runs as the
``postgres`` system user with its own group and no other (Debian's package creates both; group
root is never kept), and the folder is handed to that user.

Access: the ``feedmesh`` superuser's random password is kept in ``folder/password`` (0600); it is
for set-up only (:meth:`LocalPostgres.url`, never a command line): :meth:`LocalPostgres.app_login`
makes the role the processes connect as, owner of the feedmesh database and nothing else, its
password in a passfile (:mod:`.pg_login`). ``pg_hba.conf`` is ours, rewritten at each start: the
superuser only from this machine (the Unix socket, loopback), every other role anywhere the
server listens, ``scram-sha-256`` always; the Unix socket is 0700 in a folder 0700, the log
0600; nothing listens beyond the address given.
``durable=False`` turns off fsync and full-page writes: for throw-away test servers only, where
a power cut is not a concern and speed is.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Self

import psycopg

from feedmesh import environment
from feedmesh.errors import FeedmeshError
from feedmesh.secret_file import SecretFileError
from feedmesh.store.pg_login import (
    APP_DATABASE,
    APP_ROLE,
    PgLogin,
    provision_app_role,
    write_passfile,
)

__all__ = ["LocalPostgres", "LocalPostgresError", "find_bindir"]

SUPERUSER = "feedmesh"
SERVER_USER = "postgres"
"""The system user the server runs as when this process is root."""


def hba(app_role: str, app_database: str) -> str:
    """``pg_hba.conf``: the superuser from this machine only; the app role to its own database
    only (a database made later gives PUBLIC ``CONNECT``: this keeps it out all the same); any
    other role wherever the server listens; ``scram-sha-256`` for every connection."""
    return f"""# Written by feedmesh at each start (store/pg_server.py): edits are replaced.
local   all              {SUPERUSER}                     scram-sha-256
host    all              {SUPERUSER}        samehost     scram-sha-256
host    all              {SUPERUSER}        all          reject
local   "{app_database}"  "{app_role}"                 scram-sha-256
host    "{app_database}"  "{app_role}"       all          scram-sha-256
local   all              "{app_role}"                 reject
host    all              "{app_role}"       all          reject
local   all              all                          scram-sha-256
host    all              all                all          scram-sha-256
"""


class LocalPostgresError(FeedmeshError):
    """The server could not be set up, started or stopped (the message says which and why)."""


def find_bindir() -> Path:
    """The folder holding ``initdb`` and ``postgres``: ``$FEEDMESH_PG_BINDIR``, else the newest
    ``/usr/lib/postgresql/<version>/bin`` (Debian), else the one of ``initdb`` on ``PATH``."""
    given = environment.get("FEEDMESH_PG_BINDIR") or None
    candidates = [Path(given)] if given else []
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                      key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit()
                      else 0, reverse=True)
    candidates += [Path(p) for p in versions]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "postgres").exists():
            return folder
    raise LocalPostgresError(
        "no PostgreSQL server binaries found (looked in $FEEDMESH_PG_BINDIR, "
        "/usr/lib/postgresql/*/bin and PATH): install Debian's `postgresql` package "
        "(scripts/apt-test-packages) or give a postgresql:// URL")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class LocalPostgres:
    """One PostgreSQL server whose files live in ``folder``."""

    def __init__(self, folder: str | Path, *, host: str = "127.0.0.1", port: int | None = None,
                 durable: bool = True, bindir: str | Path | None = None,
                 app_role: str = APP_ROLE, app_database: str = APP_DATABASE) -> None:
        if not all(re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name)
                   for name in (app_role, app_database)):
            raise LocalPostgresError(f"role {app_role!r}, database {app_database!r}: use "
                                     "lower-case letters, digits and '_'")
        self.folder = Path(folder).resolve()
        self.app_role = app_role
        self.app_database = app_database
        self.host = host
        self.port = port
        self.durable = durable
        self.bindir = Path(bindir) if bindir else None
        self._process: subprocess.Popen | None = None
        self._as_user = SERVER_USER if os.geteuid() == 0 else None

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    @property
    def log_path(self) -> Path:
        return self.folder / "postgres.log"

    @property
    def password(self) -> str:
        return (self.folder / "password").read_text().strip()

    def url(self, database: str = "postgres") -> str:
        """The superuser's URL of ``database`` on this server (running), password included:
        for set-up within this process only, never a command line or a file
        (:meth:`superuser_login` gives one that may go there)."""
        if self.port is None:
            raise LocalPostgresError(f"the PostgreSQL server in {self.folder} is not started")
        return (f"postgresql://{SUPERUSER}:{self.password}@{self.host}:{self.port}/{database}")

    @property
    def pid(self) -> int | None:
        """The server's (postmaster's) process id while it runs."""
        if self._process is None or self._process.poll() is not None:
            return None
        return self._process.pid

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> Self:
        """Initialize the folder when needed, start the server and wait until it accepts
        connections; returns self."""
        if self._process is not None:
            return self
        bindir = self.bindir or find_bindir()
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._hand_over(self.folder)
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb(bindir)
        self._write_hba()
        port = self.port or _free_port(self.host)
        settings = {
            "listen_addresses": self.host,
            "port": str(port),
            "unix_socket_directories": str(self.folder),
            "unix_socket_permissions": "0700",
            "max_connections": "200",
            "shared_buffers": "64MB",
        }
        if not self.durable:
            settings |= {"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"}
        command = [str(bindir / "postgres"), "-D", str(self.data_dir)]
        for name, value in settings.items():
            command += ["-c", f"{name}={value}"]
        log = self._open_log()
        try:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True,
                                             **self._identity())
        except OSError as exc:
            raise LocalPostgresError(f"cannot run {command[0]}: {exc}") from exc
        finally:
            log.close()
        self.port = port
        self._wait_ready(timeout)
        return self

    def _server_user(self) -> pwd.struct_passwd | None:
        """The system user the server runs as (None: this process's own)."""
        if self._as_user is None:
            return None
        try:
            return pwd.getpwnam(self._as_user)
        except KeyError as exc:
            raise LocalPostgresError(
                f"running as root, PostgreSQL needs the system user {self._as_user!r} "
                "(Debian's postgresql package creates it)") from exc

    def _identity(self) -> dict[str, object]:
        """What ``subprocess`` needs to run a server program as the server's user: its own
        group and no supplementary one (never root's group 0)."""
        user = self._server_user()
        if user is None:
            return {}
        return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [],
                "env": {**os.environ, "HOME": user.pw_dir, "USER": user.pw_name,
                        "LOGNAME": user.pw_name}}

    def _hand_over(self, path: Path, mode: int = 0o700) -> None:
        """As root, the folder must belong to the server's user (and nobody else)."""
        user = self._server_user()
        if user is not None:
            os.chown(path, user.pw_uid, user.pw_gid)
        path.chmod(mode)

    def _open_log(self):  # type: ignore[no-untyped-def]
        """The server's log, for appending, 0600 (whatever the umask): it names roles,
        databases and statements that failed. The server writes it through the descriptor
        it inherits, so the file stays this process's."""
        descriptor = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(descriptor, 0o600)
        return os.fdopen(descriptor, "ab")

    def _write_hba(self) -> None:
        path = self.data_dir / "pg_hba.conf"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w") as f:
            f.write(hba(self.app_role, self.app_database))
        self._hand_over(path, 0o600)

    def _initdb(self, bindir: Path) -> None:
        password_file = self.folder / "password"
        descriptor = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as f:
            f.write(secrets.token_urlsafe(24) + "\n")
        self._hand_over(password_file, 0o600)  # initdb, as the server's user, reads it
        command = [str(bindir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER,
                   "--auth=scram-sha-256", f"--pwfile={password_file}", "-E", "UTF8",
                   "--locale=C.UTF-8"]
        if not self.durable:
            command.append("--no-sync")
        done = subprocess.run(command, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, check=False, **self._identity())
        # the server never needs its superuser's password again: only its owner reads it
        os.chown(password_file, os.geteuid(), os.getegid())
        if done.returncode != 0:
            raise LocalPostgresError(f"initdb into {self.data_dir} failed "
                                     f"(exit {done.returncode}): {done.stderr.strip()[-2000:]}")

    def superuser_login(self, passfile: str | Path, database: str = "postgres") -> PgLogin:
        """The superuser's login with its password in ``passfile`` (0600; every database of
        this server), whose :attr:`~PgLogin.url` holds no secret: for the tests' and
        benchmarks' own processes, which set up schemas the app role may not (running
        server). A feedmesh role should connect as :meth:`app_login` instead."""
        if self.port is None:
            raise LocalPostgresError(f"the PostgreSQL server in {self.folder} is not started")
        try:
            write_passfile(passfile, self.host, self.port, "*", SUPERUSER, self.password)
        except SecretFileError as exc:
            raise LocalPostgresError(f"cannot write the passfile {passfile}: {exc}") from exc
        return PgLogin(self.host, self.port, database, SUPERUSER, Path(passfile))

    def app_login(self, passfile: str | Path) -> PgLogin:
        """Make the app role, owner of the app database and nothing else, with a fresh
        password in ``passfile`` (0600): how the feedmesh processes connect (running
        server)."""
        role, database = self.app_role, self.app_database
        if self.port is None:
            raise LocalPostgresError(f"the PostgreSQL server in {self.folder} is not started")
        try:
            return provision_app_role(self.url(), passfile=passfile, host=self.host,
                                      port=self.port, database=database, role=role)
        except (psycopg.Error, SecretFileError) as exc:
            raise LocalPostgresError(f"cannot set up the role {role!r} and database "
                                     f"{database!r} in {self.folder}: {exc}") from exc

    def _wait_ready(self, timeout: float) -> None:
        """Until a connection succeeds; fails early when the server exits."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise LocalPostgresError(f"postgres exited ({code}) while starting: "
                                         f"{self._log_tail()}")
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return
            except psycopg.OperationalError as exc:
                last = exc
                time.sleep(0.05)
        self.stop()
        raise LocalPostgresError(f"postgres in {self.folder} did not accept connections within "
                                 f"{timeout:.0f} s ({last}): {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:].strip()
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 30.0) -> None:
        """A fast shutdown (SIGINT): sessions are ended, the server checkpoints and exits."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGQUIT)  # immediate shutdown: recovery at next start
            process.wait(timeout)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
