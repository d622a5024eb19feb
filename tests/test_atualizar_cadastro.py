"""atualizar_cadastro against mock_aws + the real PostgreSQL (as the profile user).

Its audit record goes to the hash chain (``cadencia-agente-auditoria``), never to a
ledger ``auditoria#`` item; the ledger holds only the chain's head anchor."""

from __future__ import annotations

import json
import logging

import pytest

from cadencia_shared.audit_chain import ANCHOR_PREFIX, AUDIT_TABLE, AuditChain
from cadencia_shared.catalog import ATUALIZAR_CADASTRO as TOOL
from cadencia_shared.catalog import LEDGER_TABLE
from cadencia_shared.ledger import Ledger

from .support.seal_harness import ledger_items


def _ledger_items(mocked_aws):
    return ledger_items(mocked_aws["dynamodb"])


def _chain(mocked_aws):
    return AuditChain(AUDIT_TABLE, mocked_aws["dynamodb"], anchor_table=LEDGER_TABLE)


def _nothing_written(mocked_aws):
    ddb = mocked_aws["dynamodb"]
    return not ledger_items(ddb) and ddb.scan(TableName=AUDIT_TABLE)["Count"] == 0


def _row(erp, cliente=1001):
    return erp.execute("SELECT nome, cpf, endereco, telefone, email FROM clientes WHERE id = %s", (cliente,)).fetchone()


def test_updates_only_the_given_columns_of_the_own_row(tools, erp, mocked_aws):
    before_other = _row(erp, 1002)
    out = tools(TOOL, {"conversaId": "c-9", "clienteId": 1001,
                       "campos": {"telefone": "+5511912345678", "email": "Ana.Nova@Example.com"}})
    assert out == {"ferramenta": "atualizar_cadastro", "ok": True, "resultado": "atualizado",
                   "dados": {"camposAtualizados": ["email", "telefone"]}}
    nome, cpf, endereco, telefone, email = _row(erp)
    assert (nome, cpf, endereco) == ("Ana Souza", "111.111.111-11", "Rua das Flores, 10, São Paulo - SP")
    assert telefone == "+5511912345678"
    assert email == "Ana.Nova@example.com"  # domain normalized by email-validator
    assert _row(erp, 1002) == before_other
    chain = _chain(mocked_aws)
    (record,) = chain.records("c-9")
    assert (record["seq"], record["evento"]) == (1, "CADASTRO_ATUALIZADO")
    # names only, no personal data
    assert json.loads(record["detalhes"]) == {"clienteId": 1001, "campos": ["email", "telefone"]}
    assert chain.verify("c-9") == (1, None)
    # The ledger holds the chain's anchor, and nothing else: no ``auditoria#`` item.
    assert [i["pk"]["S"] for i in _ledger_items(mocked_aws)] == [ANCHOR_PREFIX + "c-9"]


@pytest.mark.parametrize(
    "campos, fragment",
    [
        ({"email": "not-an-email"}, "email"),
        ({"telefone": "11987654321"}, "telefone"),  # not E.164
        ({"telefone": "+14155550123"}, "telefone"),  # not Brazilian
        ({"telefone": "+5511123"}, "telefone"),  # not a valid number
        ({"telefone": "+55 11 98765-4321"}, "telefone"),  # not canonical E.164
        ({"endereco": "x"}, "endereco"),
        ({"endereco": "Rua\x00A, 1"}, "endereco"),
        ({}, "ao menos um campo"),
        ({"cpf": "000.000.000-00"}, "cpf"),
        ({"nome": "Outro"}, "nome"),
    ],
)
def test_invalid_fields_are_typed_errors_and_change_nothing(tools, erp, mocked_aws, campos, fragment):
    before = _row(erp)
    out = tools(TOOL, {"conversaId": "c-9", "clienteId": 1001, "campos": campos})
    assert out["ok"] is False and out["erro"]["codigo"] == "entrada_invalida"
    assert fragment in out["erro"]["mensagem"]
    assert _row(erp) == before
    assert _nothing_written(mocked_aws)


def test_unknown_customer_is_typed_and_writes_no_audit(tools, mocked_aws):
    out = tools(TOOL, {"conversaId": "c-9", "clienteId": 424242, "campos": {"endereco": "Rua Nova, 100"}})
    assert out["erro"]["codigo"] == "cliente_nao_encontrado"
    assert _nothing_written(mocked_aws)


