"""A second refund of an order needs a person, whatever this conversation's own
history is: a released claim of this conversation (its first refund failed before
the gateway) proves nothing about the order, so the gate still reads the ERP's
refunded figure. End to end: the real SDK with a scripted model, the real ledger
(moto), the real refund and status Lambda handlers, the real PostgreSQL and the
real gateway — every debit counted on the gateway itself.

The threshold is R$ 500 (the default): R$ 50 alone never needs approval; being a
second refund does."""

from __future__ import annotations

import uuid
from decimal import Decimal

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.catalog import EMITIR_REEMBOLSO, TOOLS
from cadencia_shared.ledger import ClaimStatus, ItemType, Ledger, refund_idempotency_key
from cadencia_shared.settings import ApprovalSettings
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline
from orchestrator.resume import Resumer

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build

OPERATOR = "ana.operadora"
POLICY = {"APROVADORES": OPERATOR}  # threshold: the default R$ 500
FIFTY = {"pedidoId": "4821", "valor": 50.0}


def _conv(label: str) -> str:
    return f"prior-{label}-{uuid.uuid4().hex[:8]}"


def _turn(conv: str) -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                       mensagem="quero o reembolso")


def _invoker(tools, *, gateway_down: bool = False) -> CountingInvoker:
    envs = {name: tools.environment(spec) for name, spec in TOOLS.items()}
    if gateway_down:  # nothing listens there: connection refused, a failure before the gateway
        envs[EMITIR_REEMBOLSO.name]["GATEWAY_URL"] = "http://127.0.0.1:9"
    return CountingInvoker(InProcessInvoker(envs))


def _ask(ledger: Ledger, invoker, conv: str, arguments: dict = FIFTY):
    model = ScriptedModel(tool_use("emitir_reembolso", arguments), text_reply("Posso ajudar em algo mais?"))
    orch, _ = build(model, ledger, invoker, **POLICY)
    return orch.handle(_turn(conv), Deadline.after(60)), orch


def _first_refund_fails_before_the_gateway(ledger: Ledger, tools, conv: str) -> None:
    reply, _ = _ask(ledger, _invoker(tools, gateway_down=True), conv)
    assert reply.status == "ativa"
    claim = ledger.get_claim(refund_idempotency_key(conv, "4821"))
    assert claim is not None and claim.status is ClaimStatus.FAILED_BEFORE_GATEWAY


def _approvals(ledger: Ledger, conv: str) -> list:
    return [ApprovalStore(ledger).get(i["aprovacaoId"]) for i in ledger.history(conv, item_type=ItemType.APPROVAL)]


def test_a_refund_made_in_the_erp_after_a_released_claim_makes_the_next_one_a_second_refund(
        mocked_aws, gateway, tools, erp):
    ledger, conv = mocked_aws["ledger"], _conv("erp")
    _first_refund_fails_before_the_gateway(ledger, tools, conv)
    assert gateway.debits_for(conv) == []
    # Someone refunds the order directly in the ERP.
    erp.execute("UPDATE pedidos SET valor_reembolsado = 20, status_reembolso = 'reembolsado_parcial' "
                "WHERE id = '4821'")
    invoker = _invoker(tools)
    reply, _ = _ask(ledger, invoker, conv)
    assert reply.status == "aguardando_aprovacao"
    (record,) = _approvals(ledger, conv)
    assert record.reason == "segundo_reembolso"
    assert invoker.calls["emitir_reembolso"] == 0
    assert gateway.debits_for(conv) == []


def test_another_conversations_approved_refund_after_a_released_claim_makes_the_next_one_a_second_refund(
        mocked_aws, gateway, tools):
    ledger = mocked_aws["ledger"]
    conv_a, conv_b = _conv("a"), _conv("b")
    _first_refund_fails_before_the_gateway(ledger, tools, conv_a)  # A holds the first-refunder mark
    # B asks: a second refund (A marked first), so a person approves it, and it runs.
    reply, orch_b = _ask(ledger, _invoker(tools), conv_b)
    assert reply.status == "aguardando_aprovacao"
    (record_b,) = _approvals(ledger, conv_b)
    ApprovalStore(ledger).decide(record_b.id, approve=True, approver=OPERATOR, justification="conferido",
                                 allowed_approvers=ApprovalSettings.from_env(POLICY).approvers)
    assert Resumer.of(orch_b).resume(record_b.id, Deadline.after(60)).reason == "aprovada_executada"
    assert len(gateway.debits_for(conv_b)) == 1
    # A asks again: the order was refunded by B; one approval must not pay for two debits.
    invoker = _invoker(tools)
    reply, _ = _ask(ledger, invoker, conv_a)
    assert reply.status == "aguardando_aprovacao"
    (record_a,) = _approvals(ledger, conv_a)
    assert (record_a.status, record_a.reason) == (ApprovalStatus.PENDING, "segundo_reembolso")
    assert invoker.calls["emitir_reembolso"] == 0
    assert gateway.debits_for(conv_a) == []
    assert len(gateway.debits()) == 1  # B's, approved


def test_a_released_claim_on_an_order_nobody_refunded_still_runs_without_approval(mocked_aws, gateway, tools):
    """The fix must not ask a person for a first refund retried after a failure."""
    ledger, conv = mocked_aws["ledger"], _conv("retry")
    _first_refund_fails_before_the_gateway(ledger, tools, conv)
    reply, _ = _ask(ledger, _invoker(tools), conv)
    assert reply.status == "ativa"
    (debit,) = gateway.debits_for(conv)
    assert Decimal(str(debit["valor"])) == Decimal("50.00")
    assert _approvals(ledger, conv) == []


def test_an_executed_refund_of_this_conversation_asked_again_is_answered_by_its_key_not_a_person(
        mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("repete")
    assert _ask(ledger, _invoker(tools), conv)[0].status == "ativa"
    invoker = _invoker(tools)
    reply, _ = _ask(ledger, invoker, conv)
    assert reply.status == "ativa"
    assert invoker.calls["emitir_reembolso"] == 1  # the tool answered it: bloqueado_por_idempotencia
    assert _approvals(ledger, conv) == []
    assert len(gateway.debits_for(conv)) == 1


def test_the_claims_the_gate_trusts_are_exactly_those_the_refund_can_never_release():
    """``ANSWERED_BY_ITS_KEY`` derived from the refund's own transition table: the
    states from which no path leads to a released claim (one a new amount may retake)."""
    from emitir_reembolso.transitions import TABLE
    from orchestrator.approval_gate import ANSWERED_BY_ITS_KEY

    def reaches_release(state: ClaimStatus, seen: frozenset = frozenset()) -> bool:
        nexts = {step.to for (origin, _), step in TABLE.items() if origin is state}
        return ClaimStatus.FAILED_BEFORE_GATEWAY in nexts or any(
            reaches_release(n, seen | {state}) for n in nexts - seen - {state})

    never_released = {s for s in ClaimStatus if s is not ClaimStatus.FAILED_BEFORE_GATEWAY
                      and not reaches_release(s)}
    assert never_released == set(ANSWERED_BY_ITS_KEY)
