"""An approved R$ 150 refund of order 4821 (R$ 189.90, nothing refunded when it was
asked); before the resume the order is partially refunded outside this conversation
(the ERP's figure). The resume runs the approved call through the same chain, so
feasibility reads the order again: the gateway is never debited beyond the order's
remaining balance, and a call that no longer fits is not run (the approval stays
unconsumed, a person takes over, the customer is not told it was refunded)."""
from __future__ import annotations

from decimal import Decimal

import pytest

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from orchestrator.model import Deadline
from orchestrator.resume import Resumer

from .test_approval_lifecycle import _approval, _ask, _audit, _conv, _decide, _details, _invoker

ORDER_VALUE = Decimal("189.90")


@pytest.mark.parametrize(("elsewhere", "fits"), [("50.00", False), ("30.00", True)])
def test_the_resume_never_debits_beyond_what_the_order_still_holds(mocked_aws, gateway, tools, erp, elsewhere, fits):
    ledger, conv = mocked_aws["ledger"], _conv("reembolso-fora")
    _, orch = _ask(ledger, _invoker(tools), conv)
    approval = _approval(ledger, conv)
    assert _decide(ledger, approval)["ok"] is True
    erp.execute("UPDATE pedidos SET valor_reembolsado = %s WHERE id = '4821'", (elsewhere,))
    done = Resumer.of(orch).resume(approval, Deadline.after(60))
    debits = gateway.debits_for(conv)
    assert sum(Decimal(str(d["valor"])) for d in debits) <= ORDER_VALUE - Decimal(elsewhere)
    if fits:
        assert (done.reason, done.status, len(debits)) == ("aprovada_executada", "ativa", 1)
        assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.CONSUMED
    else:
        assert (done.reason, done.status, debits) == ("aprovada_nao_executada", "aguardando_humano", [])
        assert "emitido" not in done.reply
        assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.APPROVED
        refusals = [_details(a).get("motivo") for a in _audit(ledger, conv) if a["evento"] == "CHAMADA_INVIAVEL"]
        assert refusals == ["valor_excede_saldo"]
