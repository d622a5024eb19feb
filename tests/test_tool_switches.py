"""Tool kill switches (``interruptor#{tool}``): a stopped tool's call is refused
before any invocation, fleet-wide, failing closed on a malformed item. Real
tools (in-process invoker, PostgreSQL, the fake gateway), real ledger (moto)."""

from __future__ import annotations

import json
import uuid

import pytest

from cadencia_shared.catalog import LEDGER_TABLE, TOOLS
from cadencia_shared.ledger import ItemType, SwitchState, switch_pk
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline
from orchestrator.switches import SWITCH_EVENT
from scripts.local_stack.emf import capture_emf

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build

REFUND = "emitir_reembolso"
STATUS = "consultar_status_pedido"
SUPERVISOR = {"subject": "sub-supervisora-1", "name": "Supervisora Ana"}


def _turn(conv: str) -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem="e aí?")


def _real_tools(tools) -> CountingInvoker:
    return CountingInvoker(InProcessInvoker({name: tools.environment(spec) for name, spec in TOOLS.items()}))


def _refund_then_text() -> ScriptedModel:
    return ScriptedModel(tool_use(REFUND, {"pedidoId": "4821", "valor": 189.9}),
                         text_reply("Posso ajudar em algo mais?"))


def _last_refusal(model: ScriptedModel) -> str:
    """The is_error tool_result the model read last (what the control answered it)."""
    blocks = [b for r in model.requests for m in r["messages"] if m["role"] == "user" and isinstance(m["content"], list)
              for b in m["content"] if b.get("type") == "tool_result" and b.get("is_error")]
    content = blocks[-1]["content"]
    return content if isinstance(content, str) else content[0]["text"]


def _switch_links(ledger, conv: str) -> list[dict]:
    return [json.loads(a["detalhes"]) for a in ledger.history(conv, item_type=ItemType.AUDIT)
            if a["evento"] == SWITCH_EVENT]


def test_a_stopped_refund_tool_is_never_invoked_and_the_model_reads_the_typed_refusal(
        local_stack, mocked_aws, gateway, erp, tools):
    ledger = mocked_aws["ledger"]
    ledger.set_switch(REFUND, SwitchState.STOPPED, reason="gateway em manutenção", **SUPERVISOR)
    model, invoker = _refund_then_text(), _real_tools(tools)
    orch, _ = build(model, ledger, invoker)
    with capture_emf() as emf:
        reply = orch.handle(_turn("conv-int-1"), Deadline.after(60))

    assert sum(invoker.calls.values()) == 0  # not the refund, not the feasibility's status read
    assert gateway.debits() == [] and gateway.stats().get("reembolso", 0) == 0
    # The turn goes on: the model read the refusal and answered (no fixed reply from the control).
    assert reply.status == "ativa" and reply.resposta == "Posso ajudar em algo mais?" and len(model.requests) == 2
    state = ledger.read_conversation("conv-int-1")
    result = [b for m in state.messages if m["role"] == "user" and isinstance(m["content"], list)
              for b in m["content"] if b.get("type") == "tool_result"]
    assert result[0]["is_error"] is True and json.loads(result[0]["content"])["erro"] == "ferramenta_desligada"
    assert [r for r in result if r.get("is_error")] == [result[0]]  # the only refusal: the stopped call
    assert _switch_links(ledger, "conv-int-1") == [
        {"ferramenta": REFUND, "mensagemId": _switch_links(ledger, "conv-int-1")[0]["mensagemId"]}]
    assert list(ledger.attempts("conv-int-1")) == []  # refused before the ceiling counts it
    assert emf.totals()[("RecusasPorInterruptor", (("Ferramenta", REFUND),))] == 1


@pytest.mark.parametrize("estado", [
    {"S": "LIGADA"}, {"S": "ligada "}, {"S": ""}, {"S": "ligado"}, {"N": "1"}, {"BOOL": True}, None])
