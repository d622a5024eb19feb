"""Gateways forget idempotency keys (Stripe may prune them after 24 hours): a
re-send past that window is a *new* request and could debit a second time. Past
``GATEWAY_IDEMPOTENCY_WINDOW_H`` (default 23 h) counted from the claim's first
possible send, neither the reconciler nor a repeat of the conversation re-sends:
the claim stays ``desconhecido``, the amount held, a metric counts it, and a
person must reconcile it. Real gateway server, moto server, real PostgreSQL."""

from __future__ import annotations

import json
import time
import uuid
from decimal import Decimal

from cadencia_shared.ledger import ClaimStatus, refund_idempotency_key
from cadencia_shared.observability import Metric
from conciliar_reembolsos.logic import Verdict
from scripts.local_stack.emf import capture_emf
from tests.test_refund_inflight import (  # noqa: F401 (fixture)
    ORDER,
    ledger,
    private_ledger,
    reconcile_pass,
    refund_here,
)

HOUR_S = 3600


def _unknown_claim_sent_hours_ago(local_stack, erp, hours: float) -> tuple[str, str]:
    """A claim whose only request may have left ``hours`` ago and was never
    answered (the gateway did not keep it: a re-send now would debit)."""
    store = ledger(local_stack)
    past = time.time() - hours * HOUR_S
    store.table.clock = lambda: past
    conv = f"janela-{uuid.uuid4().hex[:8]}"
    key = refund_idempotency_key(conv, ORDER)
    claim = store.claim_refund(key=key, conversation_id=conv, order_id=ORDER, customer_id=1001,
                               amount=Decimal("25.00"), lease_s=30)
    claim = store.settle_claim(claim, ClaimStatus.SENDING)
    store.settle_claim(claim, ClaimStatus.UNKNOWN)
    erp.execute("INSERT INTO reembolsos (chave_idempotencia, pedido_id, valor, status) "
                "VALUES (%s, %s, 25.00, 'reservado')", (key,  ORDER))
    return conv, key


def _reservation(erp, key: str) -> str:
    return erp.execute("SELECT status FROM reembolsos WHERE chave_idempotencia = %s", (key,)).fetchone()[0]


def test_the_reconciler_never_resends_past_the_window(local_stack, gateway, erp):
    _, key = _unknown_claim_sent_hours_ago(local_stack, erp, 24)
    with capture_emf() as emf:
        report = reconcile_pass(local_stack)
    visit = next(v for v in report.visits if v.key == key)
    assert visit.verdict is Verdict.MANUAL
    assert gateway.debits() == [] and gateway.stats()["reembolso"] == 0, "nothing may be re-sent"
    store = ledger(local_stack)
    claim = store.get_claim(key)
    assert claim.status is ClaimStatus.UNKNOWN and _reservation(erp, key) == "reservado"
    assert key in {c.key for c in store.unsettled_claims(limit=100)}  # still pending: the age alarm sees it
    assert report.oldest_unsettled_s >= 24 * HOUR_S - 60
    assert sum(n for (name, _), n in emf.totals().items() if name == Metric.PAST_IDEMPOTENCY_WINDOW) == 1


def test_a_repeat_of_the_conversation_past_the_window_holds_and_says_so_truthfully(local_stack, gateway, erp):
    conv, key = _unknown_claim_sent_hours_ago(local_stack, erp, 24)
    out = refund_here(local_stack, {"conversaId": conv, "clienteId": 1001, "pedidoId": ORDER, "valor": 25.0})
    assert out["ok"] is True and out["resultado"] == "resultado_desconhecido", out
    text = json.dumps(out, ensure_ascii=False)
    assert "emitido" not in text and "nada foi debitado" not in text
    assert gateway.stats()["reembolso"] == 0
    assert ledger(local_stack).get_claim(key).status is ClaimStatus.UNKNOWN
    assert _reservation(erp, key) == "reservado"


def test_inside_the_window_the_claim_is_still_resent(local_stack, gateway, erp):
    _, key = _unknown_claim_sent_hours_ago(local_stack, erp, 22)
    report = reconcile_pass(local_stack)
    assert next(v for v in report.visits if v.key == key).verdict is Verdict.EXECUTED
    assert [d["idempotencyKey"] for d in gateway.debits()] == [key]


def test_the_window_is_configured(local_stack, gateway, erp):
    _, key = _unknown_claim_sent_hours_ago(local_stack, erp, 2)
    report = reconcile_pass(local_stack, GATEWAY_IDEMPOTENCY_WINDOW_H="1")
    assert next(v for v in report.visits if v.key == key).verdict is Verdict.MANUAL
    assert gateway.stats()["reembolso"] == 0


def test_racing_and_killed_reconcilers_never_resend_past_the_window(local_stack, gateway, erp):
    """Three reconciler processes at once over five claims past the window, one of
    them SIGKILLed mid-pass, then a pass after the leases: not one POST reaches the
    gateway, every claim ends held (``desconhecido``) with its amount reserved."""
    import os
    import signal

    from tests.test_conciliar_reembolsos import _reconciler_process

    keys = [_unknown_claim_sent_hours_ago(local_stack, erp, 30)[1] for _ in range(5)]
    procs = [_reconciler_process(local_stack) for _ in range(3)]
    time.sleep(1.0)  # the victim is importing or mid-pass: either way it must not send
    os.kill(procs[0].pid, signal.SIGKILL)
    assert procs[0].wait(timeout=30) == -signal.SIGKILL
    for proc in procs[1:]:
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, out
    time.sleep(2.5)  # leases (2 s) of whatever the killed pass held are over
    reconcile_pass(local_stack)
    store = ledger(local_stack)
    assert gateway.stats()["reembolso"] == 0 and gateway.debits() == []
    assert [store.get_claim(k).status for k in keys] == [ClaimStatus.UNKNOWN] * 5
    assert [_reservation(erp, k) for k in keys] == ["reservado"] * 5
