"""A message to a WhatsApp customer from outside a turn (a decided approval's
outcome, orchestrator/resume.py), through the channel's own path: the outbox
record (once, keyed by what it answers) and the resend queue, whose consumer (the
WhatsApp consumer function, which holds the Cloud API token) sends it at most once.

A conversation came from WhatsApp when the channel recorded its address
(``canal_whatsapp.contacts``, written by the consumer before each turn); otherwise
nothing is recorded and the caller's answer is the only reply (the direct entry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cadencia_shared.aws import client
from cadencia_shared.ledger import Ledger
from cadencia_shared.observability import count, logger_for
from canal_whatsapp.contacts import ChannelContacts
from canal_whatsapp.outbox import FAILED_SENDS_METRIC, SENDABLE, Outbox, OutgoingReply
from canal_whatsapp.resends import WINDOW_S, ResendQueue, SqsResendQueue
from canal_whatsapp.settings import SenderSettings

from .settings import OrchestratorSettings

NOT_SCHEDULED = "nao_agendado"  # recorded in the outbox, but the resend queue refused it: alarmed
logger = logger_for("orquestrador")


class CustomerMessages(Protocol):
    def send(self, conversation_id: str, key: str, text: str) -> bool: ...


class NoChannel:
    """No resend queue configured: nothing goes out but the caller's answer."""

    def send(self, conversation_id: str, key: str, text: str) -> bool:
        return False


@dataclass(frozen=True)
class WhatsAppMessages:
    ledger: Ledger
    resends: ResendQueue

    def send(self, conversation_id: str, key: str, text: str) -> bool:
        """Record ``text`` for the conversation's WhatsApp address once (``key``) and
        have it sent; False: not a WhatsApp conversation. A repeat re-schedules a
        record still unsent (its claim keeps the send single) and changes nothing else."""
        contact = ChannelContacts(self.ledger).find(conversation_id)
        if contact is None:
            return False
        outbox = Outbox(self.ledger)
        window_ends_ms = None if contact.updated_ms is None else contact.updated_ms + WINDOW_S * 1000
        outbox.record(OutgoingReply(key=key, conversation_id=conversation_id, phone_number_id=contact.phone_number_id,
                                    to=contact.wa_id, body=text, reply_to=None, window_ends_ms=window_ends_ms))
        if outbox.status(key) in SENDABLE:
            try:
                self.resends.schedule(key, 0)
            except Exception:  # noqa: BLE001 - the decision is committed; a person answers (alarmed)
                count(FAILED_SENDS_METRIC, {"Motivo": NOT_SCHEDULED})
                logger.warning("approval message recorded but not scheduled", extra={"envio": key})
        return True


def customer_messages(settings: OrchestratorSettings, ledger: Ledger) -> CustomerMessages:
    channel = SenderSettings.from_env()
    if not channel.resend_queue_url:
        return NoChannel()
    return WhatsAppMessages(ledger, SqsResendQueue(client("sqs", settings.aws), channel.resend_queue_url))
