"""A short Cloud API outage does not lose replies: a temporary refusal (429, 5xx, a
throttling code, a connection that never opened) is resent through the resend queue
(SQS on moto, its delay doubling) for as long as the customer's 24-hour window
allows, every reply exactly once (the outbox's claim); past the window, or on a
definitive refusal, the record is ``falhou`` (alarmed) and nothing is scheduled.

The fake Cloud API is a real HTTP server; the ledger's clock is injected."""

from __future__ import annotations

import json
import uuid

import pytest

from cadencia_shared.ledger import Ledger
from canal_whatsapp.delivery import Sender
from canal_whatsapp.graph import GraphClient
from canal_whatsapp.outbox import Outbox, OutboxStatus, OutgoingReply
from canal_whatsapp.resends import WINDOW_S, ResendRequest, SqsResendQueue
from scripts.local_stack.aws import session_client
from scripts.local_stack.whatsapp_fake import BUSINESS_PHONE_NUMBER_ID, FakeCloudApi, FakeCloudApiServer
from tests.support.whatsapp import ANA, BRUNO

pytestmark = pytest.mark.stack


class Clock:
    def __init__(self) -> None:
        self.now = 1_780_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake():
    api = FakeCloudApi(access_token="token-de-teste")
    with FakeCloudApiServer(api) as server:
        yield api, server.graph_url


@pytest.fixture
def queue(local_stack):
    sqs = session_client("sqs", local_stack.aws_endpoint)
    url = sqs.create_queue(QueueName=f"cadencia-whatsapp-reenvios-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    yield sqs, url
    sqs.delete_queue(QueueUrl=url)


def _sender(local_stack, graph_url, clock, queue) -> Sender:
    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint), clock=clock)
    sqs, url = queue
    return Sender(outbox=Outbox(ledger), graph=GraphClient(graph_url, 2.0), access_token=lambda: "token-de-teste",
                  sleep=lambda s: None, resends=SqsResendQueue(sqs, url), resend_base_s=0)


def _reply(to: str, text: str) -> OutgoingReply:
    return OutgoingReply.answering(f"wamid.REENVIO{uuid.uuid4().hex}", conversation_id=None,
                                   phone_number_id=BUSINESS_PHONE_NUMBER_ID, to=to, body=text)


def _scheduled(queue) -> list[str]:
    """Receive and delete every resend message due now (the queue consumer's part)."""
    sqs, url = queue
    keys = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
        if not got:
            return keys
        for m in got:
            keys.append(ResendRequest.model_validate_json(m["Body"]).reenvio)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def test_an_outage_of_12_500s_then_3_503s_loses_no_reply_and_sends_each_once(local_stack, fake, queue):
    api, graph_url = fake
    sender = _sender(local_stack, graph_url, Clock(), queue)
    api.fail_next(12, status=500, code=2)
    api.fail_next(3, status=503, code=None)
    replies = [_reply(to, f"resposta {i}") for i, to in enumerate([ANA, BRUNO, ANA, BRUNO])]
    first = [sender.deliver(r) for r in replies]
    assert OutboxStatus.RETRY in first  # not falhou: the outage is temporary
    for _ in range(30):  # the resend queue's consumer
        keys = _scheduled(queue)
        if not keys:
            break
        for key in keys:
            sender.deliver_recorded(key)
    assert sorted(m.body for m in api.sent) == sorted(r.body for r in replies)  # each exactly once
    assert api.requests == 15 + 4
    for r in replies:
        assert sender.outbox.status(r.key) is OutboxStatus.SENT
    # A stale resend of a sent reply sends nothing.
    assert sender.deliver_recorded(replies[0].key) is OutboxStatus.SENT and len(api.sent) == 4


def test_past_the_24h_window_a_temporary_refusal_is_final(local_stack, fake, queue):
    api, graph_url = fake
    clock = Clock()
    sender = _sender(local_stack, graph_url, clock, queue)
    api.fail_next(1000, status=503, code=None)
    reply = _reply(ANA, "fora do prazo")
    assert sender.deliver(reply) is OutboxStatus.RETRY
    clock.now += WINDOW_S - 60
    [key] = _scheduled(queue)
    assert sender.deliver_recorded(key) is OutboxStatus.RETRY  # still inside the window: scheduled again
    clock.now += 61
    [key] = _scheduled(queue)
    assert sender.deliver_recorded(key) is OutboxStatus.FAILED
    assert _scheduled(queue) == [] and api.sent == []
    record = sender.outbox.read(reply.key)
    assert record["status"] == "falhou" and "janela" in record["detalhe"]


@pytest.mark.parametrize("status, code", [(400, 131026), (400, 100), (401, 190), (403, 10)])
def test_a_definitive_refusal_is_final_at_once(local_stack, fake, queue, status, code):
    api, graph_url = fake
    sender = _sender(local_stack, graph_url, Clock(), queue)
    api.fail_next(1, status=status, code=code)
    reply = _reply(BRUNO, "destinatario invalido")
    assert sender.deliver(reply) is OutboxStatus.FAILED
    assert _scheduled(queue) == [] and api.requests == 1
    assert sender.deliver_recorded(reply.key) is OutboxStatus.FAILED and api.requests == 1


def test_a_resend_message_is_strict():
    for body in ('{"reenvio": 1}', '{"reenvio": "a", "x": 1}', '{"reenvio": ""}', '{"reenvio": "a b"}',
                 '{}', '[]', json.dumps({"reenvio": "a" * 300})):
        with pytest.raises(ValueError):
            ResendRequest.model_validate_json(body)
