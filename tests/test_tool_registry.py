"""The tool registry (cadencia_shared.catalog): one row per tool, read by the
orchestrator and by infra. A row whose network cannot reach what it asks for is
refused when the registry is read, not discovered as a timeout in AWS."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cadencia_shared.catalog import ATUALIZAR_CADASTRO, CONSULTAR_STATUS_PEDIDO, EMITIR_REEMBOLSO, TOOLS, Egress
from orchestrator import tools


def test_every_row_is_a_distinct_tool_lambda_and_db_user():
    rows = list(TOOLS.values())
    for field in ("name", "function_name", "db_user", "package", "role_name"):
        values = [getattr(row, field) for row in rows]
        assert len(set(values)) == len(values), field
    assert all(row.timeout_s > 0 and row.reserved_concurrency >= 1 for row in rows)


def test_the_model_sees_each_row_with_its_description_and_derived_schema():
    definitions = {d["name"]: d for d in tools.definitions(strict=True)}
    assert list(definitions) == list(TOOLS)
    for name, row in TOOLS.items():
        assert definitions[name]["description"] == row.description
        assert definitions[name]["input_schema"] == tools.input_schema(row.arguments)
        assert definitions[name]["input_schema"]["additionalProperties"] is False


@pytest.mark.parametrize("change", [
    {"ledger_actions": ("dynamodb:PutItem",), "egress": Egress.POSTGRES_ONLY},
    {"appends_audit": True, "egress": Egress.POSTGRES_ONLY},
    {"secrets": ("cadencia/gateway-pagamento",), "egress": Egress.LEDGER_ENDPOINT},
    {"calls_payment_gateway": True, "egress": Egress.POSTGRES_ONLY},
])
def test_a_row_that_cannot_reach_what_it_asks_for_is_refused(change):
    with pytest.raises(ValueError, match=CONSULTAR_STATUS_PEDIDO.name):
        replace(CONSULTAR_STATUS_PEDIDO, **change)


def test_an_approval_policy_needs_an_irreversible_tool():
    with pytest.raises(ValueError, match="irreversible"):
        replace(ATUALIZAR_CADASTRO, approval=EMITIR_REEMBOLSO.approval)
    assert replace(EMITIR_REEMBOLSO, approval=None).approval is None