def test_failed_audit_rolls_the_update_back(tools, erp, mocked_aws):
    mocked_aws["dynamodb"].delete_table(TableName=AUDIT_TABLE)
    before = _row(erp)
    with pytest.raises(Exception, match="ResourceNotFound"):
        tools(TOOL, {"conversaId": "c-9", "clienteId": 1001, "campos": {"endereco": "Rua Perdida, 1"}})
    assert _row(erp) == before
    assert _ledger_items(mocked_aws) == []  # no fallback to a ledger ``auditoria#`` item


def test_without_the_chain_configured_it_refuses_to_run_and_changes_nothing(tools, erp, mocked_aws):
    """No AUDIT_TABLE (a broken deploy): the call crashes before the database is
    touched; it never audits into the ledger instead."""
    tools.overrides[TOOL.name] = {"AUDIT_TABLE": ""}
    before = _row(erp)
    with pytest.raises(Exception, match="AUDIT_TABLE"):
        tools(TOOL, {"conversaId": "c-9", "clienteId": 1001, "campos": {"endereco": "Rua Sem Trilha, 1"}})
    assert _row(erp) == before
    assert _nothing_written(mocked_aws)


PERSONAL = {"telefone": "+5511934567890", "email": "maria.sigilo@example.org",
            "endereco": "Travessa Reservada, 77, Recife - PE"}


def test_no_personal_value_reaches_the_chain_the_ledger_or_the_logs(tools, erp, mocked_aws, capfd, caplog):
    caplog.set_level(logging.DEBUG)
    out = tools(TOOL, {"conversaId": "c-pii", "clienteId": 1002, "campos": PERSONAL})
    assert out["ok"] is True
    assert erp.execute("SELECT telefone, email, endereco FROM clientes WHERE id = 1002").fetchone() == tuple(
        PERSONAL.values())  # the values did reach the ERP, the one place they belong
    stored = json.dumps([mocked_aws["dynamodb"].scan(TableName=t)["Items"] for t in (AUDIT_TABLE, LEDGER_TABLE)],
                        ensure_ascii=False)
    printed, errors = capfd.readouterr()
    logged = "\n".join([printed, errors, caplog.text])
    assert "CADASTRO_ATUALIZADO" in stored and "atualizar_cadastro" in logged  # both were written
    for value in PERSONAL.values():
        for fragment in (value, value[:-2], json.dumps(value)[1:-1]):
            assert fragment not in stored and fragment not in logged


class RecordingClient:
    """The tool's DynamoDB client, every call recorded (operation, table, partition key)."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, []

    def __getattr__(self, name):
        method = getattr(self.inner, name)

        def call(**kwargs):
            key = (kwargs.get("Key") or kwargs.get("Item") or {}).get("pk", {}).get("S")
            self.calls.append((name, kwargs.get("TableName"), key))
            return method(**kwargs)
        return call


def test_its_ledger_calls_stay_on_the_anchor_keys_its_role_is_limited_to(tools, mocked_aws, monkeypatch):
    """The role may GetItem/UpdateItem ledger items whose key starts ``auditoria-cabeca#``
    and PutItem/Query the audit table (infra/contract.py): the code does no more, even
    on the path where the anchor lags and is re-read (a writer killed between record
    and anchor)."""
    from atualizar_cadastro import handler

    ddb = mocked_aws["dynamodb"]
    # Through the ledger facade (its keywords are stable across the chain's own API).
    Ledger(LEDGER_TABLE, ddb, audit_chain=_chain(mocked_aws)).append_audit(
        conversation_id="c-anchor", event="ANTES", details={})
    Ledger(LEDGER_TABLE, ddb, audit_chain=AuditChain(AUDIT_TABLE, ddb)).append_audit(
        conversation_id="c-anchor", event="SEM_ANCORA", details={})  # unanchored: the anchor lags
    recorder = RecordingClient(ddb)
    monkeypatch.setattr(handler, "client", lambda service, aws: recorder)
    out = tools(TOOL, {"conversaId": "c-anchor", "clienteId": 1001, "campos": {"endereco": "Rua da Âncora, 3"}})
    assert out["ok"] is True
    on_ledger = {(op, key) for op, table, key in recorder.calls if table == LEDGER_TABLE}
    on_audit = {op for op, table, _ in recorder.calls if table == AUDIT_TABLE}
    # The lagging anchor comes back with the refused UpdateItem (ALL_OLD): no GetItem needed.
    assert on_ledger == {("update_item", ANCHOR_PREFIX + "c-anchor")}
    assert on_audit == {"put_item", "query"}
    assert {table for _, table, _ in recorder.calls} == {LEDGER_TABLE, AUDIT_TABLE}
    assert _chain(mocked_aws).verify("c-anchor") == (3, None)  # the anchor caught up with the tool's record
