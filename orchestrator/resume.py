"""Resuming a conversation after a person decided an approval.

The decision (``ApprovalStore.decide``) is recorded first and is durable; this
step may run later, and again, safely:

    lease the conversation (busy: ConversationBusyError, retry later — the decision waits)
    not aguardando_aprovacao: nothing to do (already resumed, or a human took over)
    negada   ─► an is_error tool_result with the approver's reason; the customer is told
    expired undecided, or approved and not run before its expiry ─► the record closed
                (expirada); the customer is told which of the two; the conversation
                active again (``approval_lifecycle``)
    aprovada, without a decision record approving exactly it (``approval_use``) ─► nothing
                runs; the approval is unusable, a person takes over
    aprovada ─► EXACTLY the approved call — tool and arguments from the record, not a
                new model turn — through the same control chain (the ceiling lets it through
                under the number it asked with: the same call, already counted; then the gate,
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
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from cadencia_shared import approval_use
from cadencia_shared.approvals import OPEN, ApprovalRecord, ApprovalStatus, ApprovalStore
from cadencia_shared.catalog import EMITIR_REEMBOLSO
from cadencia_shared.ledger import (
    CancellationPending,
    ClaimStatus,
    ConversationBusy,
    ConversationState,
    ConversationStatus,
    Ledger,
    RefundClaim,
    refund_idempotency_key,
)
from cadencia_shared.outcomes import Outcome

from . import approval_lifecycle, handoff_texts, handoffs, history, sealing, texts
from .budgets import Limit, ending_for
from .controls import default_controls
from .events import TurnRequest
from .invokers import ToolInvoker
from .loop import ConversationBusyError, Orchestrator
from .model import Deadline
from .settings import OrchestratorSettings
from .steps import HandOff
from .switches import SwitchRefusal
from .tool_round import RoundResult, ToolRound
from .whatsapp_replies import CustomerMessages, NoChannel, customer_messages


@dataclass(frozen=True)
class Resumed:
    conversation_id: str
    approval_id: str
    reply: str | None  # what the customer is told (None: nothing to say)
    status: str  # the conversation's status afterwards
    reason: str

    def to_wire(self) -> dict[str, Any]:
        """The resume entry's answer (orchestrator/handler.py), in the turn answer's names."""
        return {"status": self.status, "motivo": self.reason, "resposta": self.reply,
                "conversaId": self.conversation_id}


# What the customer hears after an approved call ran, by what the tool answered.
_APPROVED_TEXT: dict[str, str] = {
    Outcome.EXECUTED: texts.APPROVED_EXECUTED,
    Outcome.BLOCKED_BY_IDEMPOTENCY: texts.APPROVED_ALREADY,
    Outcome.OUTCOME_UNKNOWN: texts.APPROVED_UNCONFIRMED,
    Outcome.IN_PROGRESS_ELSEWHERE: texts.APPROVED_UNCONFIRMED,
}
_REPEATED_TEXT: dict[str, str] = {ClaimStatus.EXECUTED.value: texts.APPROVED_ALREADY,
                                  ClaimStatus.DECLINED.value: texts.APPROVED_ALREADY_DECLINED}


@dataclass(frozen=True)
class Resumer:
    """What resuming needs: no model (no new model turn), the ledger, and the same
    control chain and invoker as the orchestrator's tool rounds."""

    settings: OrchestratorSettings
    ledger: Ledger
    tool_round: ToolRound
    events: handoffs.Publisher
    # The customer's message when the conversation came from WhatsApp (the channel's outbox).
    messages: CustomerMessages = NoChannel()  # noqa: RUF009 - stateless: one shared instance is right

    @classmethod
    def of(cls, orchestrator: Orchestrator) -> Resumer:
        return cls(orchestrator.settings, orchestrator.ledger, orchestrator.tool_round, orchestrator.events,
                   customer_messages(orchestrator.settings, orchestrator.ledger))

    @classmethod
    def build(cls, settings: OrchestratorSettings, ledger: Ledger, invoker: ToolInvoker) -> Resumer:
        controls = default_controls(ledger, ceiling=settings.ceiling, reserve_s=settings.reserve_s, invoker=invoker,
                                    approval=settings.approval, breaker_failures=settings.breaker_failures,
                                    breaker_cooldown_s=settings.breaker_cooldown_s,
                                    breaker_cache_s=settings.breaker_cache_s)
        return cls(settings, ledger, ToolRound(invoker, controls), handoffs.publisher_for(settings),
                   customer_messages(settings, ledger))

    def resume(self, approval: str, deadline: Deadline) -> Resumed:
        record = ApprovalStore(self.ledger).get(approval)
        expiring = record is not None and _expiring(record, self.ledger.now_ms())
        if record is None or (record.status is ApprovalStatus.PENDING and not expiring):
            return Resumed("", approval, None, "", "nada_a_retomar")
        lease_s = max(self.settings.conversation_lease_s, int(deadline.remaining_s()) + 30)
        try:
            state = self.ledger.acquire_conversation(conversation_id=record.conversation_id,
                                                     customer_id=record.customer_id, lease_s=lease_s)
        except ConversationBusy:
            raise ConversationBusyError(record.conversation_id) from None
        if not self._waits_on(record, state, expiring):
            self.ledger.release_conversation(state)
            return Resumed(record.conversation_id, approval, None, state.status.value, "nada_a_retomar")
        try:
            if expiring:  # back to the agent: nothing is pending any more
                messages, status = list(state.messages), ConversationStatus.ACTIVE
                reason = "aprovada_expirada" if approval_lifecycle.was_approved(record) else "aprovacao_expirada"
                text = approval_lifecycle.expired_text(record)
            else:
                messages, status, text, reason = self._decided(record, list(state.messages), deadline)
            stored = history.for_storage(messages)
            try:
                self.ledger.commit_conversation(state, messages=stored, status=status)
            except CancellationPending:
                # An operator cancelled while the conversation waited: the
                # cancellation wins, as in the loop's commit; a person takes over.
                ending = ending_for(Limit.CANCELLED)
                status, text, reason = ConversationStatus.WAITING_HUMAN, ending.text, ending.reason
                # Voided before the commit that consumes the cancellation: an approved,
                # unconsumed record would otherwise authorise the same call later.
                approval_lifecycle.void_open_approvals(self.ledger, record.conversation_id, messages, record.id)
                self.ledger.commit_conversation(state, messages=stored, status=status, cancelled=True)
        except BaseException:
            self.ledger.release_conversation(state)
            raise
        self.ledger.append_audit(conversation_id=record.conversation_id, event="CONVERSA_RETOMADA_APOS_APROVACAO",
                                 details={"aprovacaoId": approval, "status": record.status.value, "motivo": reason})
        if status is ConversationStatus.WAITING_HUMAN:
            self.events.publish(handoffs.hand_off(record.conversation_id, reason))
        if text:
            self.messages.send(record.conversation_id, f"aprovacao-{approval}", text)
        return Resumed(record.conversation_id, approval, text, status.value, reason)

    def _waits_on(self, record: ApprovalRecord, state: ConversationState, expiring: bool) -> bool:
        # The conversation acts only on the request it waits on now (the last one it
        # asked for): a decision of another one (an older request, another call of the
        # same response) never runs in its place.
        waiting = (state.status is ConversationStatus.WAITING_APPROVAL
                   and record.answers(approval_lifecycle.awaited_approval(state.messages)))
        if not expiring:
            return waiting
        # Closed whatever the conversation does now; it is told only when it waits on this one.
        return approval_lifecycle.expire(self.ledger, record) and waiting

    def _stopped(self, record: ApprovalRecord, messages: list[dict[str, Any]],
                 order: Any) -> tuple[list[dict[str, Any]], ConversationStatus, str, str]:
        """An operator stopped the tool after the approval: this round's call did not run. When
        the ledger proves no earlier run of it moved money either, the approval is voided
        (consumed too: refused at the tool's edge after the gate consumed it) so it cannot
        authorise the call later, and the customer is told nothing was done. An earlier run
        that may have moved money (a crash after it, then this retry) keeps its approval, and
        the customer is told what its claim proves."""
        claim = self._claim_of(record)
        if claim is None or claim.status in handoff_texts.NOTHING_MOVED:
            approval_lifecycle.void_approval(self.ledger, record.conversation_id, record.id,
                                             reason=SwitchRefusal.STOPPED.value, consumed_too=True)
            return (messages, ConversationStatus.WAITING_HUMAN, texts.APPROVED_TOOL_STOPPED.format(order_id=order),
                    "aprovada_ferramenta_desligada")
        return (messages, ConversationStatus.WAITING_HUMAN, handoff_texts.approved_tool_stopped(claim),
                "aprovada_ferramenta_desligada_apos_envio")

    def _claim_of(self, record: ApprovalRecord) -> RefundClaim | None:
        """The refund claim of the call ``record`` asked for (None: not a refund, or none yet)."""
        order = record.arguments.get("pedidoId")
        if not isinstance(order, str) or record.tool != EMITIR_REEMBOLSO.name:
            return None
        return self.ledger.get_claim(refund_idempotency_key(record.conversation_id, order))

    def _decided(self, record: ApprovalRecord, messages: list[dict[str, Any]],
                 deadline: Deadline) -> tuple[list[dict[str, Any]], ConversationStatus, str, str]:
        """The decision into the history: the approved call as an assistant tool_use
        with the RECORD's arguments, then its tool_result."""
        block = SimpleNamespace(type="tool_use", id=f"toolu_aprovacao_{record.id}", name=record.tool,
                                input=dict(record.arguments))
        seen = history.tool_use_ids(messages)
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}]})
        order = record.arguments.get("pedidoId")
        decided = record.status not in approval_use.USABLE_STATUSES or approval_use.usable(self.ledger, record)
        if not record.intact or not decided:
            # Edited after it was requested (its arguments, or the amount people were
            # shown): what would run, or what was said, is not what was decided. Or marked
            # approved with no person's decision record approving exactly it: never runs.
            self.ledger.append_audit(conversation_id=record.conversation_id, event="APROVACAO_INVALIDA",
                                     details={"aprovacaoId": record.id, "status": record.status.value,
                                              "vinculada": record.intact, "decisao": decided})
            body = {"erro": "aprovacao_inutilizavel", "mensagem": "Aprovação inválida; a chamada não foi executada."}
            messages.append({"role": "user", "content": [history.tool_result(block.id, _json(body), is_error=True)]})
            return (messages, ConversationStatus.WAITING_HUMAN, handoff_texts.approval_unusable(self._claim_of(record)),
                    "aprovacao_inutilizavel")
        if record.status is ApprovalStatus.DENIED:
            denied = {"erro": "aprovacao_negada", "aprovacaoId": record.id, "motivo": record.justification,
                      "mensagem": "A aprovação foi negada; a chamada não foi executada. Não tente novamente."}
            messages.append({"role": "user", "content": [history.tool_result(block.id, _json(denied), is_error=True)]})
            return messages, ConversationStatus.ACTIVE, texts.APPROVAL_DENIED.format(order_id=order), "aprovacao_negada"
        request = TurnRequest(conversaId=record.conversation_id, clienteId=record.customer_id,
                              mensagemId=f"aprovacao-{record.id}", mensagem="(aprovação)")
        # Sealed by a session of this resume, its envelope naming the approval (docs/seal.md).
        with sealing.turn(self.ledger, conversation_id=record.conversation_id, customer_id=record.customer_id,
                          deadline=deadline, threshold=self.settings.approval.threshold, approval_id=record.id):
            done = self.tool_round.run(request, [block], deadline, seen, approved_attempt=record.attempt_number)
        messages.append({"role": "user", "content": done.results})
        if _refused_as(done, SwitchRefusal.STOPPED):
            return self._stopped(record, messages, order)
        status, text, reason = _after_approved_call(done, record)
        return messages, status, text, reason


