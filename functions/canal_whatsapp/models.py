"""Typed models of what crosses the channel's edges.

- The Cloud API webhook (``object=whatsapp_business_account``): only the parts
  this channel reads. Unknown *fields* are ignored (Meta adds fields over time and
  the payload is already authenticated by its signature); every field that is read
  is strict (no coercion) and every pattern anchored. The envelope is validated as a
  whole; each message on its own (``WebhookMessage``, by the ingress), so one message
  that fails the model never drops the others of its notification.
- ``QueuedMessage``: the body of one SQS FIFO message from the ingress to the
  orchestrator. It is our own contract, so it forbids anything extra. On the queue
  it travels signed (``canal_whatsapp.assertion``: ``emitidoEm`` and ``assercao``
  added), and the consumer reads it only from a verified body.
- ``FunctionUrlEvent`` and ``SqsEvent``: the Lambda events of the two functions,
  validated with ``cadencia_shared.handler.parse_event`` (only a JSON object is an
  event; strict types) before anything else runs. AWS adds fields to its events,
  so unknown fields are ignored; the ones read are typed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, model_validator

from cadencia_shared.models import ConversationId, CustomerId, CustomerMessage

from .conversation import MAX_MESSAGE_TIMESTAMP

# Python's engine, so the anchors are \A…\Z (pydantic's default engine has no \Z).
_EDGE = ConfigDict(strict=True, frozen=True, extra="ignore", regex_engine="python-re")
_OURS = ConfigDict(strict=True, frozen=True, extra="forbid", regex_engine="python-re")

# WhatsApp ids: wa_id is the phone number in digits; wamid is "wamid." + base64.
WaId = Annotated[str, StringConstraints(pattern=r"\A[0-9]{6,20}\Z")]
WaMessageId = Annotated[str, StringConstraints(pattern=r"\A[A-Za-z0-9._:=+/\-]{1,256}\Z")]
PhoneNumberId = Annotated[str, StringConstraints(pattern=r"\A[0-9]{1,32}\Z")]


def _dated(seconds: str) -> str:
    if int(seconds) > MAX_MESSAGE_TIMESTAMP:
        raise ValueError("timestamp past the last datable second")
    return seconds


UnixSeconds = Annotated[str, StringConstraints(pattern=r"\A[0-9]{1,12}\Z"), AfterValidator(_dated)]
MAX_TURN_TEXT = 4000  # what the orchestrator accepts in one turn (cadencia_shared.models.CustomerMessage)


class TextBody(BaseModel):
    model_config = _EDGE
    # No upper bound here: 4096 is what the Cloud API lets us *send*, not what a customer
    # may write; the body cap bounds it, and a text over MAX_TURN_TEXT is answered
    # ``mensagem_longa_demais`` by the ingress.
    body: Annotated[str, StringConstraints(min_length=1)]


class WebhookMessage(BaseModel):
    model_config = _EDGE
    from_: WaId = Field(alias="from")
    id: WaMessageId
    timestamp: UnixSeconds
    type: Annotated[str, StringConstraints(pattern=r"\A[a-z_]{1,32}\Z")]
    text: TextBody | None = None  # present when type == "text"


class MessageAddress(BaseModel):
    """What a message that fails ``WebhookMessage`` still needs to be answered: who
    sent it and its id (the reply's key and quote). Without both it is skipped."""

    model_config = _EDGE
    from_: WaId = Field(alias="from")
    id: WaMessageId


class Metadata(BaseModel):
    model_config = _EDGE
    phone_number_id: PhoneNumberId


class ChangeValue(BaseModel):
    model_config = _EDGE
    messaging_product: Literal["whatsapp"]
    metadata: Metadata
    # Each message is read on its own (``WebhookMessage``): only the list is the envelope's.
    messages: Annotated[list[Any], Field(max_length=100)] = []
    # Delivery/read receipts: counted, not stored (see docs/whatsapp.md).
    statuses: Annotated[list[dict[str, object]], Field(max_length=1000)] = []


class Change(BaseModel):
    model_config = _EDGE
    field: str
    value: ChangeValue


class Entry(BaseModel):
    model_config = _EDGE
    id: Annotated[str, StringConstraints(pattern=r"\A[0-9]{1,32}\Z")]
    changes: Annotated[list[Change], Field(max_length=100)]


class WebhookPayload(BaseModel):
    model_config = _EDGE
    object: Literal["whatsapp_business_account"]
    entry: Annotated[list[Entry], Field(min_length=1, max_length=100)]


class QueuedKind(StrEnum):
    TEXT = "texto"  # a known customer's text: goes to the model
    FIXED_REPLY = "resposta_fixa"  # answered by code with a fixed text; never reaches the model


class FixedReason(StrEnum):
    UNKNOWN_NUMBER = "numero_desconhecido"
    UNSUPPORTED_TYPE = "tipo_nao_suportado"
    TOO_LONG = "mensagem_longa_demais"
    # Control, bidi or invisible characters the orchestrator's edge refuses
    # (cadencia_shared.models.CustomerMessage): answered here, never queued as a turn.
    INVALID_TEXT = "mensagem_invalida"
    # A message that fails the Cloud API model (``WebhookMessage``) but whose sender and
    # id are readable: answered, so the customer is not left without a word.
    MALFORMED = "mensagem_malformada"


class QueuedMessage(BaseModel):
    """One inbound message, bound to its customer by the ingress."""

    model_config = _OURS

    tipo: QueuedKind
    mensagemId: WaMessageId  # the customer's wamid (dedupe key and reply context)
    waId: WaId  # where the reply goes (personal data: never logged)
    phoneNumberId: PhoneNumberId  # the business number that received it
    # The orchestrator's own edge types (cadencia_shared.models, as in TurnRequest): a
    # queued text is one the turn accepts, so it can never fail there on its content.
    conversaId: ConversationId | None = None
    clienteId: CustomerId | None = None
    mensagem: CustomerMessage | None = None
    motivo: FixedReason | None = None

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> QueuedMessage:
        turn_fields = (self.conversaId, self.clienteId, self.mensagem)
        if self.tipo is QueuedKind.TEXT and (None in turn_fields or self.motivo is not None):
            raise ValueError("a text message carries conversaId, clienteId and mensagem, and no motivo")
        if self.tipo is QueuedKind.FIXED_REPLY and (self.motivo is None or self.mensagem is not None
                                                     or self.clienteId is not None):
            raise ValueError("a fixed reply carries a motivo and neither the text nor a customer")
        return self


@dataclass(frozen=True)
class QueueItem:
    """One message for the FIFO queue with its ordering group and deduplication id;
    ``body`` is what is enqueued: the message signed by the ingress (``assertion``)."""

    message: QueuedMessage
    group_id: str
    deduplication_id: str
    body: str


# -- the Lambda events (validated by cadencia_shared.handler.parse_event) ----------
class FunctionUrlHttp(BaseModel):
    model_config = _EDGE
    method: Annotated[str, StringConstraints(pattern=r"\A[A-Za-z]{1,16}\Z")]


class FunctionUrlContext(BaseModel):
    model_config = _EDGE
    http: FunctionUrlHttp


class FunctionUrlEvent(BaseModel):
    """What a Lambda Function URL passes to the webhook (payload format 2.0)."""

    model_config = _EDGE

    requestContext: FunctionUrlContext
    headers: dict[str, str] | None = None
    queryStringParameters: dict[str, str] | None = None
    body: str | None = None
    isBase64Encoded: bool = False


class SqsRecord(BaseModel):
    model_config = _EDGE
    messageId: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    body: str
    eventSource: Literal["aws:sqs"]


class SqsEvent(BaseModel):
    """What the event source mapping passes to the consumer (batch size 1; a larger
    batch stays valid, see orchestrator/whatsapp_consumer.py)."""

    model_config = _EDGE

    Records: Annotated[list[SqsRecord], Field(min_length=1, max_length=10)]
