"""The decision function behind the HTTP API (payload 2.0, a JWT authorizer in front).

    GET  /aprovacoes                          pending requests (masked)      group aprovadores
    GET  /aprovacoes/{aprovacaoId}            one request (masked)           group aprovadores
    POST /aprovacoes/{aprovacaoId}/decisao    {decisao, justificativa, valorAprovado?}
    GET  /interruptores, POST /interruptores/{ferramenta}                  group supervisores
                                              (the tool kill switches: ``switches_api``)
    /console/...                              the operators' pages (``console``)

Who decides is the authorizer's verified claims (``cadencia_shared.identity``); a body
naming an actor is refused before anything is read. The decision itself is
``cadencia_shared.approval_policy``'s; every decision's audit names the person
(subject and display name) and ``via = api``. Answers: 200, or a typed error with
400 (input), 401 (no verified person), 403 (not in the group), 404, 409 (refused).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from pydantic import ValidationError

from cadencia_shared import approval_policy, sign_outs
from cadencia_shared.approvals import ApprovalStore
from cadencia_shared.handler import describe
from cadencia_shared.identity import APPROVERS, IdentityRefused, Person, json_body, person_from_event
from cadencia_shared.ledger import Ledger
from cadencia_shared.models import APPROVAL_ID_PATTERN

from . import actions, console, switches_api
from .actions import ApiDecision
from .logic import masked

Resume = Callable[[str], None]
STATUS = {"aprovacao_inexistente": 404, "grupo_nao_autorizado": 403, "valor_invalido": 400}


class ApiError(Exception):
    def __init__(self, status: int, code: str, details: list[str] | None = None) -> None:
        super().__init__(code)
        self.status, self.code, self.details = status, code, details


def error(status: int, code: str, details: list[str] | None = None) -> Response[dict[str, Any]]:
    body: dict[str, Any] = {"ok": False, "erro": {"codigo": code, **({"detalhes": details} if details else {})}}
    return Response(status_code=status, content_type="application/json", body=body)


def build(ledger: Ledger, *, resume: Resume, policy: approval_policy.PolicySettings) -> APIGatewayHttpResolver:
    """The router, wired to this invocation's ledger and resume port."""
    app = APIGatewayHttpResolver()

    def person() -> Person:
        who = person_from_event(app.current_event.raw_event)
        sign_outs.refuse_signed_out(ledger, sign_outs.bearer_token(app.current_event.raw_event))
        who.require(APPROVERS)
        return who

    def approval_id(value: str) -> str:
        if not re.fullmatch(APPROVAL_ID_PATTERN, value):
            raise ApiError(400, "entrada_invalida", ["aprovacaoId: fora do padrão"])
        return value

    @app.exception_handler(IdentityRefused)  # type: ignore[untyped-decorator]  # Powertools leaves exception_handler untyped
    def _identity(err: IdentityRefused) -> Response[dict[str, Any]]:
        return error(err.status, err.code)

    @app.exception_handler(ApiError)  # type: ignore[untyped-decorator]  # Powertools leaves exception_handler untyped
    def _api(err: ApiError) -> Response[dict[str, Any]]:
        return error(err.status, err.code, err.details)

    @app.get("/aprovacoes")
    def listing() -> dict[str, Any]:
        person()
        now = ledger.now_ms()
        return {"ok": True, "pendentes": [masked(r, now) for r in ApprovalStore(ledger).pending()]}

    @app.get("/aprovacoes/<approval>")
    def one(approval: str) -> Any:
        person()
        record = ApprovalStore(ledger).get(approval_id(approval))
        if record is None:
            return error(404, "aprovacao_inexistente")
        return {"ok": True, "aprovacao": masked(record, ledger.now_ms())}

    @app.post("/aprovacoes/<approval_path>/decisao")
    def decision(approval_path: str) -> Any:
        who = person()
        approval = approval_id(approval_path)
        request = _decision_body(app.current_event.raw_event)
        try:
            decided = actions.decide(ledger, approval, who=who, approve=request.decisao == "aprovar",
                                     justification=request.justificativa, amount_text=request.valorAprovado,
                                     policy=policy, resume=resume)
        except actions.Refused as refused:
            return error(STATUS.get(refused.code, 409), refused.code)
        record = decided.record
        return {"ok": True, "resultado": decided.outcome, "aprovacao": masked(record, ledger.now_ms()),
                **({"substituiu": decided.replaced} if decided.replaced else {})}

    switches_api.register(app, ledger, ApiError)
    console.register(app, ledger, resume=resume, policy=policy)
    return app


def _decision_body(event: dict[str, Any]) -> ApiDecision:
    try:
        body = json_body(event)
    except ValueError as err:
        raise ApiError(400, str(err)) from None
    try:
        return ApiDecision.model_validate(body, strict=True)
    except ValidationError as err:
        raise ApiError(400, "entrada_invalida", describe(err)) from None
