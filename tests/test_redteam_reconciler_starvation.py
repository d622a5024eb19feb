"""Red-team finding on the scheduled reconciler's work list."""

from __future__ import annotations

import json
import threading
import time
import uuid
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cadencia_shared.ledger import ClaimStatus, refund_idempotency_key
from tests.test_refund_inflight import FAST, ORDER, ledger, private_ledger, reconcile_pass  # noqa: F401 (fixture)

BATCH = 3


class _Gateway(BaseHTTPRequestHandler):
    """Approves every refund at once, except the keys in ``stuck``: those stay in
    flight forever (409), as a gateway holds a key it is still processing."""

    stuck: set[str] = set()

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = self.headers["Idempotency-Key"]
        if key in self.stuck:
            code, payload = 409, {"erro": "requisicao_em_andamento"}
        else:
            code, payload = 201, {"id": f"re_{key[-20:]}", "status": "aprovado", "valor": body["valor"],
                                  "pedidoId": body["pedidoId"], "criadoEm": "2026-12-01T00:00:00Z"}
        raw = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *_):
        pass


@pytest.fixture
def selective_gateway(monkeypatch):
    handler = type("Gw", (_Gateway,), {"stuck": set()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setitem(FAST, "GATEWAY_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setitem(FAST, "RECONCILER_BATCH", str(BATCH))
    yield handler.stuck
    server.shutdown()
    server.server_close()


def _unknown_claim(store) -> str:
    conv = f"starve-{uuid.uuid4().hex[:8]}"
    key = refund_idempotency_key(conv, ORDER)
    claim = store.claim_refund(key=key, conversation_id=conv, order_id=ORDER, customer_id=1001,
                               amount=Decimal("10.00"), lease_s=1)
    store.settle_claim(claim, ClaimStatus.UNKNOWN)
    time.sleep(0.01)  # distinct visit times: the index's sort key
    return key


def test_claims_the_gateway_cannot_settle_do_not_starve_newer_ones(local_stack, erp, selective_gateway):
    """Was a defect: the sparse index was sorted by creation, so ``batch`` claims
    that stay unknown (a gateway holding their keys in flight) kept their place at
    the head and no newer claim was ever reconciled. Its sort key is now the last
    visit (``visitadoEm``): a visit that leaves a claim pending sends it to the back,
    so the next pass reaches the claims behind it."""
    store = ledger(local_stack)
    stuck = [_unknown_claim(store) for _ in range(BATCH)]
    selective_gateway.update(stuck)
    newest = _unknown_claim(store)
    for _ in range(3):
        reconcile_pass(local_stack)
    assert store.get_claim(newest).status is ClaimStatus.EXECUTED, "the settleable claim was never visited"


def test_passes_rotate_through_every_pending_claim(local_stack, erp, selective_gateway):
    """Seven claims the gateway keeps in flight, three per pass: three passes visit
    every one of them (a round robin, not the same head three times)."""
    store = ledger(local_stack)
    stuck = [_unknown_claim(store) for _ in range(7)]
    selective_gateway.update(stuck)
    visited = [v.key for _ in range(3) for v in reconcile_pass(local_stack).visits]
    assert len(visited) == 3 * BATCH
    assert set(visited) == set(stuck)
    assert all(store.get_claim(k).status is ClaimStatus.UNKNOWN for k in stuck)  # nothing settled on a 409
