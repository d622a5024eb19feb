"""An approval asked on the ceiling-th attempt runs: the approved call is the call
that asked, already counted by the retry ceiling, so resuming it — and any rerun of
the resume after a crash — takes no new number (docs/decisions/
approved-call-keeps-its-attempt-number.md). End to end: the real SDK with a scripted
model, the real ledger, the real refund and status Lambda handlers, the real
PostgreSQL and the real gateway — every debit counted on the gateway itself."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.catalog import EMITIR_REEMBOLSO, TOOLS
from cadencia_shared.ledger import ConversationStatus, ItemType, Ledger
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline
from orchestrator.resume import Resumer
from scripts.local_stack.aws import session_client

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build

ROOT = Path(__file__).resolve().parents[1]
OPERATOR = "ana.operadora"
POLICY = {"APROVACAO_LIMITE_REAIS": "100", "APROVADORES": OPERATOR}
FIFTY = {"pedidoId": "4821", "valor": 50.0}
ABOVE = {"pedidoId": "4821", "valor": 150.0}


def _turn(conv: str) -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                       mensagem="quero o reembolso")


def _invoker(envs: dict, *, gateway_down: bool = False) -> InProcessInvoker:
    envs = {name: dict(env) for name, env in envs.items()}
    if gateway_down:  # connection refused: a failure proven before the gateway (the claim is released)
        envs[EMITIR_REEMBOLSO.name]["GATEWAY_URL"] = "http://127.0.0.1:9"
    return InProcessInvoker(envs)


def _approval(ledger: Ledger, conv: str):
    (item,) = list(ledger.history(conv, item_type=ItemType.APPROVAL))
    return ApprovalStore(ledger).get(item["aprovacaoId"])


def _approve(ledger: Ledger, approval: str) -> None:
    ApprovalStore(ledger).decide(approval, approve=True, approver=OPERATOR, justification="conferido",
                                 allowed_approvers=frozenset({OPERATOR}))


def test_an_approval_asked_on_the_ceilingth_attempt_is_executed_once(mocked_aws, gateway, tools):
    """Three refunds of R$ 50 fail before the gateway (attempts 1–3); the model then asks
    R$ 150, above the limit: attempt 4 of 4 waits for a person, who approves it."""
    ledger, conv = mocked_aws["ledger"], f"teto-{uuid.uuid4().hex[:8]}"
    envs = {name: tools.environment(spec) for name, spec in TOOLS.items()}
    model = ScriptedModel(*(tool_use("emitir_reembolso", FIFTY) for _ in range(3)),
                          tool_use("emitir_reembolso", ABOVE), text_reply("(não deveria ser pedido)"))
    orch, _ = build(model, ledger, _invoker(envs, gateway_down=True), **POLICY)
    assert orch.handle(_turn(conv), Deadline.after(60)).status == "aguardando_aprovacao"
    record = _approval(ledger, conv)
    _approve(ledger, record.id)

    healthy, _ = build(ScriptedModel(), ledger, _invoker(envs), **POLICY)
    resumed = Resumer.of(healthy).resume(record.id, Deadline.after(60))
    assert (resumed.status, resumed.reason) == ("ativa", "aprovada_executada"), resumed
    assert resumed.reply == "Seu reembolso de R$ 150,00 do pedido 4821 foi aprovado e emitido."
    (debit,) = gateway.debits_for(conv)
    assert Decimal(str(debit["valor"])) == Decimal("150.00")
    assert ApprovalStore(ledger).get(record.id).status is ApprovalStatus.CONSUMED
    # The attempts say what happened: four, the fourth executed; no fifth was taken.
    attempts = [a for a in ledger.attempts(conv) if a["ferramenta"] == "emitir_reembolso"]
    assert [a["tentativaNumero"] for a in attempts] == [1, 2, 3, 4]
    assert attempts[-1]["resultado"] == "executado"


def test_a_resume_rerun_after_a_crash_at_the_ceiling_says_what_happened(mocked_aws, gateway, tools):
    """The resume executes the approved refund and dies before its commit; the rerun is
    the same call again: answered by the refund's key ("já tinha sido processado"), never
    refused by the ceiling and reported as not executed while the money moved."""
    ledger, conv = mocked_aws["ledger"], f"teto-crash-{uuid.uuid4().hex[:8]}"
    envs = {name: tools.environment(spec) for name, spec in TOOLS.items()}
    model = ScriptedModel(tool_use("emitir_reembolso", ABOVE), text_reply("x"))
    orch, _ = build(model, ledger, _invoker(envs), **POLICY, TETO_TENTATIVAS="2")
    assert orch.handle(_turn(conv), Deadline.after(60)).status == "aguardando_aprovacao"
    record = _approval(ledger, conv)
    _approve(ledger, record.id)

    class DiesBeforeCommit(Ledger):
        def commit_conversation(self, *args, **kwargs):
            raise RuntimeError("killed before the commit")

    dying = DiesBeforeCommit(ledger.table_name, ledger.client)
    crashed, _ = build(ScriptedModel(), dying, _invoker(envs), **POLICY, TETO_TENTATIVAS="2")
    with contextlib.suppress(RuntimeError):
        Resumer.of(crashed).resume(record.id, Deadline.after(60))
    assert len(gateway.debits_for(conv)) == 1
    assert ledger.read_conversation(conv).status is ConversationStatus.WAITING_APPROVAL

    rerun, _ = build(ScriptedModel(), ledger, _invoker(envs), **POLICY, TETO_TENTATIVAS="2")
    resumed = Resumer.of(rerun).resume(record.id, Deadline.after(60))
    assert (resumed.status, resumed.reason) == ("ativa", "aprovada_executada"), resumed
    assert "já tinha sido processado" in resumed.reply
    assert len(gateway.debits_for(conv)) == 1


def test_a_resume_sigkilled_after_the_refund_on_the_last_attempt_reruns_truthfully(local_stack, erp, gateway):
    """The same across OS processes: the resuming process SIGKILLed right after the
    refund answered, on a conversation whose approval was asked at the ceiling."""
    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    conv = f"teto-kill-{uuid.uuid4().hex[:8]}"
    env = {**POLICY, "TETO_TENTATIVAS": "1"}
    model = ScriptedModel(tool_use("emitir_reembolso", ABOVE), text_reply("x"))
    orch, _ = build(model, ledger, InProcessInvoker(local_stack.function_environments()), **env)
    assert orch.handle(_turn(conv), Deadline.after(60)).status == "aguardando_aprovacao"
    record = _approval(ledger, conv)
    _approve(ledger, record.id)

    def resume(*extra: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "tests.support.resume_process", record.id, *extra],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, **env, "PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}"})

    killed = resume("--kill-after-refund")
    killed.communicate(timeout=120)
    assert killed.returncode == -9
    assert len(gateway.debits_for(conv)) == 1
    rerun = resume("--clock-offset-s", "600")
    out, err = rerun.communicate(timeout=120)
    answer = json.loads(out.strip().splitlines()[-1])
    assert answer["motivo"] == "aprovada_executada", (answer, err[-2000:])
    assert "já tinha sido processado" in answer["resposta"]
    assert len(gateway.debits_for(conv)) == 1
