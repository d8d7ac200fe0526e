"""The PostgreSQL server feedmesh starts, attacked as the hub's own role and as another user of
the machine would: the role the processes connect as owns its database and nothing else, its
password lives in a passfile 0600 (never a URL), and the server runs as its own user and group
with every file it and feedmesh write closed to others. One real server (tests/postgres.py's is
shared and stays as it is: this one is set up, provisioned and inspected)."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
import uuid
from pathlib import Path

import psycopg
import pytest

from feedmesh.store.pg_login import APP_ROLE, passfile_line
from feedmesh.store.pg_server import SERVER_USER, LocalPostgres
from feedmesh.store.postgres import PostgresStore
from feedmesh.store.postgres_hub import PostgresHubState
from feedmesh.store.postgres_owners import PostgresFeedOwnership
from feedmesh.store.postgres_reflector import PostgresReflectorLog


@pytest.fixture(scope="module")
def server():
    folder = Path(tempfile.mkdtemp(prefix="feedmesh-test-pg-lp-"))  # not pytest's 0700 tmp:
    folder.chmod(0o711)  # the server's user passes through (as `up` makes its folder)
    postgres = LocalPostgres(folder / "postgres", durable=False)
    secrets = folder / "secrets"
    try:
        postgres.start()
        login = postgres.app_login(secrets / "feedmesh.pgpass")
        yield postgres, login
    finally:
        postgres.stop()
        shutil.rmtree(folder, ignore_errors=True)


def app(login, **options) -> psycopg.Connection:
    return psycopg.connect(login.url, autocommit=True, connect_timeout=5, **options)


def test_the_login_holds_no_secret_and_connects_through_its_passfile(server, monkeypatch):
    postgres, login = server
    password = login.passfile.read_text().rsplit(":", 1)[1].strip()
    assert password not in login.url and password not in login.url_without_passfile
    assert postgres.password not in login.url
    assert login.url.startswith(f"postgresql://{APP_ROLE}@127.0.0.1:{postgres.port}/feedmesh?")
    with app(login) as conn:
        assert conn.execute("SELECT current_user, current_database()").fetchone() == (
            APP_ROLE, "feedmesh")
    monkeypatch.setenv("PGPASSFILE", login.env["PGPASSFILE"])
    with psycopg.connect(login.url_without_passfile, connect_timeout=5) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (APP_ROLE,)
    monkeypatch.delenv("PGPASSFILE")
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(login.url_without_passfile, connect_timeout=5, passfile="/nonexistent")


def test_the_app_role_has_no_power_beyond_its_database(server):
    _, login = server
    with app(login) as conn:
        row = conn.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls "
            "FROM pg_roles WHERE rolname = current_user").fetchone()
        assert row == (False, False, False, False, False)
        for power in ("pg_execute_server_program", "pg_read_server_files",
                      "pg_write_server_files", "pg_read_all_data", "pg_signal_backend"):
            assert conn.execute("SELECT pg_has_role(current_user, %s, 'MEMBER')",
                                (power,)).fetchone() == (False,), power
        assert conn.execute("SELECT datdba::regrole::text FROM pg_database WHERE "
                            "datname = 'feedmesh'").fetchone() == (APP_ROLE,)


@pytest.mark.parametrize(("statement", "sqlstate"), [
    # commands run as the server's account: the attack the issue found
    ("COPY (SELECT 1) TO PROGRAM 'touch {marker}'", "42501"),
    ("COPY (SELECT 1) TO '{marker}'", "42501"),
    ("SELECT rolname, rolpassword FROM pg_authid", "42501"),
    ("SELECT pg_read_file('/etc/passwd')", "42501"),
    ("CREATE DATABASE feedmesh_other", "42501"),
    ("CREATE ROLE feedmesh_other LOGIN", "42501"),
    (f"ALTER ROLE {APP_ROLE} SUPERUSER", "42501"),
    ("ALTER SYSTEM SET log_statement = 'all'", "42501"),
    ("CREATE EXTENSION IF NOT EXISTS adminpack", "42501"),
])
def test_the_app_role_cannot(server, statement, sqlstate):
    _, login = server
    marker = Path(tempfile.gettempdir()) / f"feedmesh-pwned-{uuid.uuid4().hex}"
    with app(login) as conn, pytest.raises(psycopg.Error) as refused:
        conn.execute(statement.format(marker=marker))
    assert refused.value.sqlstate == sqlstate, refused.value
    assert not marker.exists()


def test_the_app_role_reaches_no_other_database(server):
    postgres, login = server
    password = login.passfile.read_text().rsplit(":", 1)[1].strip()

    def elsewhere(database: str) -> None:
        base = login.url_without_passfile.rsplit("/", 1)[0]
        psycopg.connect(f"{base}/{database}", password=password, connect_timeout=5).close()

    for database in ("postgres", "template1"):
        with pytest.raises(psycopg.OperationalError, match=r"pg_hba\.conf rejects"):
            elsewhere(database)
    with psycopg.connect(postgres.url(), autocommit=True) as admin:
        admin.execute("CREATE DATABASE feedmesh_elsewhere")
    try:
        with pytest.raises(psycopg.OperationalError, match=r"pg_hba\.conf rejects"):
            elsewhere("feedmesh_elsewhere")  # made later, by someone else: not its own
    finally:
        with psycopg.connect(postgres.url(), autocommit=True) as admin:
            admin.execute("DROP DATABASE feedmesh_elsewhere")


def test_the_stores_migrate_as_the_app_role_and_it_owns_what_they_make(server):
    postgres, login = server
    for opener in (PostgresStore, PostgresHubState, PostgresReflectorLog, PostgresFeedOwnership):
        opener(login.url).close()
    with psycopg.connect(postgres.url("feedmesh")) as admin:
        owners = admin.execute(
            "SELECT c.relname, c.relowner::regrole::text FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = 'public'").fetchall()
        functions = admin.execute(
            "SELECT p.proname, p.proowner::regrole::text FROM pg_proc p JOIN pg_namespace n "
            "ON n.oid = p.pronamespace WHERE n.nspname = 'public'").fetchall()
    assert {"feeds", "entries", "subscriptions", "hub_keys", "reflector_items",
            "feed_owners"} <= {name for name, _ in owners}
    assert {owner for _, owner in owners + functions} == {APP_ROLE}


def test_provisioning_again_gives_a_new_password_and_takes_back_what_was_granted(server,
                                                                                 tmp_path):
    postgres, login = server
    old = tmp_path / "old.pgpass"
    shutil.copy(login.passfile, old)
    old.chmod(0o600)
    with psycopg.connect(postgres.url(), autocommit=True) as admin:
        admin.execute(f"GRANT pg_execute_server_program TO {APP_ROLE}")
        admin.execute(f"ALTER ROLE {APP_ROLE} CREATEDB")
    again = postgres.app_login(login.passfile)
    with app(again) as conn:
        assert conn.execute("SELECT rolcreatedb, pg_has_role(current_user, "
                            "'pg_execute_server_program', 'MEMBER') FROM pg_roles WHERE "
                            "rolname = current_user").fetchone() == (False, False)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(login.url_without_passfile, passfile=str(old), connect_timeout=5)


def test_a_passfile_others_can_read_is_not_used(server, tmp_path):
    _, login = server
    assert stat.S_IMODE(login.passfile.stat().st_mode) == 0o600
    assert stat.S_IMODE(login.passfile.parent.stat().st_mode) == 0o700
    loose = tmp_path / "loose.pgpass"
    shutil.copy(login.passfile, loose)
    loose.chmod(0o644)  # libpq ignores it, with a warning
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(login.url_without_passfile, passfile=str(loose), connect_timeout=5)


def test_passfile_fields_are_escaped():
    assert passfile_line("h", 5432, "d:b", "u\\1", "p:w") == "h:5432:d\\:b:u\\\\1:p\\:w\n"
    with pytest.raises(ValueError, match="line break"):
        passfile_line("h", 1, "d", "u", "p\nq")


def test_every_file_of_the_server_is_closed_to_others(server):
    postgres, login = server
    app_password = login.passfile.read_text().rsplit(":", 1)[1].strip()
    for secret in (postgres.password, app_password):  # what every user reads: no password
        assert secret.encode() not in Path(f"/proc/{postgres.pid}/cmdline").read_bytes()
        assert secret not in postgres.log_path.read_text(errors="replace")
    assert stat.S_IMODE(postgres.folder.stat().st_mode) == 0o700
    opened = []
    for root, folders, files in os.walk(postgres.folder):
        for name in folders:
            mode = stat.S_IMODE(os.lstat(Path(root, name)).st_mode)
            if mode & 0o077:
                opened.append((Path(root, name), oct(mode)))
        for name in files:
            mode = stat.S_IMODE(os.lstat(Path(root, name)).st_mode)
            if mode & 0o077:
                opened.append((Path(root, name), oct(mode)))
    assert opened == []
    assert any(p.name.startswith(".s.PGSQL.") for p in postgres.folder.iterdir())  # socket seen
    hba = (postgres.data_dir / "pg_hba.conf").read_text()
    assert "trust" not in hba and "md5" not in hba and "password " not in hba
    assert 'host    all              "feedmesh_app"       all          reject' in hba


@pytest.mark.skipif(os.geteuid() != 0, reason="the server runs as this user when not root")
def test_the_server_runs_as_its_own_user_and_group(server):
    postgres, login = server
    user = pwd.getpwnam(SERVER_USER)
    with app(login) as conn:  # a backend too, not only the postmaster
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for pid in (postgres.pid, backend):
            status = dict(line.split(":", 1) for line in
                          Path(f"/proc/{pid}/status").read_text().splitlines())
            assert status["Uid"].split() == [str(user.pw_uid)] * 4, pid
            assert status["Gid"].split() == [str(user.pw_gid)] * 4, pid  # not group root
            assert status["Groups"].split() in ([], [str(user.pw_gid)]), pid
    for owned in (postgres.folder, postgres.data_dir, postgres.data_dir / "pg_hba.conf"):
        assert owned.stat().st_uid == user.pw_uid, owned
    # what the server never needs again is not its user's
    assert (postgres.folder / "password").stat().st_uid == 0
    assert login.passfile.stat().st_uid == 0
