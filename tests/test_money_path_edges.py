"""Paths of the money code that mutation testing found no test for (docs/mutation-testing.md):
a claim taken by somebody else between the read and the write, and what the retry ceiling
records about each attempt. Real ledger (moto), real PostgreSQL, real gateway."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from cadencia_shared.catalog import EMITIR_REEMBOLSO, TOOLS
from cadencia_shared.ledger import ClaimStatus, Ledger, refund_idempotency_key
from emitir_reembolso.logic import RefundService
from orchestrator.controls import RetryCeiling
from orchestrator.tools import ToolCall


def _claim(ledger: Ledger, conv: str, valor: str = "50.00"):
    return ledger.claim_refund(key=refund_idempotency_key(conv, "4821"), conversation_id=conv, order_id="4821",
                               customer_id=1001, amount=Decimal(valor), lease_s=30)


def _reservations(erp, conv: str) -> list[tuple]:
    return erp.execute("SELECT status FROM reembolsos WHERE chave_idempotencia = %s",
                       (refund_idempotency_key(conv, "4821"),)).fetchall()


@pytest.mark.parametrize("final", [False, True], ids=["in-progress", "declined"])
def test_a_claim_taken_behind_the_row_lock_is_answered_from_it_and_reserves_nothing(
        tools, gateway, erp, mocked_aws, monkeypatch, final):
    """If something wrote the claim without the order's row lock (between the read and the
    conditional PutItem), the refund answers from the claim it lost to, rolls its
    reservation back and never reads the secret or calls the gateway."""
    ledger = mocked_aws["ledger"]
    conv = f"conv-bypass-{uuid.uuid4().hex[:6]}"
    claim = _claim(ledger, conv)
    if final:
        claim = ledger.settle_claim(claim, ClaimStatus.DECLINED, gateway_transaction="rb_x")
    monkeypatch.setattr(Ledger, "get_claim", lambda self, chave: None)  # the read misses the claim

    out = tools(EMITIR_REEMBOLSO, {"conversaId": conv, "clienteId": 1001, "pedidoId": "4821", "valor": 50})

    assert out["ok"] is True
    if final:
        assert out["resultado"] == "bloqueado_por_idempotencia"
        assert out["dados"]["resultadoOriginal"] == ClaimStatus.DECLINED.value
        assert out["dados"]["conciliado"] is False  # this invocation reconciled nothing
    else:
        assert out["resultado"] == "em_processamento"
    assert out["dados"]["chaveIdempotencia"] == claim.key and out["dados"]["valor"] == "50.00"
    assert _reservations(erp, conv) == []  # the decision transaction rolled back
    assert gateway.stats()["reembolso"] == 0


@pytest.mark.parametrize("final", [False, True], ids=["retaken", "executed"])
def test_reconciling_a_claim_another_invocation_took_answers_from_its_claim(mocked_aws, final):
    """Two reconcilers of one stale claim: the one that loses the fenced retake answers
    from the winner's claim and touches nothing (no secret, no gateway, no ERP)."""
    ledger = mocked_aws["ledger"]
    stale = ledger.settle_claim(_claim(ledger, f"conv-rec-{uuid.uuid4().hex[:6]}"), ClaimStatus.SENDING)
    # The other invocation took it over first (the same fenced retake the loser attempts).
    current = ledger.retake_claim(stale, amount=stale.amount, lease_s=30, status=ClaimStatus.RECONCILING)
    if final:
        current = ledger.settle_claim(current, ClaimStatus.EXECUTED, gateway_transaction="rb_y")

    def untouchable(*_args, **_kwargs):
        raise AssertionError("the losing reconciler must not read the secret or call anything")

    service = RefundService(ledger=ledger, orders=untouchable, gateway=untouchable,  # type: ignore[arg-type]
                            read_gateway_token=untouchable, claim_lease_s=30)
    out = service.reconcile(stale, as_repeat=True).to_json()

    assert out["ok"] is True and out["dados"]["chaveIdempotencia"] == stale.key
    if final:
        assert out["resultado"] == "bloqueado_por_idempotencia"
        assert out["dados"]["resultadoOriginal"] == ClaimStatus.EXECUTED.value
        assert out["dados"]["transacao"] == "rb_y"
        assert out["dados"]["conciliado"] is False  # the winner reconciled, not this invocation
    else:
        assert out["resultado"] == "em_processamento"


