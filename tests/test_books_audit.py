"""The books' consistency audit (run by the scheduled reconciler, and locally by
``scripts/local-stack audit``): ERP reservations, executed claims and the gateway's
debits are compared key by key against the moto server, the real PostgreSQL (as the
reconciler's own DB user) and the real gateway; each disagreement is a metric, an
operator line and, only where provably safe, a repair."""

from __future__ import annotations

import os
import subprocess
import uuid
from decimal import Decimal
from pathlib import Path

from cadencia_shared.ledger import refund_idempotency_key
from conciliar_reembolsos import handler as reconciler_handler
from emitir_reembolso import handler as refund_handler
from emitir_reembolso.gateway import PaymentGatewayClient
from orchestrator.invokers.local import LocalContext, function_environment
from scripts.local_stack.emf import capture_emf
from tests.test_refund_inflight import FAST, ORDER, _event, ledger, private_ledger, refund_here  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
METRIC, OPEN_METRIC = "DivergenciasNosLivros", "DivergenciasNosLivrosAbertas"


def _key(label: str) -> str:
    return refund_idempotency_key(f"books-{label}-{uuid.uuid4().hex[:8]}", ORDER)


def _reserve(erp, key: str, valor: str, *, age_s: int) -> None:
    erp.execute("INSERT INTO reembolsos (chave_idempotencia, pedido_id, valor, status, atualizado_em) "
                "VALUES (%s, %s, %s, 'reservado', now() - make_interval(secs => %s))",
                (key, ORDER, Decimal(valor), age_s))


def _row(erp, key: str) -> str | None:
    row = erp.execute("SELECT status FROM reembolsos WHERE chave_idempotencia = %s", (key,)).fetchone()
    return row[0] if row else None


def audit_pass(local_stack, **extra: str):
    from conciliar_reembolsos.settings import ReconcilerSettings

    refund_handler.reset_adapters()
    with function_environment({**local_stack.reconciler_environment(), **FAST, **extra}):
        report = reconciler_handler.build_audit(ReconcilerSettings.from_env()).run(progress=lambda _: None)
    refund_handler.reset_adapters()
    return report


def _kinds(report, key: str) -> list[tuple[str, bool]]:
    return [(f.kind.value, f.repaired) for f in report.findings if f.key == key]


def test_a_reservation_with_no_claim_is_released_only_when_provably_abandoned(local_stack, gateway, erp):
    old, young = _key("old"), _key("young")
    _reserve(erp, old, "40.00", age_s=3600)  # far older than the claim's lease (600 s here)
    _reserve(erp, young, "30.00", age_s=0)  # a claim could still be on its way: not judged yet
    live = _key("live")  # a claim under its lease: the reservation is its
    ledger(local_stack).claim_refund(key=live, conversation_id=live.split("#")[0], order_id=ORDER,
                                     customer_id=1001, amount=Decimal("20.00"), lease_s=300)
    _reserve(erp, live, "20.00", age_s=3600)
    with capture_emf() as emf:
        report = audit_pass(local_stack, REFUND_CLAIM_LEASE_S="600")  # an injected lease: no wall-clock race
    assert _kinds(report, old) == [("reserva_sem_reivindicacao_viva", True)]
    assert _row(erp, old) == "liberado"
    assert _kinds(report, young) == [] and _row(erp, young) == "reservado"
    assert _kinds(report, live) == [] and _row(erp, live) == "reservado"
    line = next(f.line() for f in report.findings if f.key == old)
    assert "4821" in line and "40.00" in line and "liberada" in line
    totals = emf.totals()
    assert totals[(METRIC, (("Divergencia", "reserva_sem_reivindicacao_viva"),))] >= 1
    assert (OPEN_METRIC, ()) in totals  # emitted every pass, 0 when everything was repaired


def test_books_that_agree_give_no_finding(local_stack, gateway, erp):
    conv = f"books-ok-{uuid.uuid4().hex[:8]}"
    assert refund_here(local_stack, _event(conv, 25.00))["resultado"] == "executado"
    report = audit_pass(local_stack)
    assert _kinds(report, refund_idempotency_key(conv, ORDER)) == []
    assert report.gateway_listed is True


