"""Two approvals asked in one model response (two refunds above the limit). Both are
approved by a person. The first resume runs its call and makes the conversation
active; the second resume finds the conversation no longer waiting: 'nada_a_retomar'.
The second approval stays `aprovada` for ever, never executed, the customer never told."""
from __future__ import annotations

import uuid

from cadencia_shared.approvals import ApprovalStore
from cadencia_shared.ledger import ItemType
from orchestrator.model import Deadline
from orchestrator.resume import Resumer
from tests.support.anthropic_fake import ScriptedModel, text_reply, tool_uses
from tests.support.orchestrators import build
from tests.test_approval_lifecycle import OPERATOR, _decide, _invoker, _turn

POLICY = {"APROVACAO_LIMITE_REAIS": "40", "APROVADORES": OPERATOR}


def test_second_approval_of_one_round_is_stranded(mocked_aws, gateway, tools):
    ledger = mocked_aws["ledger"]
    conv = f"rt-duas-{uuid.uuid4().hex[:8]}"
    invoker = _invoker(tools)
    model = ScriptedModel(tool_uses(("emitir_reembolso", {"pedidoId": "4821", "valor": 150.0}),
                                    ("emitir_reembolso", {"pedidoId": "4822", "valor": 50.0})), text_reply("x"))
    orch, _ = build(model, ledger, invoker, **POLICY)
    reply = orch.handle(_turn(conv), Deadline.after(60))
    print("\nturn:", reply.status, reply.motivo)
    approvals = [i["aprovacaoId"] for i in ledger.history(conv, item_type=ItemType.APPROVAL)]
    assert len(approvals) == 2
    print("decide:", [_decide(ledger, a) for a in approvals])
    outs = [Resumer.of(orch).resume(a, Deadline.after(60)) for a in approvals]
    for o in outs:
        print("resume:", o.reason, o.status, o.reply)
    statuses = [ApprovalStore(ledger).get(a).status.value for a in approvals]
    print("records:", statuses, "debits:", len(gateway.debits_for(conv)))
    assert "aprovada" not in statuses, "an approved refund is stranded: never executed, nobody told"
