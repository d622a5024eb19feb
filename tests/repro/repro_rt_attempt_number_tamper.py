"""tentativaNumero on an approval record is neither part of `intact` nor of the
decision/consumption conditions: an edit of it (by anyone who could edit `valor`,
issue 2's attacker) changes which ceiling number the approved call runs under."""
from __future__ import annotations

import uuid

import pytest

from cadencia_shared.approvals import ApprovalStore
from cadencia_shared.catalog import TOOLS
from cadencia_shared.ledger import approval_pk
from orchestrator.model import Deadline
from orchestrator.resume import Resumer
from tests.support.anthropic_fake import ScriptedModel, text_reply, tool_use
from tests.support.orchestrators import build
from tests.test_approval_at_ceiling import ABOVE, FIFTY, POLICY, _approval, _approve, _invoker, _turn


@pytest.mark.parametrize("edit", ["REMOVE tentativaNumero", "SET tentativaNumero = :one"])
def test_edited_attempt_number(mocked_aws, gateway, tools, edit):
    ledger, conv = mocked_aws["ledger"], f"rt-teto-{uuid.uuid4().hex[:8]}"
    envs = {name: tools.environment(spec) for name, spec in TOOLS.items()}
    model = ScriptedModel(*(tool_use("emitir_reembolso", FIFTY) for _ in range(3)),
                          tool_use("emitir_reembolso", ABOVE), text_reply("x"))
    orch, _ = build(model, ledger, _invoker(envs, gateway_down=True), **POLICY)
    assert orch.handle(_turn(conv), Deadline.after(60)).status == "aguardando_aprovacao"
    record = _approval(ledger, conv)
    assert record.attempt_number == 4
    _approve(ledger, record.id)
    kwargs = {"ExpressionAttributeValues": {":one": {"N": "1"}}} if ":one" in edit else {}
    mocked_aws["dynamodb"].update_item(TableName=ledger.table_name, Key={"pk": {"S": approval_pk(record.id)}},
                                       UpdateExpression=edit, **kwargs)
    edited = ApprovalStore(ledger).get(record.id)
    print("\nedited record intact:", edited.intact, "attempt_number:", edited.attempt_number)
    healthy, _ = build(ScriptedModel(), ledger, _invoker(envs), **POLICY)
    resumed = Resumer.of(healthy).resume(record.id, Deadline.after(60))
    attempts = [(a["tentativaNumero"], a.get("resultado")) for a in ledger.attempts(conv)
                if a["ferramenta"] == "emitir_reembolso"]
    print("resumed:", resumed)
    print("attempts:", attempts)
    print("approval now:", ApprovalStore(ledger).get(record.id).status, "debits:", len(gateway.debits_for(conv)))
    # an edited record should not be intact (or the edit should not matter)
    assert not edited.intact or (resumed.reason == "aprovada_executada" and attempts[-1] == (4, "executado"))
