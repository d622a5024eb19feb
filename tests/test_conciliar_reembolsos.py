"""The scheduled reconciler against the moto server, the real PostgreSQL (as its
own DB user) and the real gateway: one pass settles what the gateway has decided,
leaves what is still in flight held, releases only what never left, and says so
with one metric per outcome; the event edge is strict; the local one-pass command
prints its progress."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from cadencia_shared.ledger import ClaimStatus, refund_idempotency_key
from conciliar_reembolsos import handler as reconciler_handler
from conciliar_reembolsos.logic import Verdict
from emitir_reembolso.gateway import PaymentGatewayClient
from orchestrator.invokers.local import LocalContext, function_environment
from scripts.local_stack.emf import capture_emf
from tests.test_refund_inflight import FAST, ORDER, ledger, reconcile_pass

ROOT = Path(__file__).resolve().parents[1]


def _claim(local_stack, *, status: ClaimStatus, valor: str = "50.00", lease_s: int = 1, clock=None):
    store = ledger(local_stack)
    if clock is not None:
        store._clock = clock
    conv = f"rec-{uuid.uuid4().hex[:8]}"
    key = refund_idempotency_key(conv, ORDER)
    claim = store.claim_refund(chave=key, conversa_id=conv, pedido_id=ORDER, cliente_id=1001,
                               valor=Decimal(valor), lease_s=lease_s)
    if status is not ClaimStatus.IN_PROGRESS:
        store.settle_claim(claim, status)
    return key


def _reserve(erp, key: str, valor: str = "50.00") -> None:
    erp.execute("INSERT INTO reembolsos (chave_idempotencia, pedido_id, valor, status) VALUES (%s, %s, %s, 'reservado')",
                (key, ORDER, Decimal(valor)))


def _reservation(erp, key: str) -> str | None:
    row = erp.execute("SELECT status FROM reembolsos WHERE chave_idempotencia = %s", (key,)).fetchone()
    return row[0] if row else None


def _visit(report, key):
    return next(v for v in report.visits if v.chave == key)


def test_one_pass_settles_each_kind_of_unsettled_claim(local_stack, gateway, erp):
    post = PaymentGatewayClient(local_stack.gateway_url, 2)
    debited = _claim(local_stack, status=ClaimStatus.UNKNOWN)  # its POST did debit
    post.refund(idempotency_key=debited, pedido_id=ORDER, valor=Decimal("50.00"), token=local_stack.gateway_token)
    never_arrived = _claim(local_stack, status=ClaimStatus.SENDING)  # died after recording, before the POST
    abandoned = _claim(local_stack, status=ClaimStatus.IN_PROGRESS)  # died before recording a send
    live = _claim(local_stack, status=ClaimStatus.SENDING, lease_s=300)  # its owner is still working
    for key in (debited, never_arrived, abandoned, live):
        _reserve(erp, key)
    time.sleep(1.1)  # the short leases are over
    with capture_emf() as emf:
        report = reconcile_pass(local_stack)
    assert _visit(report, debited).resultado is Verdict.EXECUTED
    assert _visit(report, never_arrived).resultado is Verdict.EXECUTED  # re-sent: performed once
    assert _visit(report, abandoned).resultado is Verdict.RELEASED
    assert _visit(report, live).resultado is Verdict.BUSY
    assert [_reservation(erp, k) for k in (debited, never_arrived, abandoned, live)] == [
        "executado", "executado", "liberado", "reservado"]
    keys = {d["idempotencyKey"] for d in gateway.debits()}
    assert keys == {debited, never_arrived} and len(gateway.debits()) == 2
    store = ledger(local_stack)
    assert store.get_claim(abandoned).status is ClaimStatus.FAILED_BEFORE_GATEWAY
    pending = {c.chave for c in store.unsettled_claims(limit=1000)}
    assert live in pending and not pending & {debited, never_arrived, abandoned}
    outcomes = {dims: n for (name, dims), n in emf.totals().items() if name == "ConciliacoesDeReembolso"}
    assert outcomes[(("Resultado", "executado"),)] >= 2 and outcomes[(("Resultado", "liberado"),)] >= 1
    assert any(name == "IdadeDoReembolsoPendenteMaisAntigo" for name, _ in emf.totals())


def test_in_flight_stays_unknown_and_held_and_a_refused_connection_frees_nothing(local_stack, gateway, erp):
    key = _claim(local_stack, status=ClaimStatus.UNKNOWN, valor="30.00")
    _reserve(erp, key, "30.00")
    # The original request is still being processed at the gateway: 409 to the re-send.
    slow = PaymentGatewayClient(local_stack.gateway_url, 0.5)
    gateway.inject("processamento_lento", atraso_s=3)
    with pytest.raises(Exception):
        slow.refund(idempotency_key=key, pedido_id=ORDER, valor=Decimal("30.00"), token=local_stack.gateway_token)
    assert _visit(reconcile_pass(local_stack), key).resultado is Verdict.UNKNOWN
    assert _reservation(erp, key) == "reservado"
    # The gateway now unreachable: a refused re-send proves nothing about the first request.
    refund_env = {**local_stack.reconciler_environment(), **FAST, "GATEWAY_URL": "http://127.0.0.1:9"}
    with function_environment(refund_env):
        from conciliar_reembolsos.settings import ReconcilerSettings

        reconciler_handler.adapters.cache_clear()
        report = reconciler_handler.build(ReconcilerSettings.from_env()).run_pass()
        reconciler_handler.adapters.cache_clear()
    assert _visit(report, key).resultado is Verdict.UNKNOWN
    assert _reservation(erp, key) == "reservado" and ledger(local_stack).get_claim(key).status is ClaimStatus.UNKNOWN
    time.sleep(3)
    assert _visit(reconcile_pass(local_stack), key).resultado is Verdict.EXECUTED
    assert [d["valor"] for d in gateway.debits()] == ["30.00"]


@pytest.mark.parametrize("event", [
    None, "Scheduled Event", [], {}, {"source": "aws.events"},
    {"source": "evil", "detail-type": "Scheduled Event"},
    {"source": "aws.events", "detail-type": "Scheduled Event\n"},
    {"source": ["aws.events"], "detail-type": "Scheduled Event"},
])
def test_anything_but_a_scheduled_event_is_a_typed_error_and_touches_nothing(local_stack, gateway, event):
    out = reconciler_handler.lambda_handler(event, LocalContext("cadencia-conciliar-reembolsos"))
    assert out["ok"] is False and out["erro"]["codigo"] == "entrada_invalida"
    assert gateway.stats()["reembolso"] == 0 and gateway.stats()["consulta"] == 0


def test_local_command_runs_one_pass_with_progress(local_stack, gateway, erp):
    key = _claim(local_stack, status=ClaimStatus.UNKNOWN, valor="10.00")
    _reserve(erp, key, "10.00")
    env = {**os.environ, "CADENCIA_LOCAL_STACK_DIR": local_stack.directory}
    out = subprocess.run(["bash", "scripts/local-stack", "reconcile"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert "pendente" in out.stdout and "desconhecido -> executado" in out.stdout
    assert "reconciliation pass" in out.stdout
    assert [d["idempotencyKey"] for d in gateway.debits()] == [key]


def test_a_scheduled_event_runs_one_pass_through_the_handler(local_stack, gateway, erp):
    key = _claim(local_stack, status=ClaimStatus.UNKNOWN, valor="12.00")
    _reserve(erp, key, "12.00")
    reconciler_handler.adapters.cache_clear()
    with function_environment({**local_stack.reconciler_environment(), **FAST}):
        out = reconciler_handler.lambda_handler(reconciler_handler.scheduled_event(),
                                                LocalContext("cadencia-conciliar-reembolsos"))
    reconciler_handler.adapters.cache_clear()
    assert out["ok"] is True and out["resultado"]["executado"] >= 1
    assert _reservation(erp, key) == "executado"
