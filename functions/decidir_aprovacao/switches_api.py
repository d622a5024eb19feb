"""The tool kill switches on the operators' HTTP API (group ``supervisores``).

    GET  /interruptores                 every tool's switch (state, who, why, when)
    POST /interruptores/{ferramenta}    {"estado": "desligada"|"ligada", "motivo": "..."}

Served by the approval decision function: its role already reads and writes the
ledger and appends to the audit chain, so no new function, role or grant. Who acts is
the authorizer's verified claims (``cadencia_shared.identity``), checked before the body
is read; a body is strict (extra fields, an actor, a non-text reason: 400, nothing
changed); an unknown tool is 404 ``ferramenta_inexistente``, nothing changed. Every
change replaces ``interruptor#{tool}`` (``cadencia_shared.ledger.switches``) and then
appends ``INTERRUPTOR_ALTERADO`` to the audit chain (no conversation: the chain of
events outside one) with the tool, the state before and after, the reason, the time and
the person. Answers 200, or a typed error 400/401/403/404.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from pydantic import BaseModel, ValidationError

from cadencia_shared import sign_outs
from cadencia_shared.catalog import TOOLS
from cadencia_shared.handler import describe
from cadencia_shared.identity import SUPERVISORS, Person, json_body, person_from_event
from cadencia_shared.ledger import Ledger
from cadencia_shared.models import EDGE_CONFIG, Justification

from . import actions
from .actions import SWITCH_CHANGED_EVENT as SWITCH_CHANGED_EVENT


class SwitchChange(BaseModel):
    model_config = EDGE_CONFIG

    estado: Literal["desligada", "ligada"]
    motivo: Justification


def register(app: APIGatewayHttpResolver, ledger: Ledger, api_error: Callable[..., Exception]) -> None:
    """Add the switch routes to the decision function's router (its error handlers apply)."""

    def supervisor() -> Person:
        who = person_from_event(app.current_event.raw_event)
        sign_outs.refuse_signed_out(ledger, sign_outs.bearer_token(app.current_event.raw_event))
        who.require(SUPERVISORS)
        return who

    @app.get("/interruptores")
    def listing() -> dict[str, Any]:
        supervisor()
        return {"ok": True, "interruptores": [ledger.tool_switch(name).public() for name in sorted(TOOLS)]}

    @app.post("/interruptores/<tool>")
    def change(tool: str) -> dict[str, Any]:
        who = supervisor()
        if tool not in TOOLS:
            raise api_error(404, "ferramenta_inexistente")
        try:
            body = json_body(app.current_event.raw_event)
        except ValueError as err:
            raise api_error(400, str(err)) from None
        try:
            request = SwitchChange.model_validate(body, strict=True)
        except ValidationError as err:
            raise api_error(400, "entrada_invalida", describe(err)) from None
        before, after = actions.switch(ledger, tool, who=who, state=request.estado, reason=request.motivo)
        return {"ok": True, "interruptor": after.public(), "estadoAnterior": before.state.value}
