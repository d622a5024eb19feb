"""consultar_status_pedido against mock_aws + the real PostgreSQL (as the status user)."""

from __future__ import annotations

from cadencia_shared.catalog import CONSULTAR_STATUS_PEDIDO as TOOL


def test_returns_the_status_of_the_customers_own_order(tools):
    out = tools(TOOL, {"conversaId": "c-1", "clienteId": 1001, "pedidoId": "4821"})
    assert out == {
        "ferramenta": "consultar_status_pedido",
        "ok": True,
        "resultado": "consultado",
        "dados": {
            "pedidoId": "4821",
            "status": "entregue",
            "valorPedido": "189.90",
            "statusReembolso": "nenhum",
            "valorReembolsado": "0.00",
            "previsaoEntrega": "2026-08-05",
            "codigoRastreio": "BR123456789",
        },
    }


def test_foreign_and_unknown_orders_are_the_same_error(tools):
    foreign = tools(TOOL, {"conversaId": "c-1", "clienteId": 1001, "pedidoId": "5100"})
    unknown = tools(TOOL, {"conversaId": "c-1", "clienteId": 1001, "pedidoId": "0000"})
    assert foreign["ok"] is unknown["ok"] is False
    assert foreign["erro"]["codigo"] == unknown["erro"]["codigo"] == "pedido_nao_encontrado"
    assert "dados" not in foreign and "dados" not in unknown


def test_invalid_input_is_typed(tools):
    for event, code in (
        ({"conversaId": "c-1", "clienteId": 1001}, "entrada_invalida"),
        # An identity no turn could bind opens no session: the edge refuses the call unsealed.
        ({"conversaId": "c-1", "clienteId": "abc", "pedidoId": "4821"}, "selo_recusado"),
        ({"conversaId": "c-1", "clienteId": 1001, "pedidoId": "4821", "sql": "1; DROP TABLE pedidos"},
         "entrada_invalida"),
        ({"conversaId": "c 1", "clienteId": 1001, "pedidoId": "4821"}, "entrada_invalida"),
    ):
        out = tools(TOOL, event)
        assert out["ok"] is False and out["erro"]["codigo"] == code, event
