"""One customer message, start to finish: the orchestrator's state machine.

    inbound ─► lease the conversation (version fence), claiming the message in the same write
       │ duplicate: stored reply            │ waiting for a human: no model call
       ▼                                    ▼
    model round ─► steps.next_step(response) ─► one of:
       Reply ─► commit (fenced), marking the message answered in the same write
       RunTools ─► tool_round: for each block: validate ─► controls (time budget,
                   retry ceiling) ─► invoke ─► tool_result; a control's refusal
                   may end the turn (ceiling ─► hand off; no time ─► reply)
       RunAgain (pause_turn) ─► next round
       ShrinkContext ─► trim once, then hand off
       HandOff (refusal, context, round budget) ─► aguardando_humano
       AwaitApproval (confirmation gate) ─► aguardando_aprovacao (no model call until decided)
    model error (429/529/5xx/timeout) ─► bounded retry in model.py ─► clean failure reply

The model only ever *proposes*: every limit, every approval and what counts as
success is decided here, in code.

Protocol edges (the history must stay valid for the next request):
- a ``tool_use`` id already used (earlier in this response or anywhere in the
  conversation) is answered ``is_error`` and never executed. It does not count
  against the retry ceiling: no call was attempted, and the ceiling counts
  attempts at a subject (a repeated id names no new attempt; the round budget
  still bounds a model that keeps repeating).
- ``tool_use`` blocks in a response whose stop reason is not ``tool_use``
  (``end_turn``, ``stop_sequence``, ``pause_turn``) are never executed — the model
  did not stop to have them run — and each gets an ``is_error`` result. Under
  ``max_tokens``/``refusal``/context overflow such a response is not kept at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger

from cadencia_shared.ledger import (
    CancellationPending,
    ConversationBusy,
    ConversationOfAnotherCustomer,
    ConversationState,
    ConversationStatus,
    Ledger,
    MessageAnswered,
    MessageInProgress,
    StaleConversation,
)
from cadencia_shared.ledger.exhausted import ExhaustedAttempts
from cadencia_shared.observability import Metric, count

from . import approval_lifecycle, handoffs, history, sealing, texts
from .budgets import Limit, TurnBudget, ending_for
from .controls import Control, default_controls
from .events import TurnReply, TurnRequest
from .invokers import ToolInvoker
from .model import ContextWindowExceeded, Deadline, ModelClient, ModelUnavailable
from .output_contract import TOOL_CHOICE, LedgerEvidence, ReplyCheck, tool_definition
from .settings import OrchestratorSettings
from .steps import (
    AwaitApproval,
    Correct,
    Diagnosis,
    Ending,
    HandOff,
    Reply,
    RunAgain,
    RunTools,
    ShrinkContext,
    Step,
    next_step,
    step_for_model_error,
)
from .tool_round import ToolRound
from .tools import definitions
from .tracing import Attributes, Tracer, conversation_ref, model_call_attributes, tracer_from_env, usage_attributes
from .usage import TurnUsage

_STORED_REPLY = {"resposta", "status", "motivo"}


class ConversationBusyError(Exception):
    """Another invocation is working on this conversation: retry later (the
    message was released for redelivery, nothing was done)."""


class ConcurrentCommitError(Exception):
    """Our lease was taken over before we committed: this invocation's reply is
    discarded and the message is released for redelivery."""


@dataclass
class _Outcome:
    messages: list[dict[str, Any]]
    status: ConversationStatus
    reply: str
    reason: str
    event: handoffs.Detail | None = None  # published once the outcome is committed
    usage: TurnUsage | None = None  # the turn's model calls: their cost is committed, their metrics emitted


@dataclass
class _TurnState:
    request: TurnRequest
    deadline: Deadline
    messages: list[dict[str, Any]]
    budget: TurnBudget
    check: ReplyCheck  # the output contract's checks of this turn's final answers
    exhausted: ExhaustedAttempts  # the retry ceiling's exhausted keys (seeded by the lease, stored by the commit)
    usage: TurnUsage
    shrunk_for_context: bool = False


class Orchestrator:
    def __init__(
        self,
        *,
        settings: OrchestratorSettings,
        ledger: Ledger,
        model: ModelClient,
        invoker: ToolInvoker,
        logger: Logger | None = None,
        controls: Sequence[Control] | None = None,
        events: handoffs.Publisher | None = None,
        clock: Callable[[], float] = time.monotonic,  # the model calls' latency
        tracer: Tracer | None = None,  # None: from TRACE_MODE (orchestrator.tracing)
    ) -> None:
        self.clock = clock
        self.tracer = tracer if tracer is not None else tracer_from_env()
        self.settings = settings
        self.ledger = ledger
        self.model = model
        self.invoker = invoker
        if controls is None:
            controls = default_controls(ledger, ceiling=settings.ceiling, reserve_s=settings.reserve_s,
                                        invoker=invoker, approval=settings.approval,
                                        breaker_failures=settings.breaker_failures,
                                        breaker_cooldown_s=settings.breaker_cooldown_s,
                                        breaker_cache_s=settings.breaker_cache_s)
        self.tool_round = ToolRound(invoker, controls, self.tracer)
        # The model's tools plus the final-answer tool of the output contract.
        self.tools = [*definitions(strict=settings.strict_tools), tool_definition(strict=settings.strict_tools)]
        self.log = logger or Logger(service="orchestrator")
        self.events = events if events is not None else handoffs.publisher_for(settings)

    # -- the turn ---------------------------------------------------------------
    def handle(self, req: TurnRequest, deadline: Deadline) -> TurnReply:
        # The turn's audit links are anchored once, by the commit (audit_anchors), or at the
        # block's end if the commit does not happen: no anchor write per link (audit_chain module doc).
        attributes: Attributes = {"gen_ai.operation.name": "invoke_agent",
                      "gen_ai.conversation.id": conversation_ref(req.conversaId)}
        with self.tracer.span("turn", attributes) as span, self.ledger.one_anchor_per_block(), \
                sealing.turn(self.ledger, conversation_id=req.conversaId, customer_id=req.clienteId,
                             deadline=deadline, threshold=self.settings.approval.threshold):
            reply = self._handle(req, deadline)
            span.put({"cadencia.status": reply.status, "cadencia.motivo": reply.motivo})
            return reply

    def _handle(self, req: TurnRequest, deadline: Deadline) -> TurnReply:
        # Leases outlive this invocation, so a live turn never loses its message or conversation to a redelivery.
        lease_s = max(self.settings.conversation_lease_s, int(deadline.remaining_s()) + 30)
        try:
            # One write takes the lease and claims the message; a message already
            # answered, or being answered by a live lease, is refused by the same write.
            state = self.ledger.acquire_conversation(conversation_id=req.conversaId, customer_id=req.clienteId,
                                                     lease_s=lease_s, message_id=req.mensagemId)
        except MessageAnswered as answered:
            return self._already_answered(req, answered)
        except MessageInProgress:
            return self._reply(req, None, "em_processamento", "mensagem_em_processamento", duplicate=True)
        except ConversationOfAnotherCustomer:
            self.ledger.append_audit(conversation_id=req.conversaId, event="CONVERSA_DE_OUTRO_CLIENTE",
                                     details={"clienteId": req.clienteId})
            return self._reply(req, None, "erro", "conversa_de_outro_cliente")
        except ConversationBusy:
            raise ConversationBusyError(req.conversaId) from None
        self.ledger.resume_chain(req.conversaId, state.chain_anchor)  # the first link needs no Query

        # The retry ceiling's exhausted keys: read by the lease, noted by the turn's
        # calls, stored by the commit (cadencia_shared.ledger.exhausted).
        exhausted = ExhaustedAttempts(state.exhausted)
        try:
            reply, committed = self._commit(req, state, self._turn(req, state, deadline, exhausted), exhausted)
        except StaleConversation:
            self.ledger.append_audit(conversation_id=req.conversaId, event="COMMIT_CONCORRENTE_REJEITADO",
                                     details={"mensagemId": req.mensagemId, "versao": state.version})
            raise ConcurrentCommitError(req.conversaId) from None
        except BaseException:
            # Fenced: after a commit whose answer was lost this changes nothing, so an
            # answered message is never made runnable again (tests/test_lost_commit_answer.py).
            self.ledger.release_conversation(state)
            raise
        if committed.event is not None:  # only what was committed is announced
            self.events.publish(committed.event)
        if committed.usage is not None:
            committed.usage.emit(self.settings.model_id)
        return reply

    @staticmethod
    def _already_answered(req: TurnRequest, answered: MessageAnswered) -> TurnReply:
        """A redelivery of an answered message: its stored reply, or, when it is older
        than the replies the ledger keeps, no text (nothing is sent again from here)."""
        if answered.reply is not None:
            return TurnReply.model_validate({"conversaId": req.conversaId, "mensagemId": req.mensagemId,
                                             **answered.reply, "duplicada": True})
        return TurnReply(conversaId=req.conversaId, mensagemId=req.mensagemId, resposta=None,
                         status=answered.status, motivo="mensagem_ja_respondida", duplicada=True)

    def _commit(self, req: TurnRequest, state: ConversationState, outcome: _Outcome,
                exhausted: ExhaustedAttempts) -> tuple[TurnReply, _Outcome]:
        """The new state and "this message was answered" commit in one UpdateItem,
        fenced on the lease and on no pending cancellation. Returns the reply and
        the outcome actually committed (its hand-off event is published after)."""
        try:
            return self._write(req, state, outcome, exhausted), outcome
        except CancellationPending:
            # The operator's command came after the last check: it wins over what
            # this turn decided (a tool result that arrived late included). Whatever
            # this turn would have announced (an approval request) is not: the
            # cancellation's hand-off is.
            self._record_limit(req, Limit.CANCELLED, {"verificadoNo": "commit"})
            ending = ending_for(Limit.CANCELLED)
            cancelled = _Outcome(outcome.messages, ConversationStatus.WAITING_HUMAN, ending.text, ending.reason,
                                 handoffs.hand_off(req.conversaId, ending.reason, req.mensagemId), outcome.usage)
            return self._write(req, state, cancelled, exhausted), cancelled

    def _write(self, req: TurnRequest, state: ConversationState, outcome: _Outcome,
               exhausted: ExhaustedAttempts) -> TurnReply:
        reply = self._reply(req, outcome.reply, outcome.status.value, outcome.reason)
        if outcome.reason == Limit.CANCELLED:  # before the commit that consumes the cancellation
            approval_lifecycle.void_open_approvals(self.ledger, req.conversaId, outcome.messages)
        # Stored for a redelivery: what the request does not already say (each byte
        # of the conversation item is paid on every lease and commit). The commit also
        # anchors the turn's audit links on the conversation (no anchor write of its own).
        chain_head = self.ledger.chain_head_for_commit(req.conversaId, state.chain_anchor)
        with self.tracer.span("commit", {"cadencia.status": outcome.status.value}):
            self._store(req, state, outcome, exhausted, chain_head, reply)
        return reply

    def _store(self, req: TurnRequest, state: ConversationState, outcome: _Outcome, exhausted: ExhaustedAttempts,
               chain_head: Any, reply: TurnReply) -> None:
        self.ledger.commit_conversation(state, messages=history.for_storage(outcome.messages), status=outcome.status,
                                        reply=reply.model_dump(mode="json", include=_STORED_REPLY),
                                        cancelled=outcome.reason == Limit.CANCELLED, chain_head=chain_head,
                                        exhausted=exhausted.numbers,
                                        cost_micro_usd=0 if outcome.usage is None else
                                        round(outcome.usage.cost_usd * 1e6))
        self.ledger.chain_anchored_by_commit(req.conversaId, chain_head)

    def _turn(self, req: TurnRequest, state: ConversationState, deadline: Deadline,
              exhausted: ExhaustedAttempts) -> _Outcome:
        messages = history.append_user_text(state.messages, req.mensagem)
        if state.status is ConversationStatus.WAITING_HUMAN:
            # A human owns the conversation now: the model is not consulted.
            return _Outcome(messages, ConversationStatus.WAITING_HUMAN, texts.WAITING_HUMAN, "aguardando_humano")
        if state.status is ConversationStatus.WAITING_APPROVAL:
            # A call awaits a person's decision; the decision resumes the conversation,
            # unless the request expired undecided: closed, told, the agent's again.
            expired = approval_lifecycle.expired_wait(self.ledger, messages)
            if expired is not None:
                return _Outcome(messages, ConversationStatus.ACTIVE, expired, "aprovacao_expirada")
            return _Outcome(messages, ConversationStatus.WAITING_APPROVAL, texts.STILL_AWAITING_APPROVAL,
                            "aguardando_aprovacao")
        evidence = LedgerEvidence(self.ledger, ceiling=self.settings.ceiling, release=self.settings.approval.release)
        check = ReplyCheck(req.conversaId, req.clienteId, evidence, self.settings.output_contract_attempts)
        kept = history.trim_in_steps(messages, self.settings.history_max_messages, self.settings.history_cut_to)
        turn = _TurnState(req, deadline, kept, self._budget(state), check, exhausted,
                          TurnUsage(self.settings.input_price_usd_mtok, self.settings.output_price_usd_mtok))
        outcome = self._rounds(turn)
        outcome.usage = turn.usage
        return outcome

    def _rounds(self, turn: _TurnState) -> _Outcome:
        while True:
            spent = turn.budget.before_model_call(turn.deadline)
            if spent is not None:
                return self._end(turn, spent)
            outcome = self._apply(turn, self._ask_model(turn))
            if outcome is not None:
                return outcome

    def _budget(self, state: ConversationState) -> TurnBudget:
        cfg = self.settings
        return TurnBudget(max_model_calls=cfg.max_rounds, max_tool_calls=cfg.max_tool_calls,
                          max_tokens=cfg.max_turn_tokens, reserve_s=cfg.reserve_s,
                          min_model_call_s=self.model.min_call_s, max_cost_usd=cfg.max_conversation_cost_usd,
                          cost_before_usd=state.cost_micro_usd / 1e6)

    def _ask_model(self, turn: _TurnState) -> Step:
        started = self.clock()
        try:
            with self.tracer.span("chat", model_call_attributes(self.settings.provider, self.model.model)) as span:
                response = self.model.create(
                    system=texts.SYSTEM_PROMPT, tools=self.tools, messages=turn.messages, deadline=turn.deadline,
                    reserve_s=self.settings.reserve_s, tool_choice=TOOL_CHOICE,
                )
                span.put(usage_attributes(response))
        except ContextWindowExceeded:
            return ShrinkContext()
        except ModelUnavailable as err:
            # The customer hears an apology; the engineer reads the cause here (the local chat shows it).
            self.log.warning("model unavailable", extra={"classe": err.error_class.value, "erro": err.sdk_error,
                                                         "tentativas": err.attempts})
            return step_for_model_error(err)
        turn.budget.add_usage(response.usage)
        turn.budget.cost_usd += turn.usage.add(response.usage, self.clock() - started)
        turn.check.transcript = turn.messages  # the tool results a statement is checked against
        return next_step(response, turn.check)

    def _apply(self, turn: _TurnState, step: Step) -> _Outcome | None:
        """The one place a step is acted on; None: ask the model again."""
        if isinstance(step, RunTools):
            return self._run_tools(turn, step)
        if isinstance(step, RunAgain):
            self._keep_without_running(turn.messages, step.keep)
            return None
        if isinstance(step, ShrinkContext):
            return self._shrink(turn)
        if isinstance(step, Correct):  # the output contract refused a final answer: ask again
            self._record(turn.request, step.diagnosis)
            turn.messages = history.extend(turn.messages, step.record)
            return None
        return self._end(turn, step)

    def _run_tools(self, turn: _TurnState, step: RunTools) -> _Outcome | None:
        seen = history.tool_use_ids(turn.messages)
        turn.messages.append({"role": "assistant", "content": step.content})
        done = self.tool_round.run(turn.request, step.blocks, turn.deadline, seen, turn.budget, turn.exhausted)
        turn.messages.append({"role": "user", "content": done.results})
        ending = done.ending
        return None if ending is None else self._end(turn, ending)

    def _shrink(self, turn: _TurnState) -> _Outcome | None:
        """Half the history, whole turns only, once per turn; then a human."""
        shrunk = history.trim(turn.messages, max(2, len(turn.messages) // 2))
        if turn.shrunk_for_context or len(shrunk) >= len(turn.messages):
            return self._end(turn, HandOff(texts.CONTEXT_EXCEEDED, "janela_de_contexto"))
        turn.messages, turn.shrunk_for_context = shrunk, True
        return None

    @staticmethod
    def _keep_without_running(messages: list[dict[str, Any]], content: list[dict[str, Any]]) -> None:
        messages.append({"role": "assistant", "content": content})
        unanswered = history.not_executed(content, _json({
            "erro": "chamada_nao_executada",
            "mensagem": "A resposta terminou sem pedir a execução de ferramentas; esta chamada não foi executada.",
        }))
        if unanswered:
            count(Metric.MODEL_ERRORS, {"Classe": "tool_use_sem_stop_reason"})
            messages.append({"role": "user", "content": unanswered})

    # -- endings ----------------------------------------------------------------------
    def _end(self, turn: _TurnState, step: Ending) -> _Outcome:
        if step.diagnosis is not None:
            self._record(turn.request, step.diagnosis)
        if step.limit is not None:
            self._record_limit(turn.request, Limit(step.limit), turn.budget.figures())
        if isinstance(step, Reply | HandOff) and step.record:
            turn.messages = history.extend(turn.messages, step.record)
        if isinstance(step, HandOff):
            count(Metric.HUMAN_HANDOFFS, {"Motivo": step.reason})
            if not step.audited:
                self.ledger.append_audit(conversation_id=turn.request.conversaId, event="ENCAMINHADO_PARA_HUMANO",
                                         details={"motivo": step.reason, "mensagemId": turn.request.mensagemId})
            return _Outcome(turn.messages, ConversationStatus.WAITING_HUMAN, step.text, step.reason,
                            handoffs.hand_off(turn.request.conversaId, step.reason, turn.request.mensagemId))
        if isinstance(step, AwaitApproval):
            event = None if step.request is None else handoffs.approval_requested(turn.request.conversaId,
                                                                                 step.request)
            return _Outcome(turn.messages, ConversationStatus.WAITING_APPROVAL, step.text, step.reason, event)
        return _Outcome(turn.messages, ConversationStatus.ACTIVE, step.text, step.reason)

    def _record(self, req: TurnRequest, diagnosis: Diagnosis) -> None:
        count(Metric.MODEL_ERRORS, {"Classe": diagnosis.error_class})
        for result in diagnosis.contract:
            count(Metric.OUTPUT_CONTRACT, {"Resultado": result})
        if diagnosis.audit is not None:
            event, details = diagnosis.audit
            self.ledger.append_audit(conversation_id=req.conversaId, event=event, details=details)
        if diagnosis.warning is not None:
            self.log.warning("unknown stop reason", extra=diagnosis.warning)

    def _record_limit(self, req: TurnRequest, limit: Limit, details: dict[str, Any]) -> None:
        count(Metric.TURN_LIMITS, {"Motivo": limit.value})
        self.ledger.append_audit(conversation_id=req.conversaId, event="TURNO_INTERROMPIDO",
                                 details={"motivo": limit.value, "mensagemId": req.mensagemId, **details})

    @staticmethod
    def _reply(req: TurnRequest, text: str | None, status: str, reason: str, *, duplicate: bool = False) -> TurnReply:
        return TurnReply(conversaId=req.conversaId, mensagemId=req.mensagemId, resposta=text, status=status,
                         motivo=reason, duplicada=duplicate)


def _json(value: Any) -> str:
    # Compact: the model re-reads every kept result on each call (docs/model-cost.md).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