def test_a_hand_edited_malformed_item_stops_the_tool(mocked_aws, estado):
    item = {"pk": {"S": switch_pk(REFUND)}, "tipo": {"S": "interruptor"}}
    if estado is not None:
        item["estado"] = estado
    mocked_aws["dynamodb"].put_item(TableName=LEDGER_TABLE, Item=item)
    model, invoker = _refund_then_text(), CountingInvoker()
    orch, _ = build(model, mocked_aws["ledger"], invoker)
    orch.handle(_turn(f"conv-int-{uuid.uuid4().hex[:6]}"), Deadline.after(60))
    assert sum(invoker.calls.values()) == 0
    assert json.loads(_last_refusal(model))["erro"] == "ferramenta_desligada"
    assert not mocked_aws["ledger"].tool_switch(REFUND).running


def test_other_tools_are_unaffected(mocked_aws):
    ledger = mocked_aws["ledger"]
    ledger.set_switch(REFUND, SwitchState.STOPPED, reason="gateway em manutenção", **SUPERVISOR)
    model = ScriptedModel(tool_use(STATUS, {"pedidoId": "4821"}), text_reply("Posso ajudar em algo mais?"))
    invoker = CountingInvoker()
    orch, _ = build(model, ledger, invoker)
    reply = orch.handle(_turn("conv-int-status"), Deadline.after(60))
    assert reply.motivo == "resposta" and invoker.calls[STATUS] == 1
    assert _switch_links(ledger, "conv-int-status") == []


def test_switched_back_on_the_refund_runs(local_stack, mocked_aws, gateway, erp, tools):
    ledger = mocked_aws["ledger"]
    ledger.set_switch(REFUND, SwitchState.STOPPED, reason="gateway em manutenção", **SUPERVISOR)
    ledger.set_switch(REFUND, SwitchState.RUNNING, reason="gateway normalizado", **SUPERVISOR)
    switch = ledger.tool_switch(REFUND)
    assert (switch.running, switch.subject, switch.name, switch.reason) == (
        True, "sub-supervisora-1", "Supervisora Ana", "gateway normalizado")
    model, invoker = _refund_then_text(), _real_tools(tools)
    orch, _ = build(model, ledger, invoker)
    reply = orch.handle(_turn("conv-int-on"), Deadline.after(60))
    assert reply.motivo == "resposta" and invoker.calls[REFUND] == 1
    assert len(gateway.debits()) == 1


@pytest.mark.parametrize("reason", ["", "  ", "ab", "x" * 501, "duas\nlinhas", None, 7])
def test_a_switch_needs_a_bounded_single_line_reason(mocked_aws, reason):
    with pytest.raises(ValueError):
        mocked_aws["ledger"].set_switch(REFUND, SwitchState.STOPPED, reason=reason, **SUPERVISOR)
    assert mocked_aws["ledger"].tool_switch(REFUND).running  # nothing written


def test_a_stopped_tool_beside_an_executed_refund_never_says_nothing_was_done(
        local_stack, mocked_aws, gateway, erp, tools):
    """One response, two calls: the refund runs, the profile tool is stopped. The refusal goes
    back to the model (the turn goes on); nothing the customer reads says nothing was done."""
    from .support.anthropic_fake import tool_uses

    ledger = mocked_aws["ledger"]
    ledger.set_switch("atualizar_cadastro", SwitchState.STOPPED, reason="manutenção do cadastro", **SUPERVISOR)
    model = ScriptedModel(tool_uses((REFUND, {"pedidoId": "4821", "valor": 189.9}),
                                    ("atualizar_cadastro", {"campos": {"email": "a@example.com"}})),
                          text_reply("Posso ajudar em algo mais?"))
    invoker = _real_tools(tools)
    orch, _ = build(model, ledger, invoker)
    reply = orch.handle(_turn("conv-int-rodada"), Deadline.after(60))

    assert invoker.calls[REFUND] == 1 and invoker.calls.get("atualizar_cadastro", 0) == 0
    assert len(gateway.debits()) == 1
    assert reply.motivo != "ferramenta_desligada"
    assert "nada foi feito" not in (reply.resposta or "")
    assert len(model.requests) == 2  # the model read both results and answered
