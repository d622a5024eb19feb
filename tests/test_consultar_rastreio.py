"""consultar_rastreio (the throwaway fourth tool of the how-to) through the local stack, as its own DB user."""

from __future__ import annotations

from cadencia_shared.catalog import CONSULTAR_RASTREIO as TOOL
from orchestrator.tools import definitions


def test_returns_the_tracking_code_of_the_customers_own_order(tools):
    out = tools(TOOL, {"conversaId": "c-1", "clienteId": 1001, "pedidoId": "4821"})
    assert out["ok"] is True and out["dados"] == {"pedidoId": "4821", "codigoRastreio": "BR123456789"}
    foreign = tools(TOOL, {"conversaId": "c-1", "clienteId": 1001, "pedidoId": "5100"})
    assert foreign["erro"]["codigo"] == "pedido_nao_encontrado"


def test_the_model_sees_it_with_a_derived_schema():
    (tool,) = [t for t in definitions(strict=True) if t["name"] == TOOL.name]
    assert tool["input_schema"]["required"] == ["pedidoId"]
    assert tool["input_schema"]["additionalProperties"] is False
