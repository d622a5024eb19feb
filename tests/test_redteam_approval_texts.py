"""Red team (redteam2) on the approval resume's customer text: an approved refund
whose (conversation, order) key already holds a DECLINED refund is answered by the
refund tool with ``bloqueado_por_idempotencia`` / ``resultadoOriginal: recusado``.
On main (19039d6) the customer was told "já tinha sido processado" — a refund that
never happened, said as done.
"""

from __future__ import annotations

from orchestrator.model import Deadline

from .test_approvals import _ask, _conv, _decide, _pending, _real_tools, _resumer


def test_an_approval_over_a_declined_refund_never_says_it_was_processed(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("recusado-antes")
    invoker = _real_tools(tools)
    gateway.inject("recusar")
    _ask(ledger, invoker, conv, {"pedidoId": "4821", "valor": 50})  # below the threshold: runs, declined
    assert gateway.debits_for(conv) == []
    _, _, orch = _ask(ledger, invoker, conv)  # R$ 189,90: above it, waits for a person
    record = _pending(ledger, conv)
    _decide(ledger, record.id)
    resumed = _resumer(orch).resume(record.id, Deadline.after(60))
    assert gateway.debits_for(conv) == []
    assert "processado" not in resumed.reply and "emitido" not in resumed.reply, resumed.reply
    assert "recusado" in resumed.reply and "Nenhum valor" in resumed.reply, resumed.reply
