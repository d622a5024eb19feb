"""A turn's spans (orchestrator.tracing): the turn, each model call with the GenAI
attributes, each tool call with each control's decision and the invocation, and the
commit — written as JSONL locally, with no content and no personal data."""

from __future__ import annotations

import json

import pytest

from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from orchestrator.tracing import JsonlTracer, conversation_ref, tracer_from_env

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build


def test_one_turn_is_one_trace_of_nested_spans_without_personal_data(mocked_aws, tmp_path, monkeypatch):
    trace_file = tmp_path / "traces.jsonl"
    monkeypatch.setenv("TRACE_MODE", "jsonl")
    monkeypatch.setenv("TRACE_FILE", str(trace_file))
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}), text_reply("Consultei aqui."))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
    assert isinstance(orch.tracer, JsonlTracer)
    text = "Sou Maria Silva, CPF 123.456.789-00, cadê o pedido 4821?"
    orch.handle(TurnRequest(conversaId="conv-trace-1", clienteId=1001, mensagemId="wamid.trace1", mensagem=text),
                Deadline.after(60))
    spans = [json.loads(line) for line in trace_file.read_text().splitlines()]
    by_name: dict[str, list[dict]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    (turn,) = by_name["turn"]
    assert len({s["traceId"] for s in spans}) == 1 and turn["parentSpanId"] is None
    assert turn["attributes"]["gen_ai.conversation.id"] == conversation_ref("conv-trace-1")
    assert turn["attributes"]["cadencia.status"] == "ativa"
    chats = by_name["chat"]
    assert len(chats) == 2 and all(c["parentSpanId"] == turn["spanId"] for c in chats)
    assert chats[0]["attributes"]["gen_ai.usage.input_tokens"] == 812
    assert chats[0]["attributes"]["gen_ai.response.finish_reasons"] == "tool_use"
    assert chats[0]["attributes"]["gen_ai.request.model"] == "claude-sonnet-5-5"
    (tool,) = by_name["execute_tool"]
    assert tool["attributes"]["gen_ai.tool.name"] == "consultar_status_pedido"
    tool_use_id = model.requests[1]["messages"][1]["content"][-1]["id"]
    assert tool["attributes"]["gen_ai.tool.call.id"] == conversation_ref(tool_use_id)  # model text: hashed
    controls = by_name["control"]
    assert controls and all(c["parentSpanId"] == tool["spanId"] for c in controls)
    assert all(c["attributes"]["cadencia.decisao"] == "permitida" for c in controls)
    assert {c["attributes"]["cadencia.controle"] for c in controls} >= {"TokenBudget", "ToolCallBudget"}
    (invoke,) = by_name["invoke"]
    assert invoke["parentSpanId"] == tool["spanId"] and invoke["attributes"]["cadencia.invocacao"] == "ok"
    (commit,) = by_name["commit"]
    assert commit["parentSpanId"] == turn["spanId"]
    attributes = json.dumps([s["attributes"] for s in spans], ensure_ascii=False)
    for private in ("Maria", "123.456", "4821", "1001", "conv-trace-1", "Consultei aqui"):
        assert private not in attributes


def test_a_refusal_is_the_controls_decision_in_its_span(mocked_aws, tmp_path):
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 50}))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker(), ORCAMENTO_CUSTO_USD_POR_CONVERSA="0.003")
    orch.tracer = JsonlTracer(tmp_path / "t.jsonl")
    orch.tool_round.tracer = orch.tracer
    orch.handle(TurnRequest(conversaId="conv-trace-2", clienteId=1001, mensagemId="wamid.trace2", mensagem="oi"),
                Deadline.after(60))
    spans = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    decisions = [s["attributes"]["cadencia.decisao"] for s in spans if s["name"] == "control"]
    assert decisions[-1] == "orcamento_de_custo" and "invoke" not in {s["name"] for s in spans}


def test_an_unknown_trace_mode_is_refused():
    with pytest.raises(ValueError, match="TRACE_MODE"):
        tracer_from_env({"TRACE_MODE": "stdout"})


def test_model_written_names_never_reach_a_span(mocked_aws, tmp_path):
    model = ScriptedModel(tool_use("cpf_123.456.789-00", {"pedidoId": "4821"}), text_reply("Ok."))
    orch, _ = build(model, mocked_aws["ledger"], CountingInvoker())
    orch.tracer = orch.tool_round.tracer = JsonlTracer(tmp_path / "t.jsonl")
    orch.handle(TurnRequest(conversaId="conv-trace-3", clienteId=1001, mensagemId="wamid.trace3", mensagem="oi"),
                Deadline.after(60))
    text = (tmp_path / "t.jsonl").read_text()
    assert "123.456" not in text and '"gen_ai.tool.name": "desconhecida"' in text
