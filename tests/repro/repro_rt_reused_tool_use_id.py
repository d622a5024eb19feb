"""The resume writes the approved call as tool_use id `toolu_aprovacao_{approval id}`.
An approval id is REUSED when a voided/expired record is replaced by a fresh request.
Approved -> cancelled before the resume (the resume stores `toolu_aprovacao_X` answered
`cancelada`, voids X) -> given back -> the same call asked again (fresh X) -> approved ->
resume: the tool round sees `toolu_aprovacao_X` already in the history and answers
`id_repetido` -- the approved refund never runs, the approval stays `aprovada`, and the
history now holds two tool_use blocks with one id (the next Messages API request is invalid)."""
from __future__ import annotations

from collections import Counter

from cadencia_shared.approvals import ApprovalStore
from orchestrator.model import Deadline
from orchestrator.resume import Resumer
from tests.test_approval_lifecycle import _approval, _ask, _conv, _decide, _give_back, _invoker


def test_fresh_approval_with_reused_id_never_runs(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("rt-reuso-id")
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv)
    approval = _approval(ledger, conv)
    assert _decide(ledger, approval)["ok"] is True
    assert ledger.request_cancellation(conv)
    first = Resumer.of(orch).resume(approval, Deadline.after(60))
    assert first.status == "aguardando_humano"
    _give_back(ledger, conv)
    reply, orch = _ask(ledger, invoker, conv)
    assert reply.status == "aguardando_aprovacao"
    assert _approval(ledger, conv) == approval  # same id, fresh record
    assert _decide(ledger, approval)["ok"] is True
    second = Resumer.of(orch).resume(approval, Deadline.after(60))
    state = ledger.read_conversation(conv)
    ids = Counter(b["id"] for m in state.messages if m["role"] == "assistant"
                  for b in (m["content"] if isinstance(m["content"], list) else []) if b.get("type") == "tool_use")
    print("\nsecond resume:", second.reason, second.status, second.reply)
    print("record:", ApprovalStore(ledger).get(approval).status, "debits:", len(gateway.debits_for(conv)))
    print("duplicated tool_use ids in stored history:", {k: v for k, v in ids.items() if v > 1})
    last_results = [b for m in state.messages if m["role"] == "user" and isinstance(m["content"], list)
                    for b in m["content"] if b.get("type") == "tool_result"][-1]
    print("last tool_result:", last_results["content"][:120])
    assert second.reason == "aprovada_executada" and len(gateway.debits_for(conv)) == 1
