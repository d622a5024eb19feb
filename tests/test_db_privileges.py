"""Each Lambda's database user can do exactly what its contract says, on a real
PostgreSQL: read back from the catalog (what ``\\dp`` shows) and exercised
statement by statement (granted works, everything else is ``permission denied``).

Which users exist comes from the registry (``catalog.DB_USERS``); what each may do
is written out independently of the SQL: for a tool, in its hand-written row of
``infra/contract.py`` (``ToolRole.db_privileges``), for the two users that are not
tools, below. Widening a GRANT in a package's grants.sql makes these tests fail.
"""

from __future__ import annotations

import itertools
import re

import psycopg
import pytest

from cadencia_shared import catalog, db
from infra.contract import TOOL_ROLES
from scripts.local_stack import postgres

TABLES = ("clientes", "pedidos", "reembolsos", "canais_whatsapp")

# The DB users that are not tools (each tool's is its contract row's ``db_privileges``).
NOT_TOOLS: dict[str, tuple[str, ...]] = {
    # The reconciler: the refund's settle step only (apply or release a key's
    # reservation under the order's row lock) and the books' audit (a row's age);
    # no cliente_id, no DELETE.
    catalog.RECONCILER_DB_USER: (
        "SELECT (id, valor_pedido, valor_reembolsado) ON pedidos",
        "UPDATE (status_reembolso, valor_reembolsado) ON pedidos",
        "SELECT (chave_idempotencia, pedido_id, valor, status, atualizado_em) ON reembolsos",
        "INSERT (chave_idempotencia, pedido_id, valor, status) ON reembolsos",
        "UPDATE (valor, status, atualizado_em) ON reembolsos",
    ),
    # The WhatsApp channel's identity lookup: which customer a number belongs to,
    # nothing else (not the customer's name, not clientes.telefone).
    catalog.WHATSAPP_DB_USER: ("SELECT (wa_id, cliente_id) ON canais_whatsapp",),
}
_PRIVILEGE = re.compile(r"\A(SELECT|INSERT|UPDATE) \(([a-z_, ]+)\) ON ([a-z_]+)\Z")


def column_privileges(lines: tuple[str, ...]) -> set[tuple[str, str, str]]:
    """"SELECT (a, b) ON t" lines → {(t, a, SELECT), (t, b, SELECT)}."""
    out = set()
    for line in lines:
        found = _PRIVILEGE.match(line)
        assert found, f"not a column privilege: {line!r}"
        out |= {(found[3], column.strip(), found[1]) for column in found[2].split(",")}
    return out


# Every user gets column privileges only: no table-wide grant anywhere.
CONTRACT: dict[str, dict[str, set]] = {
    user: {"table": set(), "columns": column_privileges(lines)}
    for user, lines in {**{t.db_user: t.db_privileges for t in TOOL_ROLES}, **NOT_TOOLS}.items()
}


def test_every_registry_db_user_has_a_contract():
    """The registry's users (what grants.sql creates) and the contract's are the same set."""
    assert set(CONTRACT) == set(catalog.DB_USERS)
    assert {t.db_user for t in TOOL_ROLES} == {t.db_user for t in catalog.TOOLS.values()}


def catalog_privileges(conn: psycopg.Connection, user: str) -> dict[str, set]:
    """Table and column ACL entries of ``user`` on every table of the database."""
    table = conn.execute(
        """
        SELECT c.relname, a.privilege_type
          FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
          JOIN pg_roles r ON r.oid = a.grantee
         WHERE r.rolname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'S')
        """,
        (user,),
    ).fetchall()
    columns = conn.execute(
        """
        SELECT c.relname, att.attname, a.privilege_type
          FROM pg_attribute att JOIN pg_class c ON c.oid = att.attrelid
          CROSS JOIN LATERAL aclexplode(att.attacl) a
          JOIN pg_roles r ON r.oid = a.grantee
         WHERE r.rolname = %s AND att.attacl IS NOT NULL
        """,
        (user,),
    ).fetchall()
    return {"table": set(table), "columns": set(columns)}


def all_columns(conn: psycopg.Connection) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name = ANY(%s) ORDER BY 1, 2",
        (list(TABLES),),
    ).fetchall()


def differences(actual: dict[str, set], expected: dict[str, set]) -> dict[str, set]:
    return {
        f"{kind} {label}": delta
        for kind in ("table", "columns")
        for label, delta in (("extra", actual[kind] - expected[kind]), ("missing", expected[kind] - actual[kind]))
        if delta
    }


@pytest.fixture
def admin(local_stack):
    with psycopg.connect(local_stack.postgres.admin_conninfo(), autocommit=True) as conn:
        yield conn


@pytest.mark.parametrize("user", sorted(CONTRACT))
def test_catalog_equals_the_contract(admin, user):
    assert differences(catalog_privileges(admin, user), CONTRACT[user]) == {}


@pytest.mark.parametrize("user", sorted(CONTRACT))
def test_information_schema_agrees(admin, user):
    """information_schema.column_privileges expands table grants to every column."""
    rows = set(admin.execute(
        "SELECT table_name, column_name, privilege_type FROM information_schema.column_privileges "
        "WHERE grantee = %s", (user,)).fetchall())
    expected = set(CONTRACT[user]["columns"])
    for table, privilege in CONTRACT[user]["table"]:
        expected |= {(t, c, privilege) for t, c in all_columns(admin) if t == table}
    assert rows == expected
    table_rows = set(admin.execute(
        "SELECT table_name, privilege_type FROM information_schema.table_privileges WHERE grantee = %s",
        (user,)).fetchall())
    assert table_rows == CONTRACT[user]["table"]


