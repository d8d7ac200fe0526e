"""The feedmesh roles' PostgreSQL login: a role that owns the feedmesh database and nothing else,
its password in a libpq passfile (0600), never in a URL on a command line.

:func:`provision_app_role` is the set-up step, run with the superuser's connection (the only use
of the superuser): it makes or corrects the role (LOGIN, and NOSUPERUSER, NOCREATEDB,
NOCREATEROLE, NOREPLICATION, NOBYPASSRLS, member of no role: so no ``pg_execute_server_program``,
no ``pg_read_server_files``), gives it a fresh random password, makes the database it owns (so
the tables its migrations create are its own), closes the database to every other role and the
maintenance databases to it, and writes the passfile. The password is hashed here
(SCRAM-SHA-256, by libpq) before it is sent, so not even the server's log of a failed statement
holds it.

What it returns, a :class:`PgLogin`, gives the processes two ways to connect, neither with a
secret in it: :attr:`PgLogin.url` names the passfile in the URL itself (``?passfile=PATH``,
safe on a command line), or :attr:`PgLogin.url_without_passfile` with :attr:`PgLogin.env`
(``PGPASSFILE``) in the process's environment. libpq refuses to read a passfile that group or
others can read.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg import sql

from feedmesh.secret_file import write_secret

__all__ = ["APP_DATABASE", "APP_ROLE", "PgLogin", "passfile_line", "provision_app_role",
           "write_passfile"]

APP_ROLE = "feedmesh_app"
APP_DATABASE = "feedmesh"
_ROLE_ATTRIBUTES = ("LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS "
                    "INHERIT CONNECTION LIMIT -1")


@dataclass(frozen=True)
class PgLogin:
    """Where and as whom the feedmesh roles connect; the password is in ``passfile`` only."""

    host: str
    port: int
    database: str
    user: str
    passfile: Path

    @property
    def url_without_passfile(self) -> str:
        """The URL with neither password nor passfile (set :attr:`env` beside it)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"postgresql://{quote(self.user)}@{host}:{self.port}/{quote(self.database)}"

    @property
    def url(self) -> str:
        """The URL naming the passfile: holds no secret, so it may go on a command line."""
        return f"{self.url_without_passfile}?passfile={quote(str(self.passfile), safe='/')}"

    @property
    def env(self) -> dict[str, str]:
        """The environment that points libpq at the passfile."""
        return {"PGPASSFILE": str(self.passfile)}


def _escaped(field: str) -> str:
    """A passfile field: ``\\`` and ``:`` escaped with a backslash (libpq's rule)."""
    if "\n" in field or "\r" in field:
        raise ValueError("a passfile field cannot hold a line break")
    return field.replace("\\", "\\\\").replace(":", "\\:")


def passfile_line(host: str, port: int, database: str, user: str, password: str) -> str:
    """One line of a libpq passfile: ``host:port:database:user:password``."""
    return ":".join(_escaped(str(f)) for f in (host, port, database, user, password)) + "\n"


def write_passfile(path: str | Path, host: str, port: int, database: str, user: str,
                   password: str) -> Path:
    """A passfile of one line at ``path``, created 0600 (its folder 0700 when made)."""
    return write_secret(path, passfile_line(host, port, database, user, password).encode())


def provision_app_role(admin_url: str, *, passfile: str | Path, host: str, port: int,
                       database: str = APP_DATABASE, role: str = APP_ROLE) -> PgLogin:
    """Make (or put right) ``role`` and ``database`` through the superuser's ``admin_url``,
    with a fresh password written to ``passfile``; the login the processes use. Run again it
    changes the password (connections already open stay open)."""
    password = secrets.token_urlsafe(32)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        verifier = admin.pgconn.encrypt_password(password.encode(), role.encode(),
                                                 b"scram-sha-256").decode()
        exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        admin.execute(sql.SQL("{} ROLE {} " + _ROLE_ATTRIBUTES + " PASSWORD {}").format(
            sql.SQL("ALTER" if exists else "CREATE"), sql.Identifier(role),
            sql.Literal(verifier)))
        # Whatever it was granted since: pg_execute_server_program and its kind are roles
        for (granted,) in admin.execute(
                "SELECT r.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid "
                "JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = %s", (role,)).fetchall():
            admin.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(granted),
                                                               sql.Identifier(role)))
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                             (database,)).fetchone():
            admin.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(database), sql.Identifier(role)))
        admin.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
            sql.Identifier(database), sql.Identifier(role)))
        admin.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(
            sql.Identifier(database)))
        for maintenance in ("postgres", "template1"):
            if maintenance != database:
                admin.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC")
                              .format(sql.Identifier(maintenance)))
    login = PgLogin(host=host, port=port, database=database, user=role, passfile=Path(passfile))
    with psycopg.connect(_in_database(admin_url, database), autocommit=True) as admin:
        # PostgreSQL 15 gives PUBLIC no CREATE on `public`, but USAGE still
        admin.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
        admin.execute(sql.SQL("GRANT ALL ON SCHEMA public TO {}").format(sql.Identifier(role)))
    write_passfile(login.passfile, host, port, database, role, password)
    return login


def _in_database(url: str, database: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(url)
    params["dbname"] = database
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})
