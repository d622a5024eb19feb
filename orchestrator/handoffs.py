"""Hand-offs that reach a person: every hand-off and every approval
request is published on the stack's own EventBridge bus, so a company's helpdesk
can subscribe; the stack's default rule delivers them to an SQS queue.

Published only after the conversation's new state is committed (what the event
says has happened), from the one place each kind is decided: the loop's commit
(``Orchestrator.handle``) and the resume. The detail is typed and carries no
secret and no personal data: the conversation id is masked (it may be a phone
number); an approval's id, tool, order and amount are not personal.

A failed publish does not undo the turn: the ledger keeps the state (a person can
list conversations waiting there), the failure is logged and counted
(``ErrosDePublicacao``), never raised into the customer's turn.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Protocol

from aws_lambda_powertools import Logger
from pydantic import BaseModel, ConfigDict

from cadencia_shared.catalog import HANDOFF_EVENT_SOURCE
from cadencia_shared.masking import mask_identifier
from cadencia_shared.observability import count

SOURCE = HANDOFF_EVENT_SOURCE
PUBLISH_ERRORS = "ErrosDePublicacao"


class _Detail(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    conversaId: str  # masked
    motivo: str


class HandOffDetail(_Detail):
    tipo: Literal["ConversaEncaminhada"] = "ConversaEncaminhada"
    mensagemId: str | None = None


class ApprovalRequestedDetail(_Detail):
    tipo: Literal["AprovacaoSolicitada"] = "AprovacaoSolicitada"
    aprovacaoId: str
    ferramenta: str
    pedidoId: str | None
    valor: str
    expiraEmMs: int


Detail = HandOffDetail | ApprovalRequestedDetail


def hand_off(conversation_id: str, reason: str, message_id: str | None = None) -> HandOffDetail:
    return HandOffDetail(conversaId=mask_identifier(conversation_id), motivo=reason, mensagemId=message_id)


def approval_requested(conversation_id: str, details: dict[str, Any]) -> ApprovalRequestedDetail:
    return ApprovalRequestedDetail(conversaId=mask_identifier(conversation_id), **details)


class Publisher(Protocol):
    def publish(self, detail: Detail) -> None: ...


class NoPublisher:
    """No bus configured (unit tests that do not look at events)."""

    def publish(self, detail: Detail) -> None:
        return None


def publisher_for(settings: Any) -> Publisher:
    """The stack's bus when ``EVENT_BUS_NAME`` is set (the CDK stack and the local stack set it)."""
    if not settings.event_bus:
        return NoPublisher()
    from cadencia_shared.aws import client

    return EventBridgePublisher(client("events", settings.aws), settings.event_bus)


class EventBridgePublisher:
    def __init__(self, client: Any, bus_name: str, logger: Logger | None = None) -> None:
        self.client = client
        self.bus_name = bus_name
        self.log = logger or Logger(service="orchestrator")

    def publish(self, detail: Detail) -> None:
        entry = {"Source": SOURCE, "DetailType": detail.tipo, "EventBusName": self.bus_name,
                 "Detail": json.dumps(detail.model_dump(mode="json"), ensure_ascii=False)}
        try:
            failed = self.client.put_events(Entries=[entry]).get("FailedEntryCount", 0)
        except Exception as err:  # noqa: BLE001 - a notification never fails the committed turn
            failed, reason = 1, type(err).__name__
        else:
            reason = "FailedEntryCount"
        if failed:
            count(PUBLISH_ERRORS, {"Tipo": detail.tipo})
            self.log.warning("hand-off event not published", extra={"tipo": detail.tipo, "erro": reason})
