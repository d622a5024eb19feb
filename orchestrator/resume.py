"""Resuming a conversation after a person decided an approval (issue 10).

The decision (``ApprovalStore.decide``) is recorded first and is durable; this
step may run later, and again, safely:

    lease the conversation (busy: ConversationBusyError, retry later — the decision waits)
    not aguardando_aprovacao: nothing to do (already resumed, or a human took over)
    negada   ─► an is_error tool_result with the approver's reason; the customer is told
    aprovada ─► EXACTLY the approved call — tool and arguments from the record, not a
                new model turn — through the same control chain (ceiling, then the gate,
                which consumes the approval once) and the refund's own idempotency key
    commit (fenced) with the conversation active again

The executed call enters the history as an assistant ``tool_use`` carrying the
record's arguments and its ``tool_result``, so the model later sees what ran.
A crash after the approval is consumed but before the commit leaves the
conversation waiting: the rerun passes the gate on the consumed record and the
refund's idempotency key answers it — it never debits twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from cadencia_shared.approvals import ApprovalRecord, ApprovalStatus, ApprovalStore
from cadencia_shared.ledger import ConversationBusy, ConversationStatus, Ledger
from cadencia_shared.outcomes import Outcome

from . import history, texts
from .events import TurnRequest
from .loop import ConversationBusyError, Orchestrator
from .model import Deadline
from .steps import HandOff


@dataclass(frozen=True)
class Resumed:
    conversaId: str
    aprovacaoId: str
    resposta: str | None  # what the customer is told (None: nothing to say)
    status: str  # the conversation's status afterwards
    motivo: str


# What the customer hears after an approved call ran, by what the tool answered.
_APPROVED_TEXT = {
    Outcome.EXECUTED: texts.APPROVED_EXECUTED,
    Outcome.BLOCKED_BY_IDEMPOTENCY: texts.APPROVED_ALREADY,
    Outcome.OUTCOME_UNKNOWN: texts.APPROVED_UNCONFIRMED,
    Outcome.IN_PROGRESS_ELSEWHERE: texts.APPROVED_UNCONFIRMED,
}


def resume(orchestrator: Orchestrator, approval: str, deadline: Deadline) -> Resumed:
    ledger: Ledger = orchestrator.ledger
    record = ApprovalStore(ledger).get(approval)
    if record is None or record.status not in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED,
                                               ApprovalStatus.CONSUMED):
        return Resumed("", approval, None, "", "nada_a_retomar")
    lease_s = max(orchestrator.settings.conversation_lease_s, int(deadline.remaining_s()) + 30)
    try:
        state = ledger.acquire_conversation(conversa_id=record.conversa_id, cliente_id=record.cliente_id,
                                            lease_s=lease_s)
    except ConversationBusy:
        raise ConversationBusyError(record.conversa_id) from None
    if state.status is not ConversationStatus.WAITING_APPROVAL:
        ledger.release_conversation(state)
        return Resumed(record.conversa_id, approval, None, state.status.value, "nada_a_retomar")
    try:
        messages, status, text, reason = _decided(orchestrator, record, list(state.mensagens), deadline)
        ledger.commit_conversation(state, mensagens=messages, status=status)
    except BaseException:
        ledger.release_conversation(state)
        raise
    ledger.append_audit(conversa_id=record.conversa_id, evento="CONVERSA_RETOMADA_APOS_APROVACAO",
                        detalhes={"aprovacaoId": approval, "status": record.status.value, "motivo": reason})
    return Resumed(record.conversa_id, approval, text, status.value, reason)


def _decided(orchestrator: Orchestrator, record: ApprovalRecord, messages: list[dict[str, Any]],
             deadline: Deadline) -> tuple[list[dict[str, Any]], ConversationStatus, str, str]:
    block = SimpleNamespace(type="tool_use", id=f"toolu_aprovacao_{record.id}", name=record.ferramenta,
                            input=dict(record.argumentos))
    messages.append({"role": "assistant", "content": [
        {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}]})
    order = record.argumentos.get("pedidoId")
    if record.status is ApprovalStatus.DENIED:
        body = {"erro": "aprovacao_negada", "aprovacaoId": record.id, "motivo": record.justificativa,
                "mensagem": "A aprovação foi negada; a chamada não foi executada. Não tente novamente."}
        messages.append({"role": "user", "content": [history.tool_result(block.id, _json(body), is_error=True)]})
        return messages, ConversationStatus.ACTIVE, texts.APPROVAL_DENIED.format(pedidoId=order), "aprovacao_negada"
    request = TurnRequest(conversaId=record.conversa_id, clienteId=record.cliente_id,
                          mensagemId=f"aprovacao-{record.id}", mensagem="(aprovação)")
    done = orchestrator.tool_round.run(request, [block], deadline, history.tool_use_ids(messages[:-1]))
    messages.append({"role": "user", "content": done.results})
    result = done.results[0]
    if isinstance(done.ending, HandOff) or result.get("is_error"):
        text = done.ending.text if isinstance(done.ending, HandOff) else texts.APPROVED_NOT_DONE.format(pedidoId=order)
        return messages, ConversationStatus.WAITING_HUMAN, text, "aprovada_nao_executada"
    outcome = json.loads(result["content"]).get("resultado", "")
    template = _APPROVED_TEXT.get(Outcome(outcome) if outcome in Outcome._value2member_map_ else None,
                                  texts.APPROVED_UNCONFIRMED)
    text = template.format(pedidoId=order, valor=_reais(record))
    return messages, ConversationStatus.ACTIVE, text, "aprovada_executada"


def _reais(record: ApprovalRecord) -> str:
    return format(record.valor.quantize(record.valor.__class__("0.01")), "f").replace(".", ",")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
