"""The thin-handler kit: parse the event at the edge, run the logic, answer JSON.

Each tool's ``handler.py`` is a few lines around ``tool_handler``: a Powertools
Parser model for the event, a function from that model to a ``ToolResponse``.
Validation errors become a typed ``entrada_invalida`` answer (nothing changed);
``ToolError`` becomes a typed refusal; anything else propagates as a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from .observability import Metric, count_for_tool
from .results import ErrorCode, ToolError, ToolResponse

Model = TypeVar("Model", bound=BaseModel)


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in e["loc"]) or "(evento)"
        parts.append(f"{where}: {e['msg']}")
    return "; ".join(parts)


def tool_handler(
    *, ferramenta: str, model: type[Model], logger: Logger
) -> Callable[[Callable[[Model], ToolResponse]], Callable[[dict[str, Any], LambdaContext], dict[str, Any]]]:
    def decorate(run: Callable[[Model], ToolResponse]) -> Callable[[dict[str, Any], LambdaContext], dict[str, Any]]:
        @logger.inject_lambda_context(clear_state=True)
        def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
            try:
                request = parse(event=event, model=model)
            except ValidationError as err:
                logger.info("invalid input", extra={"erros": _describe(err)})
                count_for_tool(Metric.TOOL_REFUSALS, ferramenta)
                return ToolResponse.failure(
                    ferramenta, ToolError(ErrorCode.INVALID_INPUT, f"Entrada inválida: {_describe(err)}")
                ).to_json()
            logger.append_keys(conversaId=getattr(request, "conversaId", None))
            try:
                response = run(request)
            except ToolError as err:
                logger.info("typed refusal", extra={"codigo": err.codigo.value})
                count_for_tool(Metric.TOOL_REFUSALS, ferramenta)
                return ToolResponse.failure(ferramenta, err).to_json()
            logger.info("tool answered", extra={"resultado": response.resultado})
            return response.to_json()

        return lambda_handler

    return decorate
