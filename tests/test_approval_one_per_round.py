"""One model response asking two calls that each need a person: the gate asks for ONE
approval per tool round (docs/decisions/one-approval-per-tool-round.md). The second
call is answered ``is_error`` (``aprovacao_uma_por_vez``), neither run nor asked, so no
approved record can be stranded behind a conversation that no longer waits for it:
the first is decided and resumed, then the model asks the second again and it is
decided and resumed in its turn. Every debit counted on the gateway itself."""
from __future__ import annotations

import json
import uuid

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cadencia_shared.approval_history import awaited_approval
from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.ledger import ItemType, Ledger
from orchestrator.model import Deadline
from orchestrator.resume import Resumer

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use, tool_uses
from .support.orchestrators import build
from .test_approval_lifecycle import OPERATOR, _audit, _decide, _details, _invoker, _turn

POLICY = {"APROVACAO_LIMITE_REAIS": "40", "APROVADORES": OPERATOR}
FIRST = {"pedidoId": "4821", "valor": 150.0}
SECOND = {"pedidoId": "4822", "valor": 50.0}


def _approvals(ledger: Ledger, conv: str) -> list[str]:
    return [item["aprovacaoId"] for item in ledger.history(conv, item_type=ItemType.APPROVAL)]


def _debited_orders(gateway, conv: str) -> list[str]:
    return [debit["idempotencyKey"].split("#")[1] for debit in gateway.debits_for(conv)]


def _last_results(ledger: Ledger, conv: str) -> list[dict]:
    state = ledger.read_conversation(conv)
    last = [m for m in state.messages if m["role"] == "user" and isinstance(m["content"], list)
            and any(b.get("type") == "tool_result" for b in m["content"])][-1]
    return [b for b in last["content"] if b.get("type") == "tool_result"]


def test_a_second_approval_of_one_response_is_not_asked_and_nothing_is_stranded(mocked_aws, gateway, tools):
    ledger = mocked_aws["ledger"]
    conv = f"uma-por-vez-{uuid.uuid4().hex[:8]}"
    invoker = _invoker(tools)
    model = ScriptedModel(tool_uses(("emitir_reembolso", FIRST), ("emitir_reembolso", SECOND)), text_reply("x"))
    orch, _ = build(model, ledger, invoker, **POLICY)
    reply = orch.handle(_turn(conv), Deadline.after(60))
    assert reply.status == "aguardando_aprovacao"
    (first,) = _approvals(ledger, conv)
    results = _last_results(ledger, conv)
    assert [json.loads(r["content"])["erro"] for r in results] == ["aguardando_aprovacao", "aprovacao_uma_por_vez"]
    assert all(r["is_error"] for r in results)
    refused = [_details(a) for a in _audit(ledger, conv) if a["evento"] == "APROVACAO_NAO_SOLICITADA"]
    assert [(d["pedidoId"], d["motivo"]) for d in refused] == [("4822", "aprovacao_uma_por_vez")]

    assert _decide(ledger, first)["ok"] is True
    done = Resumer.of(orch).resume(first, Deadline.after(60))
    assert (done.reason, done.status) == ("aprovada_executada", "ativa")
    assert _debited_orders(gateway, conv) == ["4821"]

    # The model asks the second again in the next turn: its own request, decided and run.
    again = ScriptedModel(tool_use("emitir_reembolso", SECOND), text_reply("x"))
    orch, _ = build(again, ledger, invoker, **POLICY)
    assert orch.handle(_turn(conv, "e o outro?"), Deadline.after(60)).status == "aguardando_aprovacao"
    second = _approvals(ledger, conv)[-1]
    assert second != first
    assert _decide(ledger, second)["ok"] is True
    assert Resumer.of(orch).resume(second, Deadline.after(60)).reason == "aprovada_executada"
    assert _debited_orders(gateway, conv) == ["4821", "4822"]
    statuses = {a: ApprovalStore(ledger).get(a).status for a in _approvals(ledger, conv)}
    assert set(statuses.values()) == {ApprovalStatus.CONSUMED}, statuses


def test_the_same_call_twice_in_one_response_waits_on_one_request(mocked_aws, gateway, tools):
    ledger = mocked_aws["ledger"]
    conv = f"uma-por-vez-igual-{uuid.uuid4().hex[:8]}"
    model = ScriptedModel(tool_uses(("emitir_reembolso", FIRST), ("emitir_reembolso", FIRST)), text_reply("x"))
    orch, _ = build(model, ledger, _invoker(tools), **POLICY)
    assert orch.handle(_turn(conv), Deadline.after(60)).status == "aguardando_aprovacao"
    assert len(_approvals(ledger, conv)) == 1
    assert [json.loads(r["content"])["erro"] for r in _last_results(ledger, conv)] == \
        ["aguardando_aprovacao", "aguardando_aprovacao"]
    assert gateway.debits_for(conv) == []


CALLS = [FIRST, SECOND, {"pedidoId": "4821", "valor": 60.0}, {"pedidoId": "4822", "valor": 45.0}]


@hsettings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(range(len(CALLS))), min_size=1, max_size=4))
def test_any_response_asks_at_most_one_approval(mocked_aws, gateway, tools, picks):
    """Any mix of calls needing a person in one response: one request, the conversation
    waits on it, repeats of that call wait on it too, every other call is answered
    ``aprovacao_uma_por_vez``; nothing is debited."""
    ledger = mocked_aws["ledger"]
    conv = f"uma-por-vez-prop-{uuid.uuid4().hex[:8]}"
    model = ScriptedModel(tool_uses(*(("emitir_reembolso", CALLS[i]) for i in picks)), text_reply("x"))
    orch, _ = build(model, ledger, _invoker(tools), **POLICY)
    assert orch.handle(_turn(conv), Deadline.after(60)).status == "aguardando_aprovacao"
    (approval,) = _approvals(ledger, conv)
    assert awaited_approval(ledger.read_conversation(conv).messages) == approval
    expected = ["aguardando_aprovacao" if i == picks[0] else "aprovacao_uma_por_vez" for i in picks]
    assert [json.loads(r["content"])["erro"] for r in _last_results(ledger, conv)] == expected
    assert gateway.debits_for(conv) == []


def test_a_round_that_moved_money_is_never_told_nothing_moved(mocked_aws, gateway, tools):
    """R$ 30 on order 4822 runs (below the limit, a first refund), then R$ 150 on 4821
    waits for a person, in one response: the customer's sentence speaks of the request
    that waits (its order), never "nothing moved" — R$ 30 did."""
    ledger = mocked_aws["ledger"]
    conv = f"uma-por-vez-debito-{uuid.uuid4().hex[:8]}"
    model = ScriptedModel(tool_uses(("emitir_reembolso", {"pedidoId": "4822", "valor": 30.0}),
                                    ("emitir_reembolso", FIRST)), text_reply("x"))
    orch, _ = build(model, ledger, _invoker(tools), **POLICY)
    reply = orch.handle(_turn(conv), Deadline.after(60))
    assert reply.status == "aguardando_aprovacao"
    assert _debited_orders(gateway, conv) == ["4822"]
    assert "Nenhum valor foi movimentado" not in reply.resposta
    assert "pedido 4821" in reply.resposta
