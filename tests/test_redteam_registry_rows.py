"""Red team: hostile registry rows. The how-to has a newcomer write a tool's
registry row AND its contract row by hand; a row that asks for a ledger action that
removes or rewrites items wholesale (DeleteItem, BatchWriteItem, a wildcard...) would
pass the contract check when the contract row asks for it too. The ledger holds the
refund claims ("not found" must never mean "never happened") and the audit chain's
head anchors: the registry itself refuses any ledger action beyond GetItem, PutItem
and UpdateItem, when the row is built."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cadencia_shared.catalog import CONSULTAR_STATUS_PEDIDO, LEDGER_ITEM_ACTIONS, Egress

ROW = dataclasses.replace(CONSULTAR_STATUS_PEDIDO, name="consultar_rastreio", egress=Egress.LEDGER_ENDPOINT,
                          read_only=False)  # a row that may write the ledger


def test_the_item_actions_are_accepted():
    assert dataclasses.replace(ROW, ledger_actions=LEDGER_ITEM_ACTIONS).ledger_actions == LEDGER_ITEM_ACTIONS


@pytest.mark.parametrize("action", ["dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:*", "dynamodb:Update*",
                                    "dynamodb:Scan", "dynamodb:DeleteTable", "*", "dynamodb:PartiQLDelete"])
def test_a_row_asking_for_more_than_item_reads_and_writes_is_refused(action):
    with pytest.raises(ValueError, match="ledger_actions"):
        dataclasses.replace(ROW, ledger_actions=("dynamodb:GetItem", action))


@given(st.text(min_size=1, max_size=40).filter(lambda a: a not in LEDGER_ITEM_ACTIONS))
def test_any_other_action_string_is_refused(action):
    with pytest.raises(ValueError, match="ledger_actions"):
        dataclasses.replace(ROW, ledger_actions=(action,))


@pytest.mark.parametrize("hidden", ["\r", "\r\n", "\n"])
def test_a_grant_hidden_after_a_line_comment_is_refused(tmp_path, hidden):
    """PostgreSQL ends a ``--`` comment at CR as well as LF: a table-wide GRANT after
    "-- why<CR>" would run as the master inside grants.sql's DO block while a splitter
    that ends comments at LF only saw a comment. package_grants must see the statement
    (it reads the file with universal newlines) and refuse it."""
    from infra.derived import DerivedFileError, package_grants

    path = tmp_path / "functions" / "consultar_status_pedido" / "grants.sql"
    path.parent.mkdir(parents=True)
    path.write_bytes(("-- why" + hidden + "GRANT ALL ON clientes TO cadencia_agente_consulta;\n"
                      "GRANT SELECT (id) ON pedidos TO cadencia_agente_consulta;\n").encode())
    with pytest.raises(DerivedFileError):
        package_grants("consultar_status_pedido", "cadencia_agente_consulta", tmp_path)


def test_the_splitter_ends_a_line_comment_at_cr_as_postgresql_does():
    """Whatever reads the script, a statement after "--...<CR>" is a statement (the
    PostgreSQL lexer: ``--`` runs to the first LF or CR)."""
    from infra.sqlsplit import split_statements

    assert split_statements("-- why\rGRANT ALL ON clientes TO x;\nSELECT 1;") == ["GRANT ALL ON clientes TO x",
                                                                                  "SELECT 1"]
