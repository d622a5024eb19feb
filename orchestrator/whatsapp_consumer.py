"""Lambda entry point of the orchestrator for the WhatsApp channel: the SQS FIFO
event source mapping (thin: parse, run the same turn as the direct entry, send).

Batch size 1 with Powertools' ``SqsFifoPartialProcessor``: one turn can take
most of the function's timeout, so a larger batch would only make the later
messages wait (and the visibility timeout grow); the FIFO processor still keeps
a larger batch correct if someone raises it, because it stops at the first
failure and returns the rest unprocessed (their order is kept).

A record fails (and becomes visible again after the visibility timeout) when the
conversation is busy, a concurrent commit won, the same message is being
processed elsewhere, or anything raises; after ``maxReceiveCount`` it goes to the
DLQ, which is alarmed. A queue message that does not parse can never succeed: it
is counted and dropped instead of blocking its conversation.

The same function consumes the resend queue (``canal_whatsapp.resends``, a second
event source): each of its messages names an outbox record that the Cloud API
refused for a temporary reason; it is sent as recorded, at most once (the outbox's
claim), and deferred again while the customer's window is open. Which queue a record
came from is read from its event source (``eventSourceARN``), never from its body.

An inbound body is believed only with the ingress's assertion
(``canal_whatsapp.assertion``; docs/decisions/queue-assertion.md): a body without
one, signed with another key, with any field altered or issued too long ago is
refused before anything runs — its reason logged (no value of the body), counted
(``MensagensForjadasRecusadas``) and the record acknowledged, never retried: no
turn, no tool, no send.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from cadencia_shared.aws import client
from cadencia_shared.handler import InvalidEvent, parse_event
from cadencia_shared.observability import count, logger_for
from canal_whatsapp import assertion
from canal_whatsapp.adapters import QueueKey
from canal_whatsapp.contacts import ChannelContacts, Contact
from canal_whatsapp.delivery import Sender
from canal_whatsapp.models import QueuedKind, QueuedMessage, SqsEvent
from canal_whatsapp.outbox import Outbox, OutgoingReply
from canal_whatsapp.queue_timing import max_assertion_age_s, queue_timing
from canal_whatsapp.resends import ResendRequest
from canal_whatsapp.settings import QueueKeySettings, SenderSettings
from canal_whatsapp.texts import FIXED_REPLIES

from .events import TurnRequest
from .handler import chained_ledger, orchestrator
from .model import Deadline
from .settings import OrchestratorSettings

logger = logger_for("orquestrador_whatsapp")
INVALID_QUEUE_MESSAGES = "MensagensDaFilaInvalidas"
FORGED_QUEUE_MESSAGES = "MensagensForjadasRecusadas"  # {Motivo}: an assertion.Refusal
# The oldest assertion believed: derived from the queue's rule for the longest turn Lambda
# allows (900 s), so it holds whatever the function's timeout (queue_timing.max_assertion_age_s).
MAX_ASSERTION_AGE_S = max_assertion_age_s(queue_timing(turn_timeout_s=900, lease_s=900))
clock: Callable[[], float] = time.time  # injected by tests


class MessageInFlightElsewhere(Exception):
    """Another invocation holds this very message: try again later, then send its reply."""


_senders: dict[str, Sender] = {}


def sender(settings: OrchestratorSettings, channel: SenderSettings) -> Sender:
    key = settings.model_dump_json() + channel.model_dump_json()
    if key not in _senders:
        # The turn's own ledger builder: a closed-window refusal (RESPOSTA_FORA_DA_JANELA)
        # is an audit record, and every audit record goes on the conversation's chain.
        outbox = Outbox(chained_ledger(settings))
        _senders[key] = Sender.configured(outbox, channel, client("secretsmanager", settings.aws),
                                          client("sqs", settings.aws) if channel.resend_queue_url else None)
    return _senders[key]


_queue_keys: dict[str, QueueKey] = {}


def queue_key(settings: OrchestratorSettings) -> str:
    name = QueueKeySettings.from_env().queue_key_name
    if name not in _queue_keys:
        _queue_keys[name] = QueueKey(client("secretsmanager", settings.aws), name)
    return _queue_keys[name]()


def reset() -> None:
    _senders.clear()
    _queue_keys.clear()


def handle_message(message: QueuedMessage, deadline: Deadline) -> None:
    settings = OrchestratorSettings.from_env()
    out = sender(settings, SenderSettings.from_env())
    if message.conversaId is not None:
        # Where a person's reply to this conversation goes (orchestrator.human_reply).
        ChannelContacts(out.outbox.ledger).remember(
            message.conversaId, Contact(wa_id=message.waId, phone_number_id=message.phoneNumberId))
    def answer(body: str) -> OutgoingReply:
        return OutgoingReply.answering(message.mensagemId, body=body, conversation_id=message.conversaId,
                                       phone_number_id=message.phoneNumberId, to=message.waId)

    if message.tipo is QueuedKind.FIXED_REPLY:
        assert message.motivo is not None  # enforced by QueuedMessage
        out.deliver(answer(FIXED_REPLIES[message.motivo]), time_left_s=deadline.remaining_s)
        return
    assert message.conversaId and message.clienteId and message.mensagem  # enforced by QueuedMessage
    request = TurnRequest(conversaId=message.conversaId, clienteId=message.clienteId,
                          mensagemId=message.mensagemId, mensagem=message.mensagem)
    reply = orchestrator(settings).handle(request, deadline)
    logger.info("turn finished", extra={"conversaId": reply.conversaId, "motivo": reply.motivo,
                                        "status": reply.status, "duplicada": reply.duplicada})
    if reply.status == "em_processamento":
        raise MessageInFlightElsewhere(message.mensagemId)
    if reply.resposta:
        # Also for a duplicate: a reply whose send was interrupted goes out now, once.
        out.deliver(answer(reply.resposta), time_left_s=deadline.remaining_s)
    elif reply.duplicada:
        finish_recorded_send(out, message.mensagemId, deadline)


def finish_recorded_send(out: Sender, wamid: str, deadline: Deadline) -> None:
    """A redelivery of a message answered before the ledger's most recent replies (it
    keeps only those, ``REPLIES_KEPT``): its text is no longer in the ledger, but its
    outbox record is, if the reply got that far — a record still ``pendente`` is sent
    now, once (the outbox's claim); one sent, being sent or final is left alone. No
    record: the send was never recorded (docs/whatsapp.md, *Redelivery*)."""
    out.deliver_recorded(wamid, time_left_s=deadline.remaining_s)


def resend(request: ResendRequest, deadline: Deadline) -> None:
    """A resend-queue message: the recorded reply goes out now, once, or is deferred again."""
    out = sender(OrchestratorSettings.from_env(), SenderSettings.from_env())
    status = out.deliver_recorded(request.reenvio, time_left_s=deadline.remaining_s)
    logger.info("resend finished", extra={"status": None if status is None else status.value})


def _record_handler(record: SQSRecord, context: LambdaContext) -> None:
    deadline = Deadline(context.get_remaining_time_in_millis)
    if _from_resend_queue(record):
        request = _resend_request(record.body)
        if request is None:
            count(INVALID_QUEUE_MESSAGES, {})
            logger.error("resend message does not parse: dropped", extra={"messageId": record.message_id})
            return
        resend(request, deadline)
        return
    key = queue_key(OrchestratorSettings.from_env())
    if not key:  # a misconfiguration, not a forgery: retried (then the alarmed DLQ), never dropped
        raise RuntimeError("the queue key is empty")
    fields = assertion.verify(record.body, key, now_s=clock(), max_age_s=MAX_ASSERTION_AGE_S)
    if isinstance(fields, assertion.Refusal):
        count(FORGED_QUEUE_MESSAGES, {"Motivo": fields.value})
        logger.warning("queue message refused: not asserted by the ingress",
                       extra={"motivo": fields.value, "messageId": record.message_id})
        return  # acknowledged: nothing ran
    try:
        message = QueuedMessage.model_validate_json(assertion.canonical(fields))
    except ValidationError:
        count(INVALID_QUEUE_MESSAGES, {})
        logger.error("queue message does not parse: dropped", extra={"messageId": record.message_id})
        return
    handle_message(message, deadline)


def _from_resend_queue(record: SQSRecord) -> bool:
    """Whether the record's event source is the resend queue (its name, the ARN's last part)."""
    url = SenderSettings.from_env().resend_queue_url
    return bool(url) and record.event_source_arn.rsplit(":", 1)[-1] == str(url).rstrip("/").rsplit("/", 1)[-1]


def _resend_request(body: str) -> ResendRequest | None:
    """The body as a resend-queue message (strict: a customer message never parses as one)."""
    try:
        return ResendRequest.model_validate_json(body)
    except ValidationError:
        return None


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: Any, context: LambdaContext) -> PartialItemFailureResponse | dict[str, Any]:
    try:
        parse_event(event, SqsEvent)  # strict, like every Lambda edge; each body is then a QueuedMessage
    except InvalidEvent as err:
        # Not an SQS event: nothing is read, run or sent (and no record is reported failed).
        logger.info("invalid event", extra={"erros": err.problems})
        return {"ok": False, "erro": {"codigo": "entrada_invalida",
                                      "mensagem": "Evento inválido: esperado um evento SQS da fila do WhatsApp."}}
    processor = SqsFifoPartialProcessor()
    # With batch size 1 every failure is an "entire batch" failure, which Powertools
    # raises by default: a busy conversation would then count as a function error
    # (and trip the Errors alarm). Report it as a batch item failure instead; what
    # keeps failing reaches the DLQ, which is alarmed.
    processor.raise_on_entire_batch_failure = False
    return process_partial_response(
        event=event, record_handler=lambda record: _record_handler(record, context), processor=processor,
        context=context,
    )
