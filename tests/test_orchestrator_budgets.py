"""Per-turn limits: tool calls, tokens, model calls, the
deadline and the operator's cancellation. Each, positive and negative, through the
real SDK (scripted transport) and the real ledger (moto): the turn ends with its
own ``motivo``, a customer message, a ``TURNO_INTERROMPIDO`` audit record and a
``TurnosInterrompidos{Motivo}`` metric — and nothing is invoked past the limit."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from cadencia_shared.ledger import ConversationStatus, ItemType
from orchestrator import texts
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use, tool_uses
from .support.orchestrators import CountingInvoker, build

ROOT = Path(__file__).resolve().parents[1]


def _status(order: str) -> tuple[str, dict]:
    return "consultar_status_pedido", {"pedidoId": order}


def _request(conv: str, text: str = "oi") -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=text)


def _limit_records(ledger, conv: str) -> list[dict]:
    return [json.loads(a["detalhes"]) for a in ledger.history(conv, item_type=ItemType.AUDIT)
            if a["evento"] == "TURNO_INTERROMPIDO"]


def _limit_metrics(out: str) -> list[str]:
    found = []
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            emf = json.loads(line)
            if "TurnosInterrompidos" in emf:
                found.append(emf["Motivo"])
    return found


def _assert_limit(ledger, capsys, conv: str, motivo: str) -> dict:
    (record,) = _limit_records(ledger, conv)
    assert record["motivo"] == motivo
    assert _limit_metrics(capsys.readouterr().out) == [motivo]
    return record


# --- tool calls -------------------------------------------------------------------

def test_the_tool_call_budget_refuses_the_call_past_it_and_hands_off(mocked_aws, capsys):
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(tool_uses(_status("1"), _status("2"), _status("3")), text_reply("nunca pedido"))
    invoker = CountingInvoker()
    orch, _ = build(model, ledger, invoker, MAX_FERRAMENTAS_POR_TURNO="2")
    reply = orch.handle(_request("conv-budget-tools"), Deadline.after(60))
    assert invoker.calls["consultar_status_pedido"] == 2 and len(model.requests) == 1
    assert (reply.status, reply.motivo, reply.resposta) == ("aguardando_humano", "orcamento_de_ferramentas",
                                                           texts.ROUND_LIMIT)
    results = ledger.read_conversation("conv-budget-tools").messages[-1]["content"]
    assert [json.loads(r["content"]).get("erro") for r in results] == [None, None, "orcamento_de_ferramentas"]
    # Refused before the retry ceiling: the third call is not an attempt.
    assert len(list(ledger.attempts("conv-budget-tools"))) == 2
    record = _assert_limit(ledger, capsys, "conv-budget-tools", "orcamento_de_ferramentas")
    assert record["chamadasFerramenta"] == 2 and record["chamadasModelo"] == 1


def test_within_the_tool_call_budget_nothing_is_refused(mocked_aws, capsys):
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(tool_uses(_status("1"), _status("2"), _status("3")), text_reply("Posso ajudar em algo mais?"))
    invoker = CountingInvoker()
    orch, _ = build(model, ledger, invoker, MAX_FERRAMENTAS_POR_TURNO="3")
    reply = orch.handle(_request("conv-budget-tools-ok"), Deadline.after(60))
    assert invoker.calls["consultar_status_pedido"] == 3
    assert (reply.status, reply.motivo, reply.resposta) == ("ativa", "resposta", "Posso ajudar em algo mais?")
    assert _limit_records(ledger, "conv-budget-tools-ok") == [] and _limit_metrics(capsys.readouterr().out) == []


# --- tokens (from usage) ----------------------------------------------------------

def test_the_token_budget_stops_before_the_model_call_past_it(mocked_aws, capsys):
    """Each scripted tool_use response bills 812 + 71 = 883 tokens (its ``usage``).
    With 1 000: the second model call is allowed (883 spent), the third is not
    (1 766) — and the second response's tool, asked with the budget spent, never runs."""
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(tool_use(*_status("1")), tool_use(*_status("2")), text_reply("nunca pedido"))
    invoker = CountingInvoker()
    orch, _ = build(model, ledger, invoker, MAX_TOKENS_POR_TURNO="1000")
    reply = orch.handle(_request("conv-budget-tokens"), Deadline.after(60))
    assert len(model.requests) == 2 and invoker.calls["consultar_status_pedido"] == 1
    assert (reply.status, reply.motivo) == ("aguardando_humano", "orcamento_de_tokens")
    record = _assert_limit(ledger, capsys, "conv-budget-tokens", "orcamento_de_tokens")
    assert record["tokens"] == 2 * 883
    # The history stays valid for the human and the next request: the last
    # tool_use has its tool_result.
    assert ledger.read_conversation("conv-budget-tokens").messages[-1]["content"][0]["type"] == "tool_result"


