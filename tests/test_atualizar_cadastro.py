"""atualizar_cadastro against mock_aws + the real PostgreSQL (as the profile user)."""

from __future__ import annotations

import json

import pytest

from cadencia_shared.catalog import ATUALIZAR_CADASTRO as TOOL


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
    audit = [i for i in mocked_aws["dynamodb"].scan(TableName="cadencia-agente-execucoes")["Items"]
             if i["tipo"]["S"] == "auditoria"]
    assert len(audit) == 1
    details = json.loads(audit[0]["detalhes"]["S"])
    assert details == {"clienteId": 1001, "campos": ["email", "telefone"]}  # names only, no personal data


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
    assert mocked_aws["dynamodb"].scan(TableName="cadencia-agente-execucoes")["Count"] == 0


def test_unknown_customer_is_typed_and_writes_no_audit(tools, mocked_aws):
    out = tools(TOOL, {"conversaId": "c-9", "clienteId": 424242, "campos": {"endereco": "Rua Nova, 100"}})
    assert out["erro"]["codigo"] == "cliente_nao_encontrado"
    assert mocked_aws["dynamodb"].scan(TableName="cadencia-agente-execucoes")["Count"] == 0


def test_failed_audit_rolls_the_update_back(tools, erp, mocked_aws):
    mocked_aws["dynamodb"].delete_table(TableName="cadencia-agente-execucoes")
    before = _row(erp)
    with pytest.raises(Exception):
        tools(TOOL, {"conversaId": "c-9", "clienteId": 1001, "campos": {"endereco": "Rua Perdida, 1"}})
    assert _row(erp) == before
