"""The orchestrator Lambda's second entry: the decision Lambda's asynchronous resume
event, parsed strictly like a customer message, runs the approved call once."""

from __future__ import annotations

import json
import uuid

from cadencia_shared.approvals import ApprovalStore
from cadencia_shared.ledger import ItemType, Ledger
from orchestrator import handler
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker, LocalContext, function_environment
from orchestrator.model import Deadline
from scripts.local_stack.aws import session_client

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build

POLICY = {"APROVACAO_LIMITE_REAIS": "100", "APROVADORES": "ana.operadora"}


def _environment(local_stack, tmp_path) -> dict[str, str]:
    envs = tmp_path / "tools.json"
    envs.write_text(json.dumps(local_stack.function_environments()))
    return {**local_stack.aws_environment(), "LEDGER_TABLE": local_stack.ledger_table, "TOOL_INVOKER": "local",
            "LOCAL_TOOL_ENVIRONMENTS": str(envs), "ANTHROPIC_API_KEY": "sk-ant-never-called", **POLICY}


def _invoke(env: dict[str, str], event) -> dict:
    handler.reset()
    with function_environment(env):
        return handler.lambda_handler(event, LocalContext("cadencia-orquestrador", timeout_s=60))


def test_the_resume_event_runs_the_approved_call_once(local_stack, erp, gateway, tmp_path):
    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    conv = f"retomada-{uuid.uuid4().hex[:8]}"
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 189.9}), text_reply("x"))
    orch, _ = build(model, ledger, InProcessInvoker(local_stack.function_environments()), **POLICY)
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                            mensagem="reembolso"), Deadline.after(60))
    (item,) = list(ledger.history(conv, item_type=ItemType.APPROVAL))
    ApprovalStore(ledger).decide(item["aprovacaoId"], approve=True, approver="ana.operadora", justification="ok",
                                 allowed_approvers=frozenset({"ana.operadora"}))
    env = _environment(local_stack, tmp_path)
    event = {"acao": "retomar_aprovacao", "aprovacaoId": item["aprovacaoId"]}
    assert _invoke(env, event)["motivo"] == "aprovada_executada"
    assert _invoke(env, event)["motivo"] == "nada_a_retomar"  # Lambda's async retry: nothing twice
    assert len(gateway.debits_for(conv)) == 1


def test_hostile_resume_events_are_refused(local_stack, tmp_path):
    env = _environment(local_stack, tmp_path)
    for event in ({"acao": "retomar_aprovacao"}, {"acao": "retomar_aprovacao", "aprovacaoId": "A" * 32},
                  {"acao": "retomar_aprovacao", "aprovacaoId": "a" * 32, "conversaId": "x"},
                  {"acao": "aprovar", "aprovacaoId": "a" * 32}, {"acao": True}):
        answer = _invoke(env, event)
        assert (answer["status"], answer["motivo"]) == ("erro", "entrada_invalida"), event
