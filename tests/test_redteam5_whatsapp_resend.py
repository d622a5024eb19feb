"""Red team of ``Sender.deliver_recorded`` (the consumer's redelivery of an older
answered message), against the code it replaced (``finish_recorded_send`` read the
outbox record first and returned when there was none, never asking for the token).

With the access token unavailable (a Secrets Manager outage, cold cache), a
redelivery whose message has no outbox record must still be done — nothing to send —
as before, not fail the SQS record (retried until the DLQ for a message that needs
nothing). A record that exists must stay sendable: not claimed without a token."""

from __future__ import annotations

import uuid

import pytest

from cadencia_shared.ledger import Ledger
from canal_whatsapp.delivery import Sender
from canal_whatsapp.graph import GraphClient
from canal_whatsapp.outbox import Outbox, OutboxStatus, OutgoingReply
from scripts.local_stack.aws import session_client


class SecretOutage(Exception):
    pass


def _no_token() -> str:
    raise SecretOutage("secrets manager unavailable")


@pytest.fixture
def sender(local_stack) -> Sender:
    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    # A closed port: any send would fail loudly (none may be attempted here).
    return Sender(outbox=Outbox(ledger), graph=GraphClient("http://127.0.0.1:9", 1.0), access_token=_no_token)


def test_no_record_is_nothing_to_send_even_without_the_token(sender):
    assert sender.deliver_recorded(f"wamid.{uuid.uuid4().hex}") is None


def test_a_recorded_reply_is_not_claimed_without_the_token(sender):
    key = f"wamid.{uuid.uuid4().hex}"
    sender.outbox.record(OutgoingReply(key=key, conversation_id="wa-1", phone_number_id="123",
                                       to="5511999990000", body="resposta", reply_to=key))
    with pytest.raises(SecretOutage):
        sender.deliver_recorded(key)
    assert sender.outbox.status(key) is OutboxStatus.PENDING  # still sendable by the next redelivery
