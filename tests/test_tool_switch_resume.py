"""An approved refund resumed after an operator stopped refunds: nothing runs, the
approval is voided (it authorises nothing later, as after a cancellation), and the
customer and a person are told the truth: approved, suspended, nothing done."""
from __future__ import annotations

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.ledger import SwitchState, SwitchStore
from orchestrator import texts
from orchestrator.model import Deadline
from orchestrator.resume import Resumer

from .test_approval_lifecycle import REFUND, _approval, _ask, _audit, _conv, _decide, _details, _invoker

REFUND_TOOL = "emitir_reembolso"


def _switch(ledger, state: SwitchState) -> None:
    SwitchStore(ledger.table).set_switch(REFUND_TOOL, state, subject="sub-sup-1", name="Supervisora Ana",
                                         reason="gateway em manutenção")


def test_an_approved_refund_resumed_while_refunds_are_stopped_is_voided(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("aprovada-desligada")
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv)
    approval = _approval(ledger, conv)
    assert _decide(ledger, approval)["ok"] is True
    _switch(ledger, SwitchState.STOPPED)

    resumed = Resumer.of(orch).resume(approval, Deadline.after(60))
    assert resumed.reason == "aprovada_ferramenta_desligada" and resumed.status == "aguardando_humano"
    assert resumed.reply == texts.APPROVED_TOOL_STOPPED.format(order_id=REFUND["pedidoId"])
    assert invoker.calls[REFUND_TOOL] == 0 and gateway.debits_for(conv) == []
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.VOIDED
    voided = [_details(a) for a in _audit(ledger, conv) if a["evento"] == "APROVACAO_ANULADA"]
    assert voided == [{"aprovacaoId": approval, "statusAnterior": "aprovada", "motivo": "ferramenta_desligada"}]

    # Turned back on, the voided approval authorises nothing.
    _switch(ledger, SwitchState.RUNNING)
    assert Resumer.of(orch).resume(approval, Deadline.after(60)).reason == "nada_a_retomar"
    assert gateway.debits_for(conv) == []
