"""The crossing of a fresh request with the old one, raced across OS processes on the
local stack's moto server (serialized like DynamoDB), the real PostgreSQL and the real
gateway: a conversation's approval is approved, the conversation cancelled (the
approval voided), given back, and the same refund asked again (a fresh request, its
own id). Then at once, from three processes: a replayed approval of the OLD id, an
approval and a denial of the FRESH one. The old id approves nothing; exactly one
decision of the fresh one wins; at most one debit, and the history never repeats a
tool_use id."""
from __future__ import annotations

import uuid
from collections import Counter

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.ledger import ItemType
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline
from orchestrator.resume import Resumer

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build
from .test_approval_races import POLICY, _spawn, server_ledger  # noqa: F401  (the fixture)


def _ask(local_stack, ledger, conv: str):
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 189.9}), text_reply("x"))
    orch, _ = build(model, ledger, InProcessInvoker(local_stack.function_environments()), **POLICY)
    reply = orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                                    mensagem="quero o reembolso"), Deadline.after(60))
    assert reply.status == "aguardando_aprovacao"
    return orch, [i["aprovacaoId"] for i in ledger.history(conv, item_type=ItemType.APPROVAL)][-1]


def test_a_replayed_old_decision_and_two_fresh_decisions_at_once(local_stack, server_ledger, gateway):
    from scripts.atendente import give_back

    ledger = server_ledger
    conv = f"corrida-nova-{uuid.uuid4().hex[:10]}"
    orch, old = _ask(local_stack, ledger, conv)
    ApprovalStore(ledger).decide(old, approve=True, approver="ana.operadora", justification="ok",
                                 allowed_approvers=frozenset({"ana.operadora"}))
    assert ledger.request_cancellation(conv)
    assert Resumer.of(orch).resume(old, Deadline.after(60)).status == "aguardando_humano"
    give_back(ledger, conv)
    orch, fresh = _ask(local_stack, ledger, conv)
    assert fresh != old
    procs = {"old": _spawn("scripts.aprovar", "aprovar", old, "--por", "bruno.supervisor", "--motivo", "reenvio"),
             "approve": _spawn("scripts.aprovar", "aprovar", fresh, "--por", "ana.operadora", "--motivo", "ok"),
             "deny": _spawn("scripts.aprovar", "negar", fresh, "--por", "bruno.supervisor", "--motivo", "não")}
    outs = {name: p.communicate(timeout=180) for name, p in procs.items()}
    codes = {name: p.returncode for name, p in procs.items()}
    assert codes["old"] == 1 and "aprovacao_anulada" in outs["old"][0], outs["old"]
    assert sorted([codes["approve"], codes["deny"]]) == [0, 1], outs
    assert ApprovalStore(ledger).get(old).status is ApprovalStatus.VOIDED
    fresh_status = ApprovalStore(ledger).get(fresh).status
    debits = gateway.debits_for(conv)
    if codes["approve"] == 0:
        assert fresh_status is ApprovalStatus.CONSUMED and len(debits) == 1
    else:
        assert fresh_status is ApprovalStatus.DENIED and debits == []
    state = ledger.read_conversation(conv)
    assert state.status.value == "ativa"
    ids = Counter(b["id"] for m in state.messages if m["role"] == "assistant" and isinstance(m["content"], list)
                  for b in m["content"] if b.get("type") == "tool_use")
    assert max(ids.values()) == 1, ids
