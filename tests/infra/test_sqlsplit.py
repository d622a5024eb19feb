"""The statement splitter: unit cases, and the split sql/ files run one statement
at a time (as the RDS Data API runs them) leave PostgreSQL exactly as psql does."""

from __future__ import annotations

import subprocess

import psycopg
import pytest

from cadencia_shared.catalog import TOOLS
from infra.db_users import SQL_DIR, sql_statements
from infra.sqlsplit import SqlSplitError, split_statements


@pytest.mark.parametrize(("script", "expected"), [
    ("SELECT 1; SELECT 2;", ["SELECT 1", "SELECT 2"]),
    ("SELECT 1", ["SELECT 1"]),
    ("  ;; ; ", []),
    ("-- only a comment\n", []),
    ("SELECT 1; -- trailing ; comment\nSELECT 2", ["SELECT 1", "SELECT 2"]),
    ("SELECT 'a;b', 'it''s;'; SELECT 3", ["SELECT 'a;b', 'it''s;'", "SELECT 3"]),
    ("SELECT E'back\\\\slash\\';still'; SELECT 4", ["SELECT E'back\\\\slash\\';still'", "SELECT 4"]),
    ('SELECT 1 AS "we;ird""name"; SELECT 5', ['SELECT 1 AS "we;ird""name"', "SELECT 5"]),
    ("/* a; /* nested; */ still; */ SELECT 6;", ["SELECT 6"]),
    ("DO $$ BEGIN PERFORM 1; PERFORM 2; END $$; SELECT 7", ["DO $$ BEGIN PERFORM 1; PERFORM 2; END $$", "SELECT 7"]),
    ("DO $body$ BEGIN RAISE NOTICE '$$;'; END $body$;", ["DO $body$ BEGIN RAISE NOTICE '$$;'; END $body$"]),
    ("DO $$ -- a comment; inside the body stays\nBEGIN END $$;",
     ["DO $$ -- a comment; inside the body stays\nBEGIN END $$"]),
    ("PREPARE p AS SELECT $1; EXECUTE p(1)", ["PREPARE p AS SELECT $1", "EXECUTE p(1)"]),
    ("SELECT a$b FROM t; SELECT 8", ["SELECT a$b FROM t", "SELECT 8"]),
])
def test_split(script, expected):
    assert split_statements(script) == expected


@pytest.mark.parametrize("broken", ["SELECT 'open", 'SELECT "open', "DO $$ BEGIN", "/* open", "DO $a$ x $b$"])
def test_unterminated_input_is_an_error(broken):
    with pytest.raises(SqlSplitError):
        split_statements(broken)


def test_the_project_scripts_split_as_expected():
    # clientes, pedidos (+ index), reembolsos (+ index), canais_whatsapp
    assert len(split_statements((SQL_DIR / "schema.sql").read_text())) == 6
    (grants,) = split_statements((SQL_DIR / "grants.sql").read_text())  # one transaction, one Data API call
    assert grants.startswith("DO $$") and grants.endswith("$$") and grants.count("GRANT SELECT") >= 3
    (revoke,) = split_statements((SQL_DIR / "revoke.sql").read_text())
    assert revoke.startswith("DO $$") and revoke.endswith("$$")


def _privileges(conninfo: str) -> dict[str, object]:
    """Everything grants.sql decides: users, memberships, table and column privileges."""
    users = tuple(t.db_user for t in TOOLS.values())
    with psycopg.connect(conninfo) as conn:
        return {
            "roles": conn.execute("SELECT rolname, rolcanlogin, rolsuper FROM pg_roles WHERE rolname = ANY(%s) "
                                  "ORDER BY 1", (list(users),)).fetchall(),
            "members": conn.execute("SELECT r.rolname, m.rolname FROM pg_auth_members a JOIN pg_roles r ON "
                                    "r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member WHERE m.rolname = ANY(%s) "
                                    "ORDER BY 1, 2", (list(users),)).fetchall(),
            "tables": conn.execute("SELECT grantee, table_name, privilege_type FROM "
                                   "information_schema.role_table_grants WHERE grantee = ANY(%s) ORDER BY 1, 2, 3",
                                   (list(users),)).fetchall(),
            "columns": conn.execute("SELECT grantee, table_name, column_name, privilege_type FROM "
                                    "information_schema.column_privileges WHERE grantee = ANY(%s) "
                                    "ORDER BY 1, 2, 3, 4", (list(users),)).fetchall(),
        }


def _psql(info, *files: str) -> None:
    env = {"PGHOST": info.host, "PGPORT": str(info.port), "PGUSER": info.admin_user,
           "PGPASSWORD": info.admin_password, "PGDATABASE": info.dbname, "PATH": "/usr/bin:/bin"}
    for name in files:
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(SQL_DIR / name)], env=env,
                       check=True, capture_output=True)


def test_one_statement_at_a_time_equals_psql(pg_cluster):
    _psql(pg_cluster, "schema.sql", "grants.sql")
    by_psql = _privileges(pg_cluster.admin_conninfo())
    assert by_psql["roles"] and by_psql["columns"]
    _psql(pg_cluster, "revoke.sql")
    assert _privileges(pg_cluster.admin_conninfo())["roles"] == []

    with psycopg.connect(pg_cluster.admin_conninfo(), autocommit=True) as conn:
        for statement in sql_statements("schema.sql", "grants.sql"):
            conn.execute(statement)
    assert _privileges(pg_cluster.admin_conninfo()) == by_psql

    with psycopg.connect(pg_cluster.admin_conninfo(), autocommit=True) as conn:
        for statement in sql_statements("revoke.sql"):
            conn.execute(statement)
    assert _privileges(pg_cluster.admin_conninfo())["roles"] == []
