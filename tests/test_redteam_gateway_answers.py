"""Red-team findings on how the refund reads the gateway's answers.

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


class _AcceptedGateway(_PendingGateway):
    """Answers with a 2xx other than 200/201: the request was taken (202 Accepted:
    "will be processed") or done without a body (204)."""

    code = 202

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        payload = b"" if self.code == 204 else json.dumps({"id": "re_acc_1", "status": "pendente"}).encode()
        self.send_response(self.code)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.mark.parametrize("code", [202, 204])
def test_a_2xx_the_client_does_not_know_is_not_read_as_a_rejection(tools, erp, code):
    """DEFECT: ``PaymentGatewayClient._classify`` turns every status below 500
    (except 409) into ``GatewayRejected``, i.e. the REJECTED event, which from
    SENDING *releases* the amount and answers "nada foi debitado". A 202 Accepted
    says the gateway took the refund and will perform it; a 204 says it did. Only
    a 4xx proves this request moved nothing; any other unexpected status must
    keep the outcome unknown and the amount held."""
    handler_cls = type("Gw", (_AcceptedGateway,), {"code": code})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        tools.overrides[EMITIR_REEMBOLSO.name] = {"GATEWAY_URL": f"http://127.0.0.1:{server.server_address[1]}"}
        conv = f"conv-{uuid.uuid4().hex[:8]}"
        out = tools(EMITIR_REEMBOLSO, {"conversaId": conv, "clienteId": 1001, "pedidoId": "4821", "valor": 10.0})
    finally:
        server.shutdown()
        server.server_close()
    key = refund_idempotency_key(conv, "4821")
    reservation = erp.execute("SELECT status FROM reembolsos WHERE chave_idempotencia = %s", (key,)).fetchone()
    assert "nada foi debitado" not in json.dumps(out, ensure_ascii=False), out
    assert reservation == ("reservado",), "the amount must stay held while the outcome is not known"