def _refused_as(done: RoundResult, reason: SwitchRefusal) -> bool:
    """Whether the round's one call was refused by a control with ``reason`` (never invoked)."""
    result = done.results[0]
    if not result.get("is_error"):
        return False
    try:
        error = json.loads(result["content"]).get("erro")
    except (TypeError, ValueError, AttributeError):
        return False
    # The control's refusal names it as text; the tool's edge as its typed error's code.
    return error == reason.value or (isinstance(error, dict) and error.get("codigo") == reason.value)


def _expiring(record: ApprovalRecord, now_ms: int) -> bool:
    # An approved record whose resume came too late expires too (an approval binds an
    # expiry): closed, and the customer is told it was approved but not run in time.
    return record.status is ApprovalStatus.EXPIRED or (record.status in OPEN and record.expired(now_ms))


def _after_approved_call(done: RoundResult, record: ApprovalRecord) -> tuple[ConversationStatus, str, str]:
    """What the customer hears: only what the tool's answer shows (never more)."""
    order = record.arguments.get("pedidoId")
    result = done.results[0]
    if isinstance(done.ending, HandOff):
        return ConversationStatus.WAITING_HUMAN, done.ending.text, "aprovada_nao_executada"
    if result.get("is_error"):
        return ConversationStatus.WAITING_HUMAN, texts.APPROVED_NOT_DONE.format(order_id=order), \
            "aprovada_nao_executada"
    answer = json.loads(result["content"])
    answered = answer.get("resultado", "")
    template = _APPROVED_TEXT.get(answered, texts.APPROVED_UNCONFIRMED)
    if answered == Outcome.BLOCKED_BY_IDEMPOTENCY:
        # A repeat answers the key's ORIGINAL outcome, which may be a decline.
        original: Any = (answer.get("dados") or {}).get("resultadoOriginal")  # the tool's JSON
        template = _REPEATED_TEXT.get(original, texts.APPROVED_UNCONFIRMED)
    text = template.format(order_id=order, amount=_amount_in_reais(record))
    return ConversationStatus.ACTIVE, text, "aprovada_executada"


def _amount_in_reais(record: ApprovalRecord) -> str:
    # Only intact records reach here: the amount is the bound argument.
    assert record.amount is not None
    return format(record.amount.quantize(Decimal("0.01")), "f").replace(".", ",")


def _json(value: Any) -> str:
    # Compact: the model re-reads every kept result on each call (docs/model-cost.md).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
