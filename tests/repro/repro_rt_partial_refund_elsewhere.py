"""Approved R$ 150 on order 4821 (R$ 189.90, nothing refunded when asked); before the
resume the order is partially refunded outside this conversation (ERP figure)."""
from __future__ import annotations

import pytest

from cadencia_shared.approvals import ApprovalStore
from orchestrator.model import Deadline
from orchestrator.resume import Resumer
from tests.test_approval_lifecycle import _approval, _ask, _audit, _conv, _decide, _details, _invoker


@pytest.mark.parametrize("elsewhere", ["50.00", "30.00"])
def test_resume_after_partial_refund_elsewhere(mocked_aws, gateway, tools, erp, elsewhere):
    ledger, conv = mocked_aws["ledger"], _conv("rt-parcial")
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv)
    approval = _approval(ledger, conv)
    print("\nrequest reason:", ApprovalStore(ledger).get(approval).reason)
    assert _decide(ledger, approval)["ok"] is True
    erp.execute("UPDATE pedidos SET valor_reembolsado = %s WHERE id = '4821'", (elsewhere,))
    done = Resumer.of(orch).resume(approval, Deadline.after(60))
    print(f"elsewhere R$ {elsewhere}: resume -> {done.reason} / {done.status} / {done.reply!r}")
    print("record:", ApprovalStore(ledger).get(approval).status.value, "debits:", len(gateway.debits_for(conv)))
    print("audit:", [(a["evento"], _details(a).get("motivo")) for a in _audit(ledger, conv)][-5:])