def test_the_ceiling_records_each_attempt_with_its_order_and_key(mocked_aws):
    """Lab 87's output fields come from these records: the order and the idempotency key
    of every attempt, allowed or refused."""
    ledger = mocked_aws["ledger"]
    ceiling = RetryCeiling(ledger, limit=1)
    conv = f"conv-rec-{uuid.uuid4().hex[:6]}"
    call = ToolCall(spec=TOOLS["emitir_reembolso"], tool_use_id="t1", arguments={"pedidoId": "4821", "valor": 1},
                    conversation_id=conv, customer_id=1001)
    first, second = ceiling.decide(call), ceiling.decide(call)
    assert (first.allowed, second.allowed) == (True, False)
    records = list(ledger.attempts(conv))
    assert [(r["pedidoId"], r["chaveIdempotencia"], r["tentativaNumero"]) for r in records] == [
        ("4821", refund_idempotency_key(conv, "4821"), 1), ("4821", refund_idempotency_key(conv, "4821"), 2)]


def test_a_lost_claim_says_which_key_and_state_it_lost_to(mocked_aws):
    """The reason an operator reads in a trace when a conditional claim loses."""
    from cadencia_shared.ledger import ClaimTaken

    claim = _claim(mocked_aws["ledger"], f"conv-lost-{uuid.uuid4().hex[:6]}")
    with pytest.raises(ClaimTaken) as lost:
        _claim(mocked_aws["ledger"], claim.conversation_id)
    assert str(lost.value) == f"claim {claim.key} already exists ({ClaimStatus.IN_PROGRESS})"
    assert lost.value.existing == claim


def test_the_ceiling_control_tells_the_model_why_and_records_how_each_attempt_ended(mocked_aws):
    """The ceiling as a control (orchestrator/controls.py): the refusal body the model reads
    names the attempt and the limit, and why an invoked attempt failed is read back on its
    record — written once, by the call's audit link (DecisionAudit), joined by number
    (killed survivors of mutation testing on RetryCeiling.before/after)."""
    from orchestrator.controls import CallContext, CallOutcome, DecisionAudit
    from orchestrator.invokers.base import Invocation, InvocationStatus
    from orchestrator.model import Deadline

    ledger = mocked_aws["ledger"]
    ceiling = RetryCeiling(ledger, limit=1)
    conv = f"conv-ctl-{uuid.uuid4().hex[:6]}"
    call = ToolCall(spec=TOOLS["emitir_reembolso"], tool_use_id="t1", arguments={"pedidoId": "4821", "valor": 1},
                    conversation_id=conv, customer_id=1001)
    first = CallContext(call=call, deadline=Deadline.after(60))
    assert ceiling.before(first) is None
    answered = CallOutcome(invocation=Invocation(InvocationStatus.TIMEOUT, detail="x"))
    ceiling.after(first, answered)
    DecisionAudit(ledger).after(first, answered)  # the chain unwinds in reverse: the audit last

    refusal = ceiling.before(CallContext(call=call, deadline=Deadline.after(60)))
    assert refusal is not None
    assert refusal.details == {
        "tentativaNumero": 2, "teto": 1,
        "mensagem": "Limite de tentativas atingido; um atendente humano vai revisar. Não tente novamente."}
    first_record = next(r for r in ledger.attempts(conv) if r["tentativaNumero"] == 1)
    assert (first_record["resultado"], first_record["detalhe"]) == ("erro_da_ferramenta", "tempo_esgotado")
