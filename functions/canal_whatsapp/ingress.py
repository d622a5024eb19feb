"""The webhook's logic (no AWS calls here: adapters are passed in).

    GET  ─► verify handshake (hub.mode, hub.verify_token) ─► echo hub.challenge
    POST ─► size cap ─► X-Hub-Signature-256 over the raw body ─► typed payload
         ─► per message: bind wa_id to a customer (ERP) ─► signed (assertion) ─► SQS FIFO
              text of a known customer     → the orchestrator (a turn)
              unknown number / not text    → a fixed reply (never the model)
              reaction                     → ignored (counted)
         ─► statuses: counted, not stored

Anything rejected answers 401/400, enqueues nothing and counts a metric: the size,
the signature and the envelope. Past the envelope each message is read on its own
(``WebhookMessage``): one that fails the model never drops the others — it is
answered with a fixed reply when its sender and id are readable (``MessageAddress``)
and skipped otherwise, counted and logged by field name only. An adapter failure
raises (the Function URL answers 502), so the Cloud API delivers the webhook again;
what was already enqueued is absorbed by the dedupe (SQS FIFO + the ledger). Junk in
a signed body is never a 5xx: Meta retries those for days.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import TypeAdapter, ValidationError

from cadencia_shared.models import CustomerMessage
from cadencia_shared.observability import count, logger_for

from . import assertion, signature
from .conversation import conversation_id
from .models import (
    MAX_TURN_TEXT,
    FixedReason,
    MessageAddress,
    QueuedKind,
    QueuedMessage,
    QueueItem,
    WebhookMessage,
    WebhookPayload,
)

DEFAULT_MAX_BODY_BYTES = 128 * 1024
_CHALLENGE = re.compile(r"\A[A-Za-z0-9_\-]{1,128}\Z")
logger = logger_for("canal_whatsapp")


class ChannelMetric:
    REJECTED = "WebhooksRejeitados"  # {Motivo}
    RECEIVED = "MensagensWhatsappRecebidas"  # {Tipo}
    STATUSES = "StatusesWhatsappIgnorados"
    MALFORMED = "MensagensWhatsappMalformadas"  # {Destino}: respondida | descartada


@dataclass(frozen=True)
class Malformed:
    """A message that fails ``WebhookMessage``: its address when readable (then it is
    answered), and the names of the fields that failed (never their values)."""

    address: MessageAddress | None
    fields: tuple[str, ...]


def read_message(raw: object) -> WebhookMessage | Malformed:
    try:
        return WebhookMessage.model_validate(raw)
    except ValidationError as err:
        fields = sorted({str(e["loc"][0]) if e["loc"] else "" for e in err.errors(include_input=False)})
    try:
        address: MessageAddress | None = MessageAddress.model_validate(raw)
    except ValidationError:
        address = None
    return Malformed(address, tuple(fields))


@dataclass(frozen=True)
class HttpRequest:
    method: str
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    query: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: str = ""


class CustomerDirectory(Protocol):
    def customers_of(self, wa_ids: Collection[str]) -> dict[str, int]: ...


class InboundQueue(Protocol):
    def send_all(self, items: Sequence[QueueItem]) -> None: ...


class ChannelSecrets(Protocol):
    def app_secret(self) -> str: ...

    def verify_token(self) -> str: ...

    def queue_key(self) -> str: ...


class Ingress:
    def __init__(self, *, directory: CustomerDirectory, queue: InboundQueue, secrets: ChannelSecrets,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, clock: Callable[[], float] = time.time) -> None:
        self.directory = directory
        self.queue = queue
        self.secrets = secrets
        self.max_body_bytes = max_body_bytes
        self.clock = clock

    def handle(self, request: HttpRequest) -> HttpResponse:
        if request.method == "GET":
            return self._handshake(request.query)
        if request.method == "POST":
            return self._notification(request)
        return reject(405, "metodo")

    # -- GET: the subscription handshake ------------------------------------------
    def _handshake(self, query: dict[str, str]) -> HttpResponse:
        token, challenge = query.get("hub.verify_token", ""), query.get("hub.challenge", "")
        expected = self.secrets.verify_token()
        if (query.get("hub.mode") != "subscribe" or not expected
                or not hmac.compare_digest(token.encode(), expected.encode())):
            return reject(403, "verificacao")
        if not _CHALLENGE.match(challenge):  # echoed back: never reflect arbitrary content
            return reject(400, "verificacao")
        return HttpResponse(200, challenge)

    # -- POST: a signed notification ----------------------------------------------
    def _notification(self, request: HttpRequest) -> HttpResponse:
        if len(request.body) > self.max_body_bytes:
            return reject(400, "tamanho")
        if not signature.is_valid(request.body, request.headers.get(signature.HEADER), self.secrets.app_secret()):
            return reject(401, "assinatura")
        try:
            # pydantic's own JSON parser, not json.loads: json.loads raises RecursionError (not
            # a ValueError) on a deeply nested body, which crashed the function into a 502 that
            # Meta retries; this parser bounds nesting and answers a ValidationError.
            payload = WebhookPayload.model_validate_json(request.body)
        except ValidationError:  # invalid JSON and invalid UTF-8 included
            return reject(400, "formato")
        received: list[tuple[object, str]] = []
        for entry in payload.entry:
            for change in entry.changes:
                value = change.value
                if value.statuses:
                    count(ChannelMetric.STATUSES, {}, len(value.statuses))
                received += [(message, value.metadata.phone_number_id) for message in value.messages]
        self._enqueue(received)
        return HttpResponse(200, "ok")

    def _enqueue(self, received: list[tuple[object, str]]) -> None:
        """Every message of the notification, in order, with one ERP query and one SQS
        call per ten (a signed notification may carry hundreds: one round trip each took
        32 s for 650 messages locally, past the function's 10 s)."""
        read = [(read_message(raw), phone) for raw, phone in received]
        readable_ids = {m.id for m, _ in read if isinstance(m, WebhookMessage)}
        wanted = [(m, phone) for m, phone in read if _wanted(m, readable_ids)]
        customers = self.directory.customers_of({_address(m)[0] for m, _ in wanted})
        key, issued_at = self.secrets.queue_key(), int(self.clock())

        def seal(queued: QueuedMessage) -> str:
            # Raises on an empty key (502: Meta delivers again): nothing goes out unsigned.
            return assertion.sign(queued.model_dump(mode="json", exclude_none=True), key, issued_at)

        self.queue.send_all([_queue_item(m, phone, customers.get(_address(m)[0]), seal) for m, phone in wanted])


def _wanted(message: WebhookMessage | Malformed, readable_ids: set[str]) -> bool:
    if isinstance(message, WebhookMessage):
        count(ChannelMetric.RECEIVED, {"Tipo": message.type if message.type in _KNOWN_TYPES else "outro"})
        return message.type not in _IGNORED_TYPES
    # A readable message with the same id is the one answered (a reply is keyed by the id).
    answered = message.address is not None and message.address.id not in readable_ids
    outcome = "respondida" if answered else "descartada"
    count(ChannelMetric.MALFORMED, {"Destino": outcome})
    # Field names only: the values are the customer's (number, text).
    logger.warning("malformed message", extra={"campos": list(message.fields), "destino": outcome})
    return answered


def _address(message: WebhookMessage | Malformed) -> tuple[str, str]:
    """(sender's wa_id, wamid) of a message that is enqueued."""
    if isinstance(message, Malformed):
        assert message.address is not None  # only addressable ones are enqueued
        return message.address.from_, message.address.id
    return message.from_, message.id


def _queue_item(message: WebhookMessage | Malformed, phone_number_id: str, customer_id: int | None,
                seal: Callable[[QueuedMessage], str]) -> QueueItem:
    wa_id, wamid = _address(message)
    common = {"mensagemId": wamid, "waId": wa_id, "phoneNumberId": phone_number_id}
    if customer_id is None:
        queued = QueuedMessage(tipo=QueuedKind.FIXED_REPLY, motivo=FixedReason.UNKNOWN_NUMBER, **common)
        group = "wa-desconhecido-" + hashlib.sha256(wa_id.encode()).hexdigest()[:40]
    else:
        # One FIFO group per customer, not per conversation: a burst straddling midnight
        # in São Paulo spans two conversations, and only one group keeps it in order
        # (docs/decisions/whatsapp-fifo-group-per-customer.md).
        group = f"wa-cliente-{customer_id}"
        if isinstance(message, Malformed):  # no readable timestamp, so no conversation
            queued = QueuedMessage(tipo=QueuedKind.FIXED_REPLY, motivo=FixedReason.MALFORMED, **common)
        else:
            queued = _turn_or_fixed(message, conversation_id(customer_id, message.timestamp), customer_id, common)
    # The wamid can be longer than SQS allows (128) and has characters it refuses: hash it.
    return QueueItem(queued, group_id=group, deduplication_id=hashlib.sha256(wamid.encode()).hexdigest(),
                     body=seal(queued))


_KNOWN_TYPES = frozenset({"text", "image", "audio", "video", "document", "sticker", "location", "contacts",
                          "interactive", "button", "reaction", "order", "system", "unsupported"})


# A reaction (an emoji on one of our messages) asks nothing: answering it with
# "I only read text" would be noise. Every other non-text type gets that reply.
_IGNORED_TYPES = frozenset({"reaction"})


_CUSTOMER_MESSAGE: TypeAdapter[str] = TypeAdapter(CustomerMessage)


def _turn_or_fixed(message: WebhookMessage, conversation: str, customer_id: int,
                   common: dict[str, str]) -> QueuedMessage:
    text = message.text.body.strip() if message.type == "text" and message.text else ""
    if not text:
        return QueuedMessage(tipo=QueuedKind.FIXED_REPLY, motivo=FixedReason.UNSUPPORTED_TYPE, conversaId=conversation,
                             **common)
    if len(text) > MAX_TURN_TEXT:
        return QueuedMessage(tipo=QueuedKind.FIXED_REPLY, motivo=FixedReason.TOO_LONG, conversaId=conversation,
                             **common)
    try:
        _CUSTOMER_MESSAGE.validate_python(text)
    except ValidationError:  # a text the turn would refuse: answered now, never retried into the DLQ
        return QueuedMessage(tipo=QueuedKind.FIXED_REPLY, motivo=FixedReason.INVALID_TEXT, conversaId=conversation,
                             **common)
    return QueuedMessage(tipo=QueuedKind.TEXT, conversaId=conversation, clienteId=customer_id, mensagem=text, **common)


def reject(status: int, reason: str) -> HttpResponse:
    count(ChannelMetric.REJECTED, {"Motivo": reason})
    return HttpResponse(status, "")
