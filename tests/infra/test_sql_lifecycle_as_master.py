"""The whole SQL lifecycle as an RDS-style master, never a superuser.

On RDS/Aurora the master (``cadencia_admin``) has LOGIN, CREATEROLE and CREATEDB
and is not a superuser; ``rds_iam`` exists before anything runs. The local
cluster (scripts/local_stack/postgres.py) is set up the same way, and these tests
replay what the custom resource and ``scripts/grants.sh`` do on a real cluster:
schema, grants (twice), revoke (twice), grants again, on real PostgreSQL.
"""

from __future__ import annotations

import psycopg
import pytest

from cadencia_shared.catalog import TOOLS
from infra.db_users import sql_statements
from tests.test_db_privileges import CONTRACT, catalog_privileges, differences

USERS = sorted(t.db_user for t in TOOLS.values())


@pytest.fixture
def master(pg_cluster):
    with psycopg.connect(pg_cluster.admin_conninfo(), autocommit=True) as conn:
        yield conn
        for statement in sql_statements("revoke.sql"):  # leave the module's cluster without users
            conn.execute(statement)


def _run(conn: psycopg.Connection, *files: str) -> None:
    for statement in sql_statements(*files):  # one statement per call, as the custom resource runs them
        conn.execute(statement)


def _users(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s) ORDER BY 1", (USERS,)).fetchall()]


def test_the_master_is_an_rds_style_master_not_a_superuser(master):
    attributes = master.execute(
        "SELECT rolsuper, rolcreaterole, rolcreatedb, rolcanlogin FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    assert attributes == (False, True, True, True)
    assert master.execute("SELECT count(*) FROM pg_roles WHERE rolname = 'rds_iam'").fetchone()[0] == 1
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        master.execute("SELECT rolpassword FROM pg_authid LIMIT 1")  # superuser-only catalog


def test_create_grant_twice_revoke_twice_and_again(master):
    _run(master, "schema.sql", "grants.sql")
    _run(master, "grants.sql")
    assert _users(master) == USERS
    _run(master, "revoke.sql")
    assert _users(master) == []
    _run(master, "revoke.sql")  # idempotent: nothing left to drop
    _run(master, "grants.sql")
    assert _users(master) == USERS
    # The master's temporary membership in a user never outlives it.
    assert master.execute(
        "SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid WHERE r.rolname = ANY(%s) "
        "AND m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user)", (USERS,)).fetchone()[0] == 0


def test_drop_owned_without_membership_fails_here_as_on_rds(master):
    """The local cluster is faithful: the statement that broke teardown on RDS breaks here too."""
    _run(master, "schema.sql", "grants.sql")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied to drop objects"):
        master.execute(f"DROP OWNED BY {USERS[0]}")


def test_revoke_survives_a_privilege_granted_outside_grants_sql(master):
    """A hand-made grant (an operator's, on a table grants.sql does not know) does not block teardown."""
    _run(master, "schema.sql", "grants.sql")
    master.execute("CREATE TABLE IF NOT EXISTS extra_table (x int)")
    master.execute(f"GRANT SELECT ON extra_table TO {USERS[0]}")
    try:
        _run(master, "revoke.sql")
        assert _users(master) == []
    finally:
        master.execute("DROP TABLE extra_table")


_APPLY_SLOWLY = """
import sys, time, psycopg
sys.path[:0] = [{root!r}, {functions!r}]
from infra.db_users import sql_statements
from tests.test_db_privileges import CONTRACT, catalog_privileges, differences
with psycopg.connect({dsn!r}, autocommit=True) as conn:
    for i, statement in enumerate(sql_statements(*{files!r})):
        print(i, flush=True)
        conn.execute(statement)
        time.sleep(0.3)
print("done", flush=True)
"""


@pytest.mark.parametrize("files,kill_after", [(("schema.sql", "grants.sql"), 2), (("schema.sql", "grants.sql"), 5),
                                              (("revoke.sql",), 0)])
def test_a_run_killed_midway_converges_when_run_again(pg_cluster, master, files, kill_after):
    """SIGKILL (not an exception) of the process applying the SQL, between statements or inside
    one: CloudFormation then times out and the next run must converge to the same state."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    _run(master, "schema.sql", "grants.sql")  # revoke.sql needs users to drop
    if files == ("schema.sql", "grants.sql"):
        _run(master, "revoke.sql")
    code = _APPLY_SLOWLY.format(root=str(root), functions=str(root / "functions"), dsn=pg_cluster.admin_conninfo(),
                                files=files)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.strip() == str(kill_after):
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    _run(master, *files)  # the retry
    _run(master, "grants.sql")
    assert _users(master) == USERS
    for user in USERS:  # exactly the GRANT list, nothing left over from the killed run
        assert differences(catalog_privileges(master, user), CONTRACT[user]) == {}, user
    _run(master, "revoke.sql")
    assert _users(master) == []


_APPLY_ONCE = """
import sys, psycopg
sys.path[:0] = [{root!r}, {functions!r}]
from infra.db_users import sql_statements
with psycopg.connect({dsn!r}, autocommit=True) as conn:
    for statement in sql_statements({file!r}):
        conn.execute(statement)
"""


def test_concurrent_runs_from_separate_processes_wait_for_each_other(pg_cluster, master):
    """A deploy's custom resource and scripts/grants.sh racing: measured before the advisory
    lock, 19 of 40 racing runs failed ("tuple concurrently updated", duplicate role)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    _run(master, "schema.sql")
    for files in (["grants.sql"] * 6, ["grants.sql", "revoke.sql"] * 3):
        procs = [subprocess.Popen([sys.executable, "-c", _APPLY_ONCE.format(
            root=str(root), functions=str(root / "functions"), dsn=pg_cluster.admin_conninfo(), file=name)],
            stderr=subprocess.PIPE, text=True) for name in files]
        failures = [p.stderr.read() for p in procs if p.wait(timeout=120) != 0]
        assert failures == []
    _run(master, "grants.sql")
    for user in USERS:
        assert differences(catalog_privileges(master, user), CONTRACT[user]) == {}, user
