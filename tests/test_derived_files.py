"""The files derived from the tool registry are current, and a package's grants.sql
cannot widen another user's privileges (infra/derived.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cadencia_shared import catalog
from cadencia_shared.ledger import Ledger
from infra import derived

ROOT = Path(__file__).resolve().parents[1]


def test_committed_derived_files_equal_what_the_registry_gives():
    assert derived.stale() == [], "run: python -m infra.derived --write"


def test_every_db_user_is_created_granted_and_revoked_from_its_package():
    grants, revoke = derived.grants_sql(), derived.revoke_sql()
    for user, package in catalog.DB_USER_PACKAGES.items():
        assert f"'{user}'" in grants and f"'{user}'" in revoke
        assert (ROOT / catalog.grants_file(package)).is_file()
        assert f" TO {user};" in grants


def test_importlinter_names_every_tool_package():
    config = derived.importlinter()
    sections = {name: body for name, _, body in (part.partition("\n") for part in config.split("\n["))}
    for tool in catalog.TOOLS.values():
        for section in ("importlinter]", "importlinter:contract:tools-independent]",
                        "importlinter:contract:tools-no-model]"):
            assert f"\n    {tool.package}\n" in "\n" + sections[section], (tool.package, section)


@pytest.mark.parametrize("statement", [
    "GRANT SELECT (cpf) ON clientes TO cadencia_canal_whatsapp;",  # another user's grant, hidden here
    "GRANT SELECT ON pedidos TO {user};",  # table-wide
    "GRANT DELETE (id) ON pedidos TO {user};",
    "GRANT SELECT (id) ON pedidos TO {user} WITH GRANT OPTION;",
    "GRANT SELECT (id) ON pg_authid TO {user};",
    "GRANT cadencia_agente_reembolso TO {user};",  # a membership
    "ALTER USER {user} SUPERUSER;",
    "REVOKE SELECT (id) ON pedidos FROM {user};",
    # Reads as a comment on its own, but inside grants.sql's DO $$ … $$ the "$$" ends the body.
    "-- note $$; ALTER USER {user} SUPERUSER; DO $$ BEGIN",
    "/* $$; ALTER USER {user} SUPERUSER; DO $$ BEGIN */",
])
def test_a_package_grants_file_holds_only_its_own_users_column_grants(tmp_path, statement):
    tool = catalog.CONSULTAR_STATUS_PEDIDO
    target = tmp_path / catalog.grants_file(tool.package)
    target.parent.mkdir(parents=True)
    shutil.copyfile(ROOT / catalog.grants_file(tool.package), target)
    derived.package_grants(tool.package, tool.db_user, tmp_path)  # the real file passes
    target.write_text(target.read_text() + statement.format(user=tool.db_user) + "\n")
    with pytest.raises(derived.DerivedFileError):
        derived.package_grants(tool.package, tool.db_user, tmp_path)


def test_the_ledger_facade_keeps_its_table_helpers_private_to_the_ledger():
    """The channel's outbox and contacts use the ledger's table module, not facade internals."""
    for name in ("_ser", "_de", "_get", "_iso", "_key", "_condition_failed", "_old_item", "_clock"):
        assert not hasattr(Ledger, name), name
    for path in (ROOT / "functions" / "canal_whatsapp").glob("*.py"):
        assert "ledger._" not in path.read_text(), path


def test_regions_are_filled_between_their_markers_and_nothing_else_changes():
    text = "a\n    ; derived:tools start (why)\n    stale\n    ; derived:tools end\nb\n"
    assert derived.fill_regions(text, {"tools": ["x", "y"]}) == (
        "a\n    ; derived:tools start (why)\n    x\n    y\n    ; derived:tools end\nb\n")
    with pytest.raises(derived.DerivedFileError):  # a file that lost its markers is not silently left alone
        derived.fill_regions("a\nb\n", {"tools": ["x"]})
    with pytest.raises(derived.DerivedFileError):
        derived.fill_regions(text, {"tools": ["x"], "db-users": ["'u'"]})


def test_names_written_into_sql_and_ini_are_plain_identifiers(monkeypatch):
    monkeypatch.setattr(catalog, "DB_USERS", (*catalog.DB_USERS, "x'); DROP TABLE pedidos; --"))
    with pytest.raises(derived.DerivedFileError):
        derived.revoke_sql()
