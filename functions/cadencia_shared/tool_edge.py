"""A tool Lambda's edge: SEAL's check first, then the strict edge of ``handler``.

``tool_handler`` wraps a tool's logic: the call's envelope is verified before the event
is even parsed (docs/seal.md) — a refusal answers ``selo_recusado`` with the numeric
code, counts ``ChamadasSeladasRecusadas{Ferramenta,Codigo}``, logs the code and the
envelope's random id only, and nothing of the tool runs; an authorized event loses its
envelope (never an argument of the tool); then the tool's kill switch is read again
(a stop that landed after the orchestrator's read answers ``ferramenta_desligada``, counted
``RecusasPorInterruptor{Ferramenta}``); then the event goes through ``handler.strict_handler``.
Apart from ``handler`` so the Lambdas that use only the strict edge (the decision, a
person's reply) reach nothing of SEAL's ledger items.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from . import seal_edge
from .handler import Model, strict_handler
from .ledger import Ledger
from .observability import TOOL_DIMENSION, Metric, count, count_for_tool
from .results import ErrorCode, ToolError, ToolResponse
from .seal import ApprovalCheck, no_approvals


def _no_approvals(_ledger: Ledger) -> ApprovalCheck:
    return no_approvals


def tool_handler(
    *, tool: str, model: type[Model], logger: Logger, approvals: seal_edge.Approvals = _no_approvals,
) -> Callable[[Callable[[Model], ToolResponse]], Callable[[Any, LambdaContext], dict[str, Any]]]:
    """``approvals``: how the edge checks an approval an envelope names (the refund's
    handler passes ``seal_approvals.ledger_approvals``; other tools name none)."""

    def invalid(problems: list[str]) -> dict[str, Any]:
        count_for_tool(Metric.TOOL_REFUSALS, tool)
        return ToolResponse.failure(
            tool, ToolError(ErrorCode.INVALID_INPUT, "Entrada inválida: " + "; ".join(problems))
        ).to_json()

    def refused(err: ToolError) -> dict[str, Any]:
        logger.info("typed refusal", extra={"codigo": err.code.value})
        count_for_tool(Metric.TOOL_REFUSALS, tool)
        return ToolResponse.failure(tool, err).to_json()

    def decorate(run: Callable[[Model], ToolResponse]) -> Callable[[Any, LambdaContext], dict[str, Any]]:
        @strict_handler(model=model, logger=logger, invalid=invalid, refusal=ToolError, refused=refused)
        def answer(request: Model, _context: LambdaContext) -> dict[str, Any]:
            response = run(request)
            logger.info("tool answered", extra={"resultado": response.resultado})
            return response.to_json()

        def sealed_edge(event: Any, context: LambdaContext) -> dict[str, Any]:
            # SEAL first: a call the turn did not sign reaches no logic. An event that is not
            # an object is answered invalid by the strict edge, with nothing read.
            if isinstance(event, dict):
                found = seal_edge.verify(tool, event, approvals)
                if found is not None:
                    logger.warning("seal refused", extra={"codigo": int(found.code), "envelope": found.envelope_id})
                    count(Metric.SEAL_REFUSALS, {TOOL_DIMENSION: tool, "Codigo": str(int(found.code))})
                    return ToolResponse.failure(tool, seal_edge.refusal_error(found)).to_json()
                event = seal_edge.without_envelope(event)
                switched_off = seal_edge.stopped(tool)
                if switched_off is not None:
                    logger.warning("tool stopped by a supervisor")
                    count_for_tool(Metric.SWITCH_REFUSALS, tool)
                    return ToolResponse.failure(tool, switched_off).to_json()
            return answer(event, context)

        return sealed_edge

    return decorate
