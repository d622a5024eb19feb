"""Approvals raced and killed across OS processes, on the local stack's moto server
(serialized like DynamoDB), the real PostgreSQL and the real gateway:

- two operators run ``scripts/aprovar.py`` on one request at once: one decision
  wins, the other is refused, one debit;
- two resumes of one approval at once: one execution;
- the resuming process SIGKILLed after the approval was consumed, before or after
  the refund ran: the rerun never debits twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.ledger import ConversationStatus, ItemType, Ledger
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker
from orchestrator.model import Deadline
from scripts.local_stack.aws import session_client

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build

ROOT = Path(__file__).resolve().parents[1]
POLICY = {"APROVACAO_LIMITE_REAIS": "100", "APROVADORES": "ana.operadora,bruno.supervisor"}


@pytest.fixture
def server_ledger(local_stack, erp) -> Ledger:
    return Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))


def _waiting(local_stack, ledger: Ledger) -> tuple[str, str]:
    """A conversation waiting for approval of R$ 189,90 on order 4821; (conv, approval id)."""
    conv = f"corrida-{uuid.uuid4().hex[:10]}"
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 189.9}), text_reply("x"))
    orch, _ = build(model, ledger, InProcessInvoker(local_stack.function_environments()), **POLICY)
    reply = orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                                    mensagem="quero o reembolso"), Deadline.after(60))
    assert reply.status == "aguardando_aprovacao"
    (item,) = list(ledger.history(conv, item_type=ItemType.APPROVAL))
    return conv, item["aprovacaoId"]


def _env() -> dict[str, str]:
    return {**os.environ, **POLICY, "PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}"}


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _resume(approval: str, *extra: str) -> subprocess.Popen:
    return _spawn("tests.support.resume_process", approval, *extra)


def test_two_operators_deciding_at_once_one_decision_wins_one_debit(local_stack, server_ledger, gateway):
    conv, approval = _waiting(local_stack, server_ledger)
    procs = [_spawn("scripts.aprovar", "aprovar", approval, "--por", who, "--motivo", "conferido")
             for who in ("ana.operadora", "bruno.supervisor")]
    outs = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 1], outs
    loser = next(out for p, (out, _) in zip(procs, outs, strict=True) if p.returncode == 1)
    assert "aprovacao_ja_decidida" in loser
    assert len(gateway.debits_for(conv)) == 1
    record = ApprovalStore(server_ledger).get(approval)
    assert record.status is ApprovalStatus.CONSUMED and record.decided_by in POLICY["APROVADORES"].split(",")
    # The operator command appends on the conversation's hash chain, as every writer does.
    chain = AuditChain(AUDIT_TABLE, server_ledger.client, anchor_table=server_ledger.table_name)
    decided = [r for r in chain.records(conv) if r["evento"] == "APROVACAO_DECIDIDA"]
    assert len(decided) == 1


def test_two_resumes_at_once_execute_once(local_stack, server_ledger, gateway):
    conv, approval = _waiting(local_stack, server_ledger)
    ApprovalStore(server_ledger).decide(approval, approve=True, approver="ana.operadora", justification="ok",
                                        allowed_approvers=frozenset({"ana.operadora"}))
    procs = [_resume(approval), _resume(approval)]
    answers = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
    reasons = sorted(a["motivo"] for a in answers)
    assert "aprovada_executada" in reasons and reasons.count("aprovada_executada") == 1, answers
    assert len(gateway.debits_for(conv)) == 1
    assert server_ledger.read_conversation(conv).status is ConversationStatus.ACTIVE


@pytest.mark.parametrize("kill", ["--kill-before-refund", "--kill-after-refund"])
def test_a_resume_sigkilled_after_consuming_never_debits_twice(local_stack, server_ledger, gateway, kill):
    conv, approval = _waiting(local_stack, server_ledger)
    ApprovalStore(server_ledger).decide(approval, approve=True, approver="ana.operadora", justification="ok",
                                        allowed_approvers=frozenset({"ana.operadora"}))
    killed = _resume(approval, kill)
    killed.communicate(timeout=120)
    assert killed.returncode == -9
    assert ApprovalStore(server_ledger).get(approval).status is ApprovalStatus.CONSUMED
    assert server_ledger.read_conversation(conv).status is ConversationStatus.WAITING_APPROVAL
    debits_before = len(gateway.debits_for(conv))
    assert debits_before == (0 if kill == "--kill-before-refund" else 1)
    # The rerun, once the dead process's lease has lapsed (its clock 10 minutes on).
    rerun = _resume(approval, "--clock-offset-s", "600")
    answer = json.loads(rerun.communicate(timeout=120)[0].strip().splitlines()[-1])
    assert answer["motivo"] == "aprovada_executada", answer
    assert len(gateway.debits_for(conv)) == 1
    if kill == "--kill-after-refund":
        assert "já tinha sido processado" in answer["resposta"]
    again = _resume(approval, "--clock-offset-s", "600")
    assert json.loads(again.communicate(timeout=120)[0].strip().splitlines()[-1])["motivo"] == "nada_a_retomar"
    assert len(gateway.debits_for(conv)) == 1