def test_an_executed_claim_without_its_erp_refund_is_reported_not_repaired(local_stack, gateway, erp):
    conv = f"books-erp-{uuid.uuid4().hex[:8]}"
    key = refund_idempotency_key(conv, ORDER)
    assert refund_here(local_stack, _event(conv, 15.00))["resultado"] == "executado"
    erp.execute("UPDATE reembolsos SET status = 'liberado' WHERE chave_idempotencia = %s", (key,))  # edited by hand
    with capture_emf() as emf:
        report = audit_pass(local_stack)
    assert ("executado_sem_reembolso_no_erp", False) in _kinds(report, key)
    assert _row(erp, key) == "liberado"
    assert emf.totals()[(OPEN_METRIC, ())] >= 1


def test_a_gateway_debit_without_an_executed_claim_is_reported(local_stack, gateway, erp):
    key = _key("stray")
    PaymentGatewayClient(local_stack.gateway_url, 2).refund(
        idempotency_key=key, order_id=ORDER, amount=Decimal("9.99"), token=local_stack.gateway_token)
    report = audit_pass(local_stack)
    assert _kinds(report, key) == [("debito_sem_reivindicacao_executada", False)]
    assert all(conv not in f.line() for f in report.findings for conv in ("1001", "Maria"))


def test_without_a_debit_listing_the_gateway_is_not_judged(local_stack, gateway, erp):
    key = _key("stray")
    PaymentGatewayClient(local_stack.gateway_url, 2).refund(
        idempotency_key=key, order_id=ORDER, amount=Decimal("9.99"), token=local_stack.gateway_token)
    report = audit_pass(local_stack, GATEWAY_LISTS_DEBITS="false")
    assert report.gateway_listed is False and _kinds(report, key) == []


def test_a_scheduled_event_runs_the_audit_after_the_pass(local_stack, gateway, erp):
    old = _key("handler")
    _reserve(erp, old, "11.00", age_s=3600)
    refund_handler.reset_adapters()
    with function_environment({**local_stack.reconciler_environment(), **FAST}):
        out = reconciler_handler.lambda_handler(reconciler_handler.scheduled_event(),
                                                LocalContext("cadencia-conciliar-reembolsos"))
    refund_handler.reset_adapters()
    assert out["ok"] is True and out["auditoria"]["reparadas"] >= 1
    assert _row(erp, old) == "liberado"


def test_local_command_runs_one_audit_pass_with_progress(local_stack, gateway, erp):
    old = _key("cli")
    _reserve(erp, old, "12.00", age_s=3600)
    env = {**os.environ, "CADENCIA_LOCAL_STACK_DIR": local_stack.directory, "LEDGER_TABLE": FAST["LEDGER_TABLE"]}
    out = subprocess.run(["bash", "scripts/local-stack", "audit"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert "chave(s) a verificar" in out.stdout and "reserva_sem_reivindicacao_viva" in out.stdout
    assert _row(erp, old) == "liberado"
    assert ledger(local_stack).get_claim(old) is None  # the audit creates no claim


def test_hostile_keys_in_the_gateway_listing_are_reported_never_crash_the_audit(local_stack, gateway, erp):
    """The listing is outside input: empty, oversized, control and ``#``-only keys are
    judged as debits no claim holds; the audit finishes and repairs nothing for them."""
    from conciliar_reembolsos.debits import GatewayDebit
    from conciliar_reembolsos.settings import ReconcilerSettings

    hostile = ["", "x" * 5000, "\u0000", "#", "reivindicacao#" * 80, "é" * 600]
    refund_handler.reset_adapters()
    with function_environment({**local_stack.reconciler_environment(), **FAST}):
        audit = reconciler_handler.build_audit(ReconcilerSettings.from_env())

        class Listing:
            def debits(self, *, since_s: int) -> list[GatewayDebit]:
                return [GatewayDebit(k, ORDER, Decimal("1.00")) for k in hostile]

        audit.debits = Listing()
        report = audit.run()
    refund_handler.reset_adapters()
    kinds = {f.key: (f.kind.value, f.repaired) for f in report.findings if f.key in hostile}
    assert kinds == {k: ("debito_sem_reivindicacao_executada", False) for k in hostile}
