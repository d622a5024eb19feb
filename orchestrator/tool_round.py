"""One tool round: every ``tool_use`` block of a response, through the controls, to
its tool Lambda, and back as ``tool_result`` blocks in the same order.

Per block: a repeated id is answered ``is_error`` and never executed (not counted
by any control: no call was attempted; the round budget still bounds a model that
keeps repeating) ─► unknown tool / invalid arguments: ``is_error`` ─► the controls'
before-steps in order (any may refuse) ─► invoke ─► the after-steps in reverse.

A refusal may end the turn (``Refusal.ending``): the round still answers every
block, then the first hand-off wins over any other ending (then a wait for approval),
so the customer hears about the first call a human must look at.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cadencia_shared.catalog import TOOLS
from cadencia_shared.ledger.exhausted import ExhaustedAttempts
from cadencia_shared.observability import Metric, count, count_for_tool

from . import history
from .budgets import TurnBudget
from .controls import CallContext, CallOutcome, Control, Refusal
from .events import TurnRequest
from .invokers import Invocation, InvocationStatus, ToolInvoker
from .model import Deadline
from .steps import AwaitApproval, Ending, HandOff
from .tools import ToolCall, validation_errors
from .tracing import Tracer, conversation_ref


@dataclass
class RoundResult:
    results: list[dict[str, Any]] = field(default_factory=list)
    endings: list[Ending] = field(default_factory=list)

    @property
    def ending(self) -> Ending | None:
        handoffs = [e for e in self.endings if isinstance(e, HandOff)]
        waits = [e for e in self.endings if isinstance(e, AwaitApproval)]
        return (handoffs or waits or self.endings or [None])[0]


class ToolRound:
    def __init__(self, invoker: ToolInvoker, controls: Sequence[Control], tracer: Tracer | None = None) -> None:
        self.invoker = invoker
        self.controls = list(controls)
        self.tracer = tracer or Tracer()

    def run(self, req: TurnRequest, blocks: list[Any], deadline: Deadline, seen: set[str],
            budget: TurnBudget | None = None, exhausted: ExhaustedAttempts | None = None,
            approved_attempt: int | None = None) -> RoundResult:
        """``budget`` and ``exhausted`` are the turn's (None: a round run on its own);
        ``approved_attempt``: the round resumes one approved call, counted under that number."""
        done = RoundResult()
        seen = set(seen)
        for block in blocks:
            if block.type != "tool_use":
                continue
            if block.id in seen:
                count(Metric.MODEL_ERRORS, {"Classe": "tool_use_id_repetido"})
                done.results.append(_error(block.id, {
                    "erro": "id_repetido",
                    "mensagem": "Este id de chamada já foi usado nesta conversa; a chamada não foi executada.",
                }))
                continue
            seen.add(block.id)
            with self.tracer.span("execute_tool", {"gen_ai.operation.name": "execute_tool",
                                                   "gen_ai.tool.name": block.name if block.name in TOOLS
                                                   else "desconhecida",
                                                   # model-written text: hashed like the conversation's id
                                                   "gen_ai.tool.call.id": conversation_ref(str(block.id))}) as span:
                result, refusal = self._run_one(req, block, deadline, budget, exhausted, approved_attempt)
                span.put({"cadencia.recusa": "" if refusal is None else str(refusal.reason),
                          "cadencia.erro": bool(result.get("is_error"))})
            done.results.append(result)
            if refusal is not None and refusal.ending is not None:
                done.endings.append(refusal.ending)
        return done

    def _run_one(self, req: TurnRequest, block: Any, deadline: Deadline, budget: TurnBudget | None,
                 exhausted: ExhaustedAttempts | None,
                 approved_attempt: int | None = None) -> tuple[dict[str, Any], Refusal | None]:
        spec = TOOLS.get(block.name)
        if spec is None:
            return _error(block.id, {"erro": "ferramenta_desconhecida", "ferramenta": block.name}), None
        errors = validation_errors(spec.name, block.input)
        if errors:
            count_for_tool(Metric.TOOL_REFUSALS, spec.name)
            return _error(block.id, {"erro": "entrada_invalida", "detalhes": errors}), None
        call = ToolCall(spec=spec, tool_use_id=block.id, arguments=dict(block.input),
                        conversation_id=req.conversaId, customer_id=req.clienteId)
        ctx = CallContext(call, deadline, budget, req.mensagemId, exhausted=exhausted,
                          approved_attempt=approved_attempt)
        passed: list[Control] = []
        for control in self.controls:
            with self.tracer.span("control", {"cadencia.controle": type(control).__name__}) as span:
                refusal = control.before(ctx)
                span.put({"cadencia.decisao": "permitida" if refusal is None else str(refusal.reason)})
            if refusal is not None:
                _unwind(passed, ctx, CallOutcome(refused_by=refusal.reason))
                return history.tool_result(block.id, refusal.body(), is_error=True), refusal
            passed.append(control)
        with self.tracer.span("invoke", {"cadencia.ferramenta": spec.name}) as span:
            invocation = self.invoker.invoke(spec, call.event())
            span.put({"cadencia.invocacao": invocation.status.value})
        if not invocation.answered:
            count_for_tool(Metric.TOOL_ERRORS, spec.name)
        _unwind(passed, ctx, CallOutcome(invocation=invocation))
        return _tool_result(block.id, invocation), None


def _unwind(passed: list[Control], ctx: CallContext, outcome: CallOutcome) -> None:
    for control in reversed(passed):
        control.after(ctx, outcome)


def _tool_result(tool_use_id: str, invocation: Invocation) -> dict[str, Any]:
    if not invocation.answered:
        hint = " O resultado será conferido antes de qualquer nova tentativa." \
            if invocation.status is InvocationStatus.TIMEOUT else ""
        return _error(tool_use_id, {"erro": invocation.status.value,
                                    "mensagem": "A ferramenta falhou; nada foi confirmado." + hint})
    payload = invocation.payload or {}
    return history.tool_result(tool_use_id, _json(payload), is_error=not payload.get("ok"))


def _error(tool_use_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return history.tool_result(tool_use_id, _json(body), is_error=True)


def _json(value: Any) -> str:
    # Compact: the model re-reads every kept result on each call (docs/model-cost.md).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
