"""A throwaway PostgreSQL cluster on loopback, or an existing server.

``initdb`` refuses to run as root, so when this runs as root every server
command runs as the ``postgres`` OS user (``runuser``), in a temporary directory
that user owns. The cluster listens on 127.0.0.1 on a free port, with password
(SCRAM) authentication: each tool logs in as its own user, so the GRANTs in
``sql/grants.sql`` are really enforced.

The SQL runs as an RDS-style master, never as a superuser, because that is what
the deployed custom resource and ``scripts/grants.sh`` run as on Aurora: a
bootstrap superuser (named ``rdsadmin``, as on RDS) only creates the master
``cadencia_admin`` (LOGIN CREATEROLE CREATEDB, not SUPERUSER), the pre-existing
``rds_iam`` role (granted to the master WITH ADMIN OPTION, as RDS lets its master
grant it) and the database, owned by the master. Its password is thrown away.
A script that needs superuser powers therefore fails here as it would on RDS
(measured: ``DROP OWNED BY`` without membership in the role).

Set ``CADENCIA_PG_DSN`` to an admin DSN of an existing server to use it instead
(schema, grants and demo data are applied to the database the DSN names).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo, sql

from cadencia_shared.catalog import DATABASE_NAME, DB_USERS

from .layer_guard import refuse_when_forbidden

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
SETUP_SCRIPTS = ("schema.sql", "grants.sql", "demo.sql")
ADMIN_USER = "cadencia_admin"
BOOTSTRAP_SUPERUSER = "rdsadmin"


@dataclass
class PostgresInfo:
    host: str
    port: int
    dbname: str
    admin_user: str
    admin_password: str
    users: dict[str, str] = field(default_factory=dict)  # db user (tools, reconciler) -> local password
    data_dir: str | None = None  # None when the server is external
    bin_dir: str | None = None

    @property
    def external(self) -> bool:
        return self.data_dir is None

    def admin_conninfo(self, dbname: str | None = None) -> str:
        return conninfo.make_conninfo(
            host=self.host, port=self.port, dbname=dbname or self.dbname,
            user=self.admin_user, password=self.admin_password, connect_timeout=5,
        )

    def user_conninfo(self, user: str) -> str:
        return conninfo.make_conninfo(
            host=self.host, port=self.port, dbname=self.dbname, user=user,
            password=self.users[user], connect_timeout=5,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_bin_dir() -> str:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    for c in candidates:
        if os.path.exists(os.path.join(c, "initdb")):
            return c
    initdb = shutil.which("initdb")
    if initdb:
        return os.path.dirname(os.path.realpath(initdb))
    raise RuntimeError("PostgreSQL server binaries not found: run scripts/setup.sh (installs 'postgresql')")


def _as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(_as_server_user(cmd), capture_output=True, text=True)
    if proc.returncode != 0:
        output = proc.stderr.strip() or proc.stdout.strip()
        raise RuntimeError(f"{' '.join(cmd[:2])} failed ({proc.returncode}): {output}")


def start_cluster() -> PostgresInfo:
    refuse_when_forbidden("PostgreSQL cluster start")
    bin_dir = find_bin_dir()
    base = Path(tempfile.mkdtemp(prefix="cadencia-pg-"))
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(base, pw.pw_uid, pw.pw_gid)
    password = secrets.token_urlsafe(18)
    pwfile = base / "pwfile"
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        os.chown(pwfile, pw.pw_uid, pw.pw_gid)
    data = base / "data"
    _run([
        f"{bin_dir}/initdb", "-D", str(data), "-U", BOOTSTRAP_SUPERUSER, f"--pwfile={pwfile}",
        "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale", "--no-sync",
    ])
    pwfile.unlink()
    port = free_port()
    options = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={base} -c fsync=off"
    info = PostgresInfo(
        host="127.0.0.1", port=port, dbname=DATABASE_NAME, admin_user=ADMIN_USER,
        admin_password=secrets.token_urlsafe(18), data_dir=str(data), bin_dir=bin_dir,
    )
    try:
        _run([f"{bin_dir}/pg_ctl", "-D", str(data), "-l", str(base / "server.log"), "-o", options, "-w", "-t", "30",
              "start"])
        _create_rds_style_master(info, bootstrap_password=password)
    except BaseException:  # the server may be up already (a failure or a Ctrl-C after its start): stop it
        subprocess.run(_as_server_user([f"{bin_dir}/pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"]),
                       capture_output=True)
        raise
    return info


def _create_rds_style_master(info: PostgresInfo, *, bootstrap_password: str) -> None:
    """What RDS does before handing a cluster over: the master, rds_iam, the database."""
    bootstrap = conninfo.make_conninfo(host=info.host, port=info.port, dbname="postgres", user=BOOTSTRAP_SUPERUSER,
                                       password=bootstrap_password, connect_timeout=5)
    with psycopg.connect(bootstrap, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEROLE CREATEDB NOSUPERUSER PASSWORD {}").format(
            sql.Identifier(info.admin_user), sql.Literal(info.admin_password)))
        conn.execute("CREATE ROLE rds_iam NOLOGIN")
        conn.execute(sql.SQL("GRANT rds_iam TO {} WITH ADMIN OPTION").format(sql.Identifier(info.admin_user)))
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(info.dbname), sql.Identifier(info.admin_user)))
        # The bootstrap superuser can no longer log in over TCP: nothing local keeps a superuser path.
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD NULL").format(sql.Identifier(BOOTSTRAP_SUPERUSER)))


def external_from_dsn(dsn: str) -> PostgresInfo:
    params = conninfo.conninfo_to_dict(dsn)
    return PostgresInfo(
        host=str(params.get("host", "127.0.0.1")), port=int(params.get("port", 5432)),
        dbname=str(params.get("dbname", DATABASE_NAME)), admin_user=str(params.get("user", "postgres")),
        admin_password=str(params.get("password", "")),
    )


def apply_sql(info: PostgresInfo, scripts: tuple[str, ...] = SETUP_SCRIPTS) -> None:
    """Create the database if needed, apply the SQL files, set local passwords."""
    if not info.external:
        with psycopg.connect(info.admin_conninfo("postgres"), autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (info.dbname,)).fetchone() is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(info.dbname)))
    with psycopg.connect(info.admin_conninfo(), autocommit=True) as conn:
        for name in scripts:
            conn.execute((SQL_DIR / name).read_text())
        # Local only: in AWS these users have no password and log in with IAM tokens.
        for db_user in DB_USERS:
            password = info.users.get(db_user) or secrets.token_urlsafe(18)
            info.users[db_user] = password
            conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(db_user), sql.Literal(password))
            )


def stop_cluster(info: PostgresInfo) -> None:
    if info.external or not info.data_dir:
        return
    data = Path(info.data_dir)
    if (data / "postmaster.pid").exists():
        _run([f"{info.bin_dir}/pg_ctl", "-D", str(data), "-m", "fast", "-w", "-t", "30", "stop"])
    shutil.rmtree(data.parent, ignore_errors=True)