@pytest.mark.parametrize("user", sorted(CONTRACT))
def test_role_attributes_and_memberships(admin, user):
    row = admin.execute(
        "SELECT rolsuper, rolcreatedb, rolcreaterole, rolcanlogin, rolbypassrls FROM pg_roles WHERE rolname = %s",
        (user,)).fetchone()
    assert row == (False, False, False, True, False)
    member_of = {r[0] for r in admin.execute(
        "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid "
        "JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = %s", (user,)).fetchall()}
    assert member_of == {"rds_iam"}


def _allowed(user: str, table: str, column: str, privilege: str) -> bool:
    c = CONTRACT[user]
    return (table, privilege) in c["table"] or (table, column, privilege) in c["columns"]


def _probe(conn: psycopg.Connection, sql: str) -> bool:
    """True if the statement is permitted (run inside a rolled-back savepoint)."""
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(sql)
        return True
    except psycopg.errors.InsufficientPrivilege:
        return False


@pytest.mark.parametrize("user", sorted(CONTRACT))
def test_every_statement_is_allowed_or_refused_as_the_contract_says(local_stack, admin, user):
    mismatches = []
    with psycopg.connect(local_stack.postgres.user_conninfo(user)) as conn:
        for (table, column), privilege in itertools.product(all_columns(admin), ("SELECT", "UPDATE", "INSERT")):
            sql = {
                "SELECT": f"SELECT {column} FROM {table} LIMIT 1",
                "UPDATE": f"UPDATE {table} SET {column} = DEFAULT WHERE false",
                "INSERT": f"INSERT INTO {table} ({column}) SELECT NULL WHERE false",
            }[privilege]
            if _probe(conn, sql) != _allowed(user, table, column, privilege):
                mismatches.append(sql)
        for table in TABLES:
            for sql in (f"DELETE FROM {table} WHERE false", f"TRUNCATE {table}"):
                if _probe(conn, sql):
                    mismatches.append(sql)
        for sql in ("CREATE TABLE intrusa (x int)", "CREATE SCHEMA intrusa"):
            if _probe(conn, sql):
                mismatches.append(sql)
    assert mismatches == []


def test_no_agent_user_reads_customer_data_it_does_not_need(local_stack, admin):
    """clientes.cpf is readable by no agent user; the status tool reads nothing of clientes."""
    readers = {row[0] for row in admin.execute(
        "SELECT grantee FROM information_schema.column_privileges "
        "WHERE table_name = 'clientes' AND column_name = 'cpf' AND privilege_type = 'SELECT'").fetchall()}
    assert readers & set(CONTRACT) == set()
    consulta = catalog_privileges(admin, "cadencia_agente_consulta")
    assert {entry for entry in consulta["table"] | consulta["columns"] if entry[0] != "pedidos"} == set()
    with psycopg.connect(local_stack.postgres.user_conninfo("cadencia_agente_consulta")) as conn:
        for sql in ("SELECT cpf FROM clientes", "SELECT nome FROM clientes", "SELECT * FROM pedidos"):
            assert not _probe(conn, sql), sql


def test_the_status_tool_query_runs_under_its_grants(local_stack, erp):
    from consultar_status_pedido.repository import fetch_own_order

    order_id, customer_id = erp.execute("SELECT id, cliente_id FROM pedidos ORDER BY id LIMIT 1").fetchone()
    with psycopg.connect(local_stack.postgres.user_conninfo("cadencia_agente_consulta")) as conn:
        row = fetch_own_order(conn, order_id=order_id, customer_id=customer_id)
    assert row is not None and row["id"] == order_id


def test_a_widened_grant_is_detected_and_grants_sql_restores_the_contract(local_stack, admin):
    user = "cadencia_agente_cadastro"
    admin.execute("GRANT SELECT (cpf) ON clientes TO cadencia_agente_cadastro")
    admin.execute("GRANT DELETE ON pedidos TO cadencia_agente_cadastro")
    try:
        found = differences(catalog_privileges(admin, user), CONTRACT[user])
        assert found == {"table extra": {("pedidos", "DELETE")}, "columns extra": {("clientes", "cpf", "SELECT")}}
    finally:
        postgres.apply_sql(local_stack.postgres, ("grants.sql",))
    assert differences(catalog_privileges(admin, user), CONTRACT[user]) == {}


def test_sql_scripts_are_safe_to_run_twice(local_stack, admin):
    info = local_stack.postgres
    orders = admin.execute("SELECT count(*) FROM pedidos").fetchone()[0]  # the seed, and what earlier tests added
    postgres.apply_sql(info)
    postgres.apply_sql(info)
    db.close_all()  # the tools' cached connections belong to users about to be dropped
    with psycopg.connect(info.admin_conninfo(), autocommit=True) as conn:
        conn.execute((postgres.SQL_DIR / "revoke.sql").read_text())
        conn.execute((postgres.SQL_DIR / "revoke.sql").read_text())
        left = conn.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)",
                            (list(catalog.DB_USERS),)).fetchall()
    assert left == []
    postgres.apply_sql(info)
    for user in CONTRACT:
        assert differences(catalog_privileges(admin, user), CONTRACT[user]) == {}
    assert admin.execute("SELECT count(*) FROM pedidos").fetchone()[0] == orders  # the seed not inserted again
