"""The controls every tool call passes, in order, before and after it is invoked.

A control is one component with two steps:

- ``before(ctx)``: may refuse the call with a typed ``Refusal`` — its reason, the
  ``is_error`` tool_result the model reads, and optionally how the turn ends for
  the customer (a hand-off, or a reply). A refused call is never invoked and the
  controls after it are not consulted.
- ``after(ctx, outcome)``: sees what happened — the tool's answer, its failure, or
  the refusal of a later control. After-steps run in reverse order, only for the
  controls whose before-step let the call through (as middleware unwinds).

The chain is ``default_controls()``: adding a control is a class here (or in its
own module) and one line in that list, never a branch in the tool round or the
loop. DESIGN's order: deadline and budgets → cancellation → tool switches
(``switches.py``: an operator stopped the tool) → circuit breaker →
retry ceiling → feasibility (the tool's own refusals, ``feasibility.py``) →
confirmation gate → invoke → after-steps.
``DecisionAudit`` heads the list, so its after-step runs last: every call that
was invoked leaves one link on the conversation's audit chain with its decision
and its outcome — the ONLY place that outcome is written (the retry ceiling's
record, written before the invoke, is the decision); a refused call leaves the
refusing control's own link.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from cadencia_shared.audit_chain import ChainContention
from cadencia_shared.ledger import Attempt, AttemptRecorder, AttemptResult, AuditTrail, ConversationCancellation, Ledger
from cadencia_shared.ledger.attempts import (
    CALL_EVENT,
    CEILING_EVENT,
    RESULT_DETAIL_MAX,
    read_decided_attempt,
)
from cadencia_shared.ledger.exhausted import ExhaustedAttempts
from cadencia_shared.observability import Metric, count_for_tool, logger_for
from cadencia_shared.outcomes import Outcome
from cadencia_shared.settings import ApprovalSettings

from . import texts
from .budgets import Limit, TurnBudget, ending_for
from .invokers import Invocation, ToolInvoker
from .model import Deadline
from .steps import Ending, HandOff
from .tools import ToolCall


class RefusalReason(StrEnum):
    """Why a built-in control refused a call: the ``erro`` the model reads (wire
    names). A new control may bring its own StrEnum."""

    OUT_OF_TIME = "sem_tempo"
    TOOL_BUDGET = "orcamento_de_ferramentas"
    TOKEN_BUDGET = "orcamento_de_tokens"
    COST_BUDGET = "orcamento_de_custo"
    CANCELLED = "cancelada"
    CEILING = "bloqueado_por_teto"


@dataclass(frozen=True)
class Refusal:
    reason: StrEnum
    details: dict[str, Any]  # the rest of the is_error tool_result body, after ``erro``
    ending: Ending | None = None  # how the turn ends for the customer; None: the model goes on

    def body(self) -> str:
        return json.dumps({"erro": self.reason.value, **self.details}, ensure_ascii=False, separators=(",", ":"))


@dataclass
class CallContext:
    """One tool call on its way through the chain. ``notes`` carries what a
    control's before-step leaves for its own after-step (keyed by the control's class, or by
    a name a module's readers share)."""

    call: ToolCall
    deadline: Deadline
    budget: TurnBudget | None = None  # the turn's budget (None: a round run on its own, e.g. in a test)
    message_id: str | None = None  # the customer's message this call answers (its hand-off link names it)
    # The turn's exhausted attempt keys (None: a chain run without a conversation's lease,
    # e.g. the approval resume: the retry ceiling then always numbers on the counter).
    exhausted: ExhaustedAttempts | None = None
    # A call a person approved, resumed: the retry ceiling's number it got when it asked
    # (``ApprovalRecord.attempt_number``). It is that call, already counted: the ceiling
    # gives it no new number (docs/decisions/approved-call-keeps-its-attempt-number.md).
    approved_attempt: int | None = None
    notes: dict[str | type, Any] = field(default_factory=dict)
    # Shared by every call of one tool round (keyed by the control): what a control
    # must know about the round's earlier calls (the gate: which call awaits a person).
    round_notes: dict[Any, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CallOutcome:
    """What the after-steps see: exactly one of the two is set."""

    invocation: Invocation | None = None  # the call was invoked (answered or not)
    refused_by: StrEnum | None = None  # a later control refused it: never invoked


class Control(Protocol):
    def before(self, ctx: CallContext) -> Refusal | None: ...

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None: ...


class CallTimeBudget:
    """A call is not started with less time left than its tool's timeout (plus the
    commit reserve): one cut short by our own deadline would be an unknown outcome."""

    def __init__(self, reserve_s: float) -> None:
        self.reserve_s = reserve_s

    def before(self, ctx: CallContext) -> Refusal | None:
        if ctx.deadline.remaining_s() - self.reserve_s >= ctx.call.spec.timeout_s:
            return None
        # Not the customer's fault nor a reason for a human: answer, stay active.
        return Refusal(RefusalReason.OUT_OF_TIME, {"mensagem": "Ferramenta não executada."},
                       ending=ending_for(Limit.DEADLINE))

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        return None


class TokenBudget:
    """No tool runs once the turn's tokens, or the conversation's model cost, are spent: the response that spent them
    may still ask for calls, and each of them is refused here (before the tool-call
    budget counts it and before the retry ceiling numbers it), so the budget stops
    what one response already asked for, not only the next model call."""

    def before(self, ctx: CallContext) -> Refusal | None:
        budget = ctx.budget
        if budget is not None and budget.tokens < budget.max_tokens and budget.cost_spent():
            return Refusal(RefusalReason.COST_BUDGET, {"mensagem": "Orçamento de custo desta conversa esgotado; "
                                                                  "ferramenta não executada."},
                           ending=ending_for(Limit.COST))
        if budget is None or budget.tokens < budget.max_tokens:
            return None
        return Refusal(RefusalReason.TOKEN_BUDGET,
                       {"limite": budget.max_tokens, "mensagem": "Orçamento de tokens deste turno esgotado; "
                                                                 "ferramenta não executada."},
                       ending=ending_for(Limit.TOKENS))

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        return None


class ToolCallBudget:
    """At most ``TurnBudget.max_tool_calls`` tool calls per turn get past this point
    (counted when let through, whether or not a later control refuses them: the
    budget bounds what the model may ask for, not what succeeds)."""

    def before(self, ctx: CallContext) -> Refusal | None:
        budget = ctx.budget
        if budget is None or budget.tool_calls < budget.max_tool_calls:
            if budget is not None:
                budget.tool_calls += 1
            return None
        return Refusal(RefusalReason.TOOL_BUDGET,
                       {"limite": budget.max_tool_calls, "mensagem": "Limite de ferramentas deste turno atingido."},
                       ending=ending_for(Limit.TOOL_CALLS))

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        return None


class Cancellation:
    """An operator's cancellation (``scripts/operador.py cancelar``) refuses every
    tool call that changes something from then on. Before the circuit breaker and
    the retry ceiling, so a cancelled call is neither a probe nor an attempt; the
    commit re-checks it atomically (``Ledger.commit_conversation``), so a tool
    answer that arrives after the command does not win either. A read-only tool
    (``ToolSpec.read_only``) is not checked: it changes nothing, and the commit
    ends the turn as cancelled whatever it read — one read per call saved."""

    def __init__(self, ledger: ConversationCancellation) -> None:
        self.ledger = ledger

    def before(self, ctx: CallContext) -> Refusal | None:
        if ctx.call.spec.read_only or not self.ledger.cancellation_pending(ctx.call.conversation_id):
            return None
        return Refusal(RefusalReason.CANCELLED,
                       {"mensagem": "Atendimento interrompido por um operador; a ferramenta não foi executada."},
                       ending=ending_for(Limit.CANCELLED))

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        return None


# A successful tool answer → what the attempt record keeps. Tool answers this
# table does not know are recorded as executed (the tool said ``ok``).
_RECORDED_AS = {
    Outcome.EXECUTED: Outcome.EXECUTED,
    Outcome.CONSULTED: Outcome.EXECUTED,
    Outcome.UPDATED: Outcome.EXECUTED,
    Outcome.BLOCKED_BY_IDEMPOTENCY: Outcome.BLOCKED_BY_IDEMPOTENCY,
    Outcome.IN_PROGRESS_ELSEWHERE: Outcome.IN_PROGRESS_ELSEWHERE,
    Outcome.OUTCOME_UNKNOWN: Outcome.OUTCOME_UNKNOWN,
    Outcome.DECLINED_BY_GATEWAY: Outcome.DECLINED_BY_GATEWAY,
}


def _recorded_outcome(invocation: Invocation) -> tuple[Outcome, str | None]:
    if not invocation.answered:
        return Outcome.TOOL_ERROR, invocation.status.value
    payload = invocation.payload or {}
    if payload.get("ok"):
        return _RECORDED_AS.get(payload.get("resultado", ""), Outcome.EXECUTED), None
    code = (payload.get("erro") or {}).get("codigo")
    # Clipped here, once: the link carries what ``Ledger.attempts`` shows as the record's ``detalhe``.
    return Outcome.REFUSED_BY_TOOL, None if code is None else str(code)[:RESULT_DETAIL_MAX]


class CeilingLedger(AttemptRecorder, AuditTrail, Protocol):
    """What the retry ceiling needs of the ledger: the attempt counter and the audit trail."""


CEILING_HANDOFF_REASON = "teto"


class RetryCeiling:
    """At most ``limit`` attempts per (conversation, subject, tool) are allowed.

    One conditional write per decision (``Ledger.register_attempt``: an atomic
    counter) — never a Query followed by a decision, which races: two concurrent
    calls could both count 3 and both proceed. With the counter, 50 racing calls
    for one key get the numbers 1..50 and exactly ``limit`` are allowed.

    Except a refusal the turn already knows: counters only grow, so a key whose
    counter has returned a number >= ``limit`` (noted in the turn's
    ``ExhaustedAttempts``, kept on the conversation item by the commit) refuses every
    later attempt. Such an attempt is refused without the counter's write (such
    a refusal is the lease, its one link and the commit), numbered last known + 1;
    its link — the same fields as any refusal's — is its record (``Ledger.attempts``
    tells it from the counter's own link by its number). Only refusals are ever decided
    this way: every allowed call is numbered by the counter.
    """

    def __init__(self, ledger: CeilingLedger, limit: int) -> None:
        self.ledger = ledger
        self.limit = limit

    def decide(self, call: ToolCall, message_id: str | None = None,
               exhausted: ExhaustedAttempts | None = None) -> Attempt:
        attempt = self._number(call, exhausted)
        if attempt.allowed:
            count_for_tool(Metric.CALLS_ALLOWED, call.spec.name)
            return attempt
        # Refused before the tool Lambda is invoked: the 5th call never gets near
        # the tool's credentials. ONE link for both facts: the refusal and the hand-off
        # it decides (``motivo``, the message); the turn's ending then writes no
        # ENCAMINHADO_PARA_HUMANO link of its own (``HandOff.audited``). Every refusal
        # is still its own link, written here, also when several calls of a round are
        # refused and only one of their hand-offs ends the turn.
        count_for_tool(Metric.CEILING_INTERRUPTIONS, call.spec.name)
        self.ledger.append_audit(
            conversation_id=call.conversation_id,
            event=CEILING_EVENT,
            details={"ferramenta": call.spec.name, "assunto": call.subject, "pedidoId": call.order_id,
                     "tentativaNumero": attempt.number, "teto": self.limit,
                     "motivo": CEILING_HANDOFF_REASON, "mensagemId": message_id},
        )
        return attempt

    def _approved(self, call: ToolCall, number: int) -> Attempt:
        return Attempt(conversation_id=call.conversation_id, subject=call.subject, order_id=call.order_id,
                       tool=call.spec.name, number=number, ceiling=self.limit,
                       idempotency_key=call.idempotency_key, recorded_at="")

    def _number(self, call: ToolCall, exhausted: ExhaustedAttempts | None) -> Attempt:
        """The attempt's number: from the turn's exhausted keys when they already
        refuse it, else from the counter (and noted when it reaches the ceiling)."""
        tool, subject = call.spec.name, call.subject
        known = None if exhausted is None else exhausted.refused_number(subject, tool, self.limit)
        if known is not None:
            return read_decided_attempt(conversation_id=call.conversation_id, subject=subject, tool=tool,
                                        number=known, ceiling=self.limit, order_id=call.order_id,
                                        idempotency_key=call.idempotency_key)
        attempt = self.ledger.register_attempt(
            conversation_id=call.conversation_id,
            subject=subject,
            tool=tool,
            ceiling=self.limit,
            order_id=call.order_id,
            idempotency_key=call.idempotency_key,
            indexed=not call.spec.read_only,  # a read-only call's record needs no finding by conversation
        )
        if exhausted is not None:
            exhausted.note(subject, tool, attempt.number, self.limit)
        return attempt

    def before(self, ctx: CallContext) -> Refusal | None:
        if ctx.approved_attempt is not None and 1 <= ctx.approved_attempt <= self.limit:
            # The approved call, counted when it asked: run under that number (its link
            # then closes that attempt), also when a crashed resume is re-run.
            ctx.notes[RetryCeiling] = self._approved(ctx.call, ctx.approved_attempt)
            return None
        attempt = self.decide(ctx.call, ctx.message_id, ctx.exhausted)
        if attempt.allowed:
            ctx.notes[RetryCeiling] = attempt
            return None
        order_id = ctx.call.order_id
        text = texts.HANDOFF_CEILING_ORDER.format(order_id=order_id) if order_id else texts.HANDOFF_CEILING_PROFILE
        return Refusal(
            RefusalReason.CEILING,
            {"tentativaNumero": attempt.number, "teto": attempt.ceiling,
             "mensagem": "Limite de tentativas atingido; um atendente humano vai revisar. Não tente novamente."},
            ending=HandOff(text, CEILING_HANDOFF_REASON, audited=True),
        )

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        # Nothing to write: the record (written by ``before``) is the decision; the
        # outcome goes once on the call's link (``DecisionAudit``). A call a later
        # control refused has no link and its attempt stays counted and ``pendente``.
        return None


_log = logger_for("orchestrator")


class DecisionAudit:
    """One audit-chain link per invoked tool call: the decision
    (``permitida``) and its outcome — the attempt record's ``resultado`` enum
    (``AttemptResult``: executed, refused by the tool, tool error, unknown...) —
    with the tool, the order and the attempt number. Never the arguments: the
    link proves what was decided and what came back, not the customer's data.

    A refused call is not linked here: the control that refused it appended its
    own link (ceiling, breaker, approval) or the turn's ending is audited with
    its limit (deadline, budgets, cancellation), so each decision is ONE link.
    The link follows the invocation and is the only record of the outcome
    (``Ledger.attempts`` joins it to the attempt record by ferramenta, assunto and
    tentativaNumero): a process killed in between leaves the attempt record
    (written before the invoke, read ``pendente``) as the write-ahead evidence,
    and the chain simply has no link for that call. A link write that fails is
    logged (ids and the outcome, never arguments) and re-raised: the turn fails
    and is retried as a new, counted attempt; the failed one stays ``pendente``.
    """

    def __init__(self, trail: AuditTrail) -> None:
        self.trail = trail

    def before(self, ctx: CallContext) -> Refusal | None:
        return None

    def after(self, ctx: CallContext, outcome: CallOutcome) -> None:
        if outcome.invocation is None:
            return
        result, detail = _recorded_outcome(outcome.invocation)
        attempt: Attempt | None = ctx.notes.get(RetryCeiling)
        details = {"ferramenta": ctx.call.spec.name, "assunto": ctx.call.subject, "pedidoId": ctx.call.order_id,
                   "decisao": "permitida", "resultado": AttemptResult(result).value, "detalhe": detail,
                   "tentativaNumero": attempt.number if attempt else None}
        try:
            self.trail.append_audit(conversation_id=ctx.call.conversation_id, event=CALL_EVENT, details=details)
        except (BotoCoreError, ClientError, ChainContention):
            # Not silent: the one record of this outcome was not written. The attempt
            # record reads ``pendente`` (outcome not evidenced), the turn fails.
            _log.exception("call outcome link not written", extra={
                "conversaId": ctx.call.conversation_id, "ferramenta": details["ferramenta"],
                "tentativaNumero": details["tentativaNumero"], "resultado": details["resultado"]})
            raise


def default_controls(ledger: Ledger, *, ceiling: int, reserve_s: float, invoker: ToolInvoker,
                     approval: ApprovalSettings, breaker_failures: int = 5,
                     breaker_cooldown_s: float = 30.0, breaker_cache_s: float = 0.0) -> list[Control]:
    """The chain, in order (see the module doc). One line per control."""
    from .approval_gate import ConfirmationGate  # it builds on this module's types
    from .breaker import CircuitBreaker  # its own module (it imports this one)
    from .feasibility import Feasibility  # likewise
    from .switches import ToolSwitches  # likewise

    return [
        DecisionAudit(ledger),
        CallTimeBudget(reserve_s),
        TokenBudget(),
        ToolCallBudget(),
        Cancellation(ledger),
        ToolSwitches(ledger),
        CircuitBreaker(ledger, failures=breaker_failures, cooldown_s=breaker_cooldown_s,
                       closed_cache_s=breaker_cache_s),
        RetryCeiling(ledger, ceiling),
        Feasibility(ledger, invoker, reserve_s=reserve_s),
        ConfirmationGate(ledger, invoker, approval, reserve_s=reserve_s),
    ]
