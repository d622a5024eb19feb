"""A person's reply through the HTTP API (payload 2.0, a JWT authorizer in front).

    POST /conversas/{conversaId}/respostas   {texto}   group atendentes

Who replies is the authorizer's verified claims (``cadencia_shared.identity``); a body
naming an actor is refused before anything is read. The reply's audit record names
the person (subject and display name) and ``via = api``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from cadencia_shared import sign_outs
from cadencia_shared.handler import describe
from cadencia_shared.identity import ATTENDANTS, IdentityRefused, json_body, person_from_event
from cadencia_shared.models import EDGE_CONFIG, CustomerMessage

from .human_reply import HumanReplies, HumanReplyRefused, HumanReplyRequest

REFUSAL_STATUS = {"conversa_inexistente": 404}


class ApiReply(BaseModel):
    model_config = EDGE_CONFIG

    texto: CustomerMessage


def _error(status: int, code: str, details: list[str] | None = None,
           message: str | None = None) -> Response[dict[str, Any]]:
    detail: dict[str, Any] = {"codigo": code, **({"detalhes": details} if details else {}),
                            **({"mensagem": message} if message else {})}
    return Response(status_code=status, content_type="application/json", body={"ok": False, "erro": detail})


def handle(event: dict[str, Any], context: LambdaContext, replies: Callable[[], HumanReplies],
           logger: Logger) -> dict[str, Any]:
    app = APIGatewayHttpResolver()

    @app.exception_handler(IdentityRefused)  # type: ignore[untyped-decorator]  # Powertools leaves exception_handler untyped
    def _identity(err: IdentityRefused) -> Response[dict[str, Any]]:
        return _error(err.status, err.code)

    @app.post("/conversas/<conversation>/respostas")
    def reply(conversation: str) -> Any:
        person = person_from_event(app.current_event.raw_event)
        sign_outs.refuse_signed_out(replies().ledger, sign_outs.bearer_token(app.current_event.raw_event))
        person.require(ATTENDANTS)
        try:
            body = json_body(app.current_event.raw_event)
        except ValueError as err:
            return _error(400, str(err))
        try:
            text = ApiReply.model_validate(body, strict=True).texto
            request = HumanReplyRequest.model_validate({"conversaId": conversation, "texto": text}, strict=True)
        except ValidationError as err:
            return _error(400, "entrada_invalida", describe(err))
        try:
            outcome = replies().reply(request, time_left_s=lambda: context.get_remaining_time_in_millis() / 1000,
                                      author=person.audit())
        except HumanReplyRefused as refused:
            logger.info("reply refused", extra={"codigo": refused.code})
            return _error(REFUSAL_STATUS.get(refused.code, 409), refused.code, message=refused.message)
        logger.info("reply handled", extra={"respostaId": outcome.reply_id, "envio": outcome.delivery,
                                            "repetida": outcome.repeated})
        return outcome.as_answer()

    return app.resolve(event, context)