def test_a_response_past_the_token_budget_runs_none_of_its_tools(mocked_aws, capsys):
    """The budget is spent by the response that asks for the tools: neither the
    refund nor the status query runs; each tool_use is answered is_error with the
    budget's reason, and the turn ends once, on that limit."""
    ledger = mocked_aws["ledger"]
    costly = tool_uses(("emitir_reembolso", {"pedidoId": "4821", "valor": 50}), _status("4821"))
    costly["usage"]["input_tokens"] = 5_000
    model = ScriptedModel(costly, text_reply("nunca pedido"))
    invoker = CountingInvoker()
    orch, _ = build(model, ledger, invoker, MAX_TOKENS_POR_TURNO="1000")
    reply = orch.handle(_request("conv-budget-tokens-tools"), Deadline.after(60))
    assert sum(invoker.calls.values()) == 0 and len(model.requests) == 1
    assert (reply.status, reply.motivo) == ("aguardando_humano", "orcamento_de_tokens")
    stored = ledger.read_conversation("conv-budget-tokens-tools").messages
    asked = [b["id"] for b in stored[-2]["content"] if b.get("type") == "tool_use"]
    results = stored[-1]["content"]
    assert [r["tool_use_id"] for r in results] == asked and len(asked) == 2
    assert all(r["is_error"] and json.loads(r["content"])["erro"] == "orcamento_de_tokens" for r in results)
    # Refused before the retry ceiling and the tool-call budget: no attempt, no call counted.
    assert list(ledger.attempts("conv-budget-tokens-tools")) == []
    record = _assert_limit(ledger, capsys, "conv-budget-tokens-tools", "orcamento_de_tokens")
    assert record["tokens"] == 5_000 + 71 and record["chamadasFerramenta"] == 0


def test_enough_tokens_the_turn_ends_normally(mocked_aws, capsys):
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(tool_use(*_status("1")), tool_use(*_status("2")), text_reply("Posso ajudar em algo mais?"))
    orch, _ = build(model, ledger, CountingInvoker(), MAX_TOKENS_POR_TURNO="2000")
    reply = orch.handle(_request("conv-budget-tokens-ok"), Deadline.after(60))
    assert len(model.requests) == 3 and (reply.motivo, reply.resposta) == ("resposta", "Posso ajudar em algo mais?")
    assert _limit_metrics(capsys.readouterr().out) == []


# --- model calls and the deadline -----------------------------------------------

def test_the_model_call_budget_is_the_round_budget_audited_and_counted(mocked_aws, capsys):
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(default=lambda _body: tool_use(*_status(uuid.uuid4().hex[:8])))
    orch, _ = build(model, ledger, CountingInvoker(), MAX_RODADAS_POR_TURNO="3")
    reply = orch.handle(_request("conv-budget-model"), Deadline.after(60))
    assert len(model.requests) == 3
    assert (reply.status, reply.motivo, reply.resposta) == ("aguardando_humano", "limite_de_rodadas",
                                                           texts.ROUND_LIMIT)
    assert _assert_limit(ledger, capsys, "conv-budget-model", "limite_de_rodadas")["chamadasModelo"] == 3


