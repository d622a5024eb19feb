"""The thin-handler kit: parse the event at the edge, run the logic, answer JSON.

Each tool's ``handler.py`` is a few lines around ``tool_edge.tool_handler`` (this edge
behind SEAL's check): a strict pydantic model for the event, a function from that model
to a ``ToolResponse``. Lambdas
that answer in another shape (a person's reply, ``orchestrator/human_reply_handler.py``)
use the same edge, ``strict_handler``, with their own answers.
An invalid event (not a JSON object, or failing the model) becomes a typed
``entrada_invalida`` answer, small whatever the event's size, and nothing changes;
``ToolError`` becomes a typed refusal; anything else propagates as a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)
Refusal = TypeVar("Refusal", bound=Exception)

# A hostile 5 MB event must produce a small answer (Lambda's response limit is
# 6 MB) and a small log line: a few problems, each cut short, never the input.
MAX_PROBLEMS = 5
MAX_PROBLEM_CHARS = 160


class InvalidEvent(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _clip(text: str, limit: int) -> str:
    # Field names come from the caller (an unknown key is reported by name): only
    # printable characters of it reach the answer and the log.
    text = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return text if len(text) < limit else text[: limit - 1] + "…"


def describe(err: ValidationError) -> list[str]:
    """At most ``MAX_PROBLEMS`` short lines: where (each path part clipped, since a
    hostile key can be megabytes long) and what; never the offending value."""
    found = err.errors(include_url=False, include_input=False, include_context=False)
    problems = []
    for e in found[:MAX_PROBLEMS]:
        where = ".".join(_clip(str(p), 40) for p in e["loc"]) or "(evento)"
        problems.append(_clip(f"{where}: {e['msg']}", MAX_PROBLEM_CHARS))
    if len(found) > MAX_PROBLEMS:
        problems.append(f"… e mais {len(found) - MAX_PROBLEMS} problema(s)")
    return problems


def parse_event(event: Any, model: type[Model]) -> Model:
    """The event as ``model``, or ``InvalidEvent``.

    Only a JSON object is an event. Powertools' ``parse`` would also decode a string
    holding JSON, which no caller of these functions sends: a string, a list or
    null is refused here, before the model sees it.
    """
    if not isinstance(event, dict):
        raise InvalidEvent([f"(evento): deve ser um objeto JSON, recebido {type(event).__name__}"])
    try:
        return model.model_validate(event, strict=True)
    except ValidationError as err:
        raise InvalidEvent(describe(err)) from None


def strict_handler(
    *, model: type[Model], logger: Logger, invalid: Callable[[list[str]], dict[str, Any]],
    refusal: type[Refusal], refused: Callable[[Refusal], dict[str, Any]],
) -> Callable[[Callable[[Model, LambdaContext], dict[str, Any]]], Callable[[Any, LambdaContext], dict[str, Any]]]:
    """The edge every Lambda of this kit shares: the event parsed strictly into
    ``model`` (``invalid(problems)`` answers an invalid one, and nothing runs), the
    logic run with it, and its ``refusal`` exception answered by ``refused``.

    The answers' shapes belong to each caller (a tool's ``ToolResponse``, a person's
    reply's ``{"ok": false, "erro": …}``); the order and the guarantees are here once.
    Anything else the logic raises propagates: a crash, never a made-up answer."""

    def decorate(
        run: Callable[[Model, LambdaContext], dict[str, Any]],
    ) -> Callable[[Any, LambdaContext], dict[str, Any]]:
        @logger.inject_lambda_context(clear_state=True)
        def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
            try:
                request = parse_event(event, model)
            except InvalidEvent as err:
                logger.info("invalid input", extra={"erros": err.problems})
                return invalid(err.problems)
            logger.append_keys(conversaId=getattr(request, "conversaId", None))
            try:
                return run(request, context)
            except refusal as err:
                return refused(err)

        return lambda_handler

    return decorate
