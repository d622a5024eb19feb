"""Red-team findings on how the refund reads the gateway's answers (issue 8).

A real loopback HTTP server plays a gateway that answers outside the local
model's two statuses; the refund runs through its real handler, the real
PostgreSQL ERP and the ledger."""

from __future__ import annotations

import json
import threading
import uuid
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cadencia_shared.catalog import EMITIR_REEMBOLSO
from cadencia_shared.ledger import ClaimStatus, refund_idempotency_key
from emitir_reembolso import handler as refund_handler
from emitir_reembolso.settings import RefundSettings
from orchestrator.invokers.local import function_environment


class _PendingGateway(BaseHTTPRequestHandler):
    """Answers every refund with 201 and a non-final status (Stripe refunds are
    ``pending`` before they succeed or fail): the money may still move."""

    status_text = "pendente"
    debits_asked: list[str] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.debits_asked.append(self.headers["Idempotency-Key"])
        payload = json.dumps({"id": "re_pend_1", "status": self.status_text, "valor": body["valor"],
                              "pedidoId": body["pedidoId"], "criadoEm": "2026-12-01T00:00:00Z"}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_):  # keep test output quiet
        pass


@pytest.fixture
def pending_gateway():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PendingGateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_non_final_gateway_status_is_not_read_as_a_decline(tools, erp, pending_gateway):
    """DEFECT: ``GatewayRefund.approved`` is ``status == "aprovado"`` and
    ``_heard_refund`` maps every other status to DECLINED, a *releasing*
    transition. A 201 carrying a status the client does not know ("pendente",
    as a real gateway's refund in progress) therefore frees the reservation and
    tells the customer "nada foi debitado" while the gateway may still debit.
    Only an explicit decline may release; anything else must hold (unknown)."""
    tools.overrides[EMITIR_REEMBOLSO.name] = {"GATEWAY_URL": pending_gateway}
    conv = f"conv-{uuid.uuid4().hex[:8]}"
    pedido = "4821"
    before = erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = %s", (pedido,)).fetchone()[0]
    out = tools(EMITIR_REEMBOLSO, {"conversaId": conv, "clienteId": 1001, "pedidoId": pedido, "valor": 10.0})

    key = refund_idempotency_key(conv, pedido)
    with function_environment(tools.environment(EMITIR_REEMBOLSO)):
        claim = refund_handler.adapters(RefundSettings.from_env()).ledger.get_claim(key)
    reservation = erp.execute("SELECT status FROM reembolsos WHERE chave_idempotencia = %s", (key,)).fetchone()
    assert "nada foi debitado" not in json.dumps(out, ensure_ascii=False)
    assert claim.status not in (ClaimStatus.DECLINED, ClaimStatus.FAILED_BEFORE_GATEWAY), claim.status
    assert reservation == ("reservado",), "the amount must stay held while the outcome is not final"
    after = erp.execute("SELECT valor_reembolsado FROM pedidos WHERE id = %s", (pedido,)).fetchone()[0]
    assert after == before == Decimal(before)