def test_no_time_for_a_model_call_is_sem_tempo_without_asking_the_model(mocked_aws, capsys):
    """4 s left, a 3 s reserve: less than the 2 s a model call needs. The model is
    not asked; the customer hears the out-of-time reply (not "instabilidade")."""
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(text_reply("nunca pedido"))
    orch, _ = build(model, ledger, CountingInvoker())
    reply = orch.handle(_request("conv-deadline"), Deadline.after(4))
    assert model.requests == []
    assert (reply.status, reply.motivo, reply.resposta) == ("ativa", "sem_tempo", texts.OUT_OF_TIME)
    _assert_limit(ledger, capsys, "conv-deadline", "sem_tempo")


def test_the_tool_deadline_refusal_is_audited_and_counted(mocked_aws, capsys):
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 10.0}))
    invoker = CountingInvoker()
    orch, _ = build(model, ledger, invoker)
    reply = orch.handle(_request("conv-deadline-tool"), Deadline.after(10.5))  # 7.5 s < the refund's 8 s
    assert invoker.calls["emitir_reembolso"] == 0 and reply.motivo == "sem_tempo"
    _assert_limit(ledger, capsys, "conv-deadline-tool", "sem_tempo")


# --- cancellation -----------------------------------------------------------------

def _existing_conversation(ledger, conv: str) -> None:
    orch, _ = build(ScriptedModel(text_reply("Olá!")), ledger, CountingInvoker())
    assert orch.handle(_request(conv), Deadline.after(60)).motivo == "resposta"


def test_a_cancellation_refuses_the_next_tool_call_before_the_ceiling_and_is_consumed(mocked_aws, capsys):
    ledger = mocked_aws["ledger"]
    conv = "conv-cancel-tool"
    _existing_conversation(ledger, conv)
    capsys.readouterr()
    assert ledger.request_cancellation(conv) is True
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 10.0}), text_reply("nunca"))
    invoker = CountingInvoker()
    orch, _ = build(model, ledger, invoker)
    reply = orch.handle(_request(conv, "reembolsa"), Deadline.after(60))
    assert invoker.calls["emitir_reembolso"] == 0 and len(model.requests) == 1
    assert (reply.status, reply.motivo, reply.resposta) == ("aguardando_humano", "cancelada", texts.CANCELLED)
    # Wins over the retry ceiling: no attempt was counted.
    assert list(ledger.attempts(conv)) == []
    state = ledger.read_conversation(conv)
    assert state.status is ConversationStatus.WAITING_HUMAN and not ledger.cancellation_pending(conv)
    assert json.loads(state.messages[-1]["content"][0]["content"])["erro"] == "cancelada"
    _assert_limit(ledger, capsys, conv, "cancelada")


def test_a_cancellation_between_the_tools_answer_and_the_commit_wins(mocked_aws, capsys):
    """The refund answers (a real Lambda would have moved money: the attempt is
    recorded as executed), then the operator cancels while the model writes its
    reply: the commit's fence refuses that reply and the turn ends cancelled."""
    ledger = mocked_aws["ledger"]
    conv = "conv-cancel-commit"
    _existing_conversation(ledger, conv)
    capsys.readouterr()

    def cancel_then_reply(_body: dict) -> dict:
        assert ledger.request_cancellation(conv)
        return text_reply("Mais alguma coisa?")

    refund_done = {"ok": True, "resultado": "executado", "dados": {"pedidoId": "4821"}}
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 10.0}), cancel_then_reply)
    invoker = CountingInvoker(answer=refund_done)
    orch, _ = build(model, ledger, invoker)
    reply = orch.handle(_request(conv, "reembolsa"), Deadline.after(60))
    assert invoker.calls["emitir_reembolso"] == 1
    assert (reply.status, reply.motivo, reply.resposta) == ("aguardando_humano", "cancelada", texts.CANCELLED)
    (attempt,) = ledger.attempts(conv)
    assert attempt["resultado"] == "executado"
    state = ledger.read_conversation(conv)
    assert state.status is ConversationStatus.WAITING_HUMAN and not ledger.cancellation_pending(conv)
    assert _assert_limit(ledger, capsys, conv, "cancelada")["verificadoNo"] == "commit"
    # The stored reply of that message is the cancellation, for any redelivery too.
    again = orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=reply.mensagemId,
                                    mensagem="reembolsa"), Deadline.after(60))
    assert again.duplicada and again.motivo == "cancelada"


def test_without_a_cancellation_the_turn_commits_normally(mocked_aws, capsys):
    ledger = mocked_aws["ledger"]
    conv = "conv-cancel-none"
    _existing_conversation(ledger, conv)
    model = ScriptedModel(tool_use(*_status("1")), text_reply("Consultei aqui."))
    orch, _ = build(model, ledger, CountingInvoker())
    reply = orch.handle(_request(conv), Deadline.after(60))
    assert (reply.status, reply.motivo) == ("ativa", "resposta")
    assert _limit_records(ledger, conv) == []


def test_cancelling_an_unknown_conversation_creates_nothing(mocked_aws):
    ledger = mocked_aws["ledger"]
    assert ledger.request_cancellation("conv-nunca-vista") is False
    assert ledger.read_conversation("conv-nunca-vista") is None


# --- the operator's command, from another OS process -------------------------------

def _operator(local_stack, table: str, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "CADENCIA_LOCAL_STACK_DIR": local_stack.directory, "LEDGER_TABLE": table}
    return subprocess.run([str(ROOT / "scripts" / "operador"), *args], env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, check=False)


def test_the_operators_command_from_another_process_stops_the_turn_in_flight(local_stack):
    """While the status tool is being invoked, ``scripts/operador cancelar`` runs in
    its own process against the moto server; the model's next tool call is refused
    and never invoked, the turn ends cancelled and the flag is consumed."""
    from cadencia_shared.ledger import Ledger, table_definition
    from scripts.local_stack.aws import session_client

    table = f"cadencia-teste-{uuid.uuid4().hex[:10]}"
    ddb = session_client("dynamodb", local_stack.aws_endpoint)
    ddb.create_table(**table_definition(table))
    try:
        ledger = Ledger(table, ddb)
        conv = "conv-cancel-process"
        _existing_conversation(ledger, conv)
        done: list[subprocess.CompletedProcess] = []

        class OperatorMidCall(CountingInvoker):
            def invoke(self, tool, event):
                if not done:
                    done.append(_operator(local_stack, table, "cancelar", "--conversa", conv, "--local"))
                return super().invoke(tool, event)

        invoker = OperatorMidCall()
        model = ScriptedModel(tool_use(*_status("1")), tool_use("emitir_reembolso", {"pedidoId": "1", "valor": 5.0}))
        orch, _ = build(model, ledger, invoker)
        reply = orch.handle(_request(conv), Deadline.after(60))
        (operator,) = done
        assert operator.returncode == 0, operator.stderr
        assert dict(invoker.calls) == {"consultar_status_pedido": 1}
        assert (reply.status, reply.motivo) == ("aguardando_humano", "cancelada")
        assert not ledger.cancellation_pending(conv)
        # Hostile ids never reach the table; an unknown conversation is not created.
        assert _operator(local_stack, table, "cancelar", "--conversa", "x#y", "--local").returncode == 2
        assert _operator(local_stack, table, "cancelar", "--conversa", "conv-outra\n", "--local").returncode == 2
        assert _operator(local_stack, table, "cancelar", "--conversa", "conv-nova", "--local").returncode == 2
        assert ledger.read_conversation("conv-nova") is None
    finally:
        ddb.delete_table(TableName=table)
