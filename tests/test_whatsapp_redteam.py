"""The channel red-teamed the way an outside checker would: webhook attacks
over real HTTP against the ingress process, and storms against the whole local
channel. Each test here was written against a defect or a claim; the defects'
tests failed before their fix."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from canal_whatsapp.signature import sign
from scripts.local_stack.whatsapp_channel import LocalChannel
from scripts.local_stack.whatsapp_fake import notification, text_message
from tests.support.whatsapp import ANA, day_ts, drain, scripted_channel, verified

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def ingress(local_stack):
    """The webhook alone (nothing consumes its queue: what was enqueued is read from it)."""
    from scripts.local_stack import postgres

    postgres.apply_sql(local_stack.postgres, ("demo.sql",))
    with LocalChannel(local_stack, model_env={}, consumers=0) as ch:
        yield ch


@pytest.fixture
def queue(ingress):
    drain(ingress.sqs, ingress.queue_url, ingress.queue_key)
    return lambda: drain(ingress.sqs, ingress.queue_url, ingress.queue_key)


@pytest.mark.parametrize("body", [
    b"[" * 50_000 + b"]" * 50_000,
    b'{"object":"whatsapp_business_account","entry":' + b"[" * 40_000 + b"]" * 40_000 + b"}",
    b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
], ids=["arrays", "inside the payload", "objects"])
def test_a_signed_but_deeply_nested_body_is_a_400_not_a_crash(ingress, queue, body):
    """Found: json.loads raised RecursionError (not a ValueError), the Lambda crashed and
    the Function URL answered 502 — which Meta retries for days. Signed, so only
    whoever holds the App Secret can send it; still a malformed payload: 400, nothing enqueued."""
    assert len(body) < 128 * 1024
    assert ingress.webhook.post_raw(body, sign(body, ingress.app_secret)) == 400
    assert queue() == []
    ok = json.dumps(notification([text_message(ANA, "depois", timestamp=day_ts(60))])).encode()
    assert ingress.webhook.post_raw(ok, sign(ok, ingress.app_secret)) == 200  # the process is fine
    assert len(queue()) == 1


# -- storms against the whole channel -------------------------------------------------

CARLA = "5541991234567"  # demo customer 1003
CUSTOMERS = {ANA: 1001, "5521998765432": 1002, CARLA: 1003}


@pytest.fixture  # a test's own: the storm stops its consumers before counting
def channel(local_stack):
    with scripted_channel(local_stack, consumers=3) as ch:
        yield ch


def test_a_concurrent_redelivery_storm_answers_each_message_once_in_turn_order(channel, local_stack):
    """3 customers × 6 texts, each delivered 3 times, plus a photo each and an unknown
    number (3 times), shuffled into batches of 1–3 (duplicates in one batch too) and
    posted by 4 concurrent senders; then, past SQS's 5-minute dedupe, every text is
    queued again (the ledger's dedupe). Each message gets exactly one reply, and each
    customer's replies go out in the order their turns ran."""
    import random
    import threading
    import time

    from cadencia_shared.ledger import Ledger
    from canal_whatsapp.conversation import conversation_id
    from canal_whatsapp.models import QueuedKind, QueuedMessage
    from scripts.local_stack.aws import session_client
    from scripts.local_stack.whatsapp_fake import BUSINESS_PHONE_NUMBER_ID, media_message
    from scripts.local_stack.whatsapp_model import ECHO_PREFIX
    from tests.support.whatsapp import UNKNOWN

    rng = random.Random(87)
    # Letters, not digits: the scripted model echoes the text, and a number in the model's
    # own words is refused by the output contract.
    letters = str.maketrans("0123456789", "abcdefghij")
    texts = {wa: [text_message(wa, f"{str(cid).translate(letters)}-pergunta-{str(j).translate(letters)}",
                               timestamp=day_ts(61, j)) for j in range(6)]
             for wa, cid in CUSTOMERS.items()}
    photos = {wa: {**media_message(wa), "timestamp": str(day_ts(61, 10))} for wa in CUSTOMERS}
    unknown = text_message(UNKNOWN, "oi", timestamp=day_ts(61))
    deliveries = [m for msgs in texts.values() for m in msgs for _ in range(3)] + list(photos.values()) + [unknown] * 3
    rng.shuffle(deliveries)
    batches, i = [], 0
    while i < len(deliveries):
        n = rng.randint(1, 3)
        batches.append(deliveries[i:i + n])
        i += n
    statuses = []

    def sender(part):
        for batch in part:
            statuses.append(channel.webhook.post(notification(batch)))

    threads = [threading.Thread(target=sender, args=(batches[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * len(batches)
    expected = 3 * 6 + 3 + 1
    deadline = time.monotonic() + 240
    while sum(len(channel.api.sent_to(wa)) for wa in [*CUSTOMERS, UNKNOWN]) < expected and time.monotonic() < deadline:
        time.sleep(0.2)
    assert channel.wait_until_drained(120)

    # Past SQS's window: every text queued again under a fresh deduplication id.
    for wa, msgs in texts.items():
        for m in msgs:
            conv = conversation_id(CUSTOMERS[wa], m["timestamp"])
            body = QueuedMessage(tipo=QueuedKind.TEXT, mensagemId=m["id"], waId=wa,
                                 phoneNumberId=BUSINESS_PHONE_NUMBER_ID,
                                 conversaId=conv, clienteId=CUSTOMERS[wa], mensagem=m["text"]["body"])
            channel.sqs.send_message(QueueUrl=channel.queue_url, MessageBody=channel.seal(body),
                                     MessageGroupId=conv, MessageDeduplicationId=f"replay-{time.time_ns()}")
    assert channel.wait_until_drained(240)
    # Every consumer finishes the message in hand and exits: no send can come after the count.
    assert channel.stop_consumers()

    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    for wa, msgs in texts.items():
        sent = channel.api.sent_to(wa)
        answers = [m.body for m in sent if m.body.startswith(ECHO_PREFIX)]
        assert sorted(answers) == sorted(f"{ECHO_PREFIX}{m['text']['body']}" for m in msgs), wa
        assert sum(1 for m in sent if m.body.startswith("Por enquanto eu só consigo ler")) == 1
        assert len(sent) == 7
        state = ledger.read_conversation(conversation_id(CUSTOMERS[wa], msgs[0]["timestamp"]))
        asked = [b["text"] for m in state.messages if m["role"] == "user" for b in m["content"]
                 if b.get("type") == "text"]
        assert asked == [a.removeprefix(ECHO_PREFIX) for a in answers]  # one turn each, replies in turn order
        assert state.turns == 6
    assert len(channel.api.sent_to(UNKNOWN)) == 1


def _many(n: int, *, unknown: bool = True) -> dict:
    from scripts.local_stack.whatsapp_fake import BUSINESS_PHONE_NUMBER_ID

    msgs = [{"from": f"55619{i:08d}" if unknown else ANA, "id": f"wamid.MUITAS{i:05d}", "timestamp": str(day_ts(62)),
             "type": "text", "text": {"body": f"oi {i}"}} for i in range(n)]
    changes = [{"field": "messages", "value": {"messaging_product": "whatsapp",
                                               "metadata": {"phone_number_id": BUSINESS_PHONE_NUMBER_ID},
                                               "messages": msgs[i:i + 100]}} for i in range(0, n, 100)]
    return {"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": changes}]}


def test_a_notification_with_hundreds_of_messages_costs_one_lookup_and_a_call_per_ten():
    """Found: one ERP query and one SQS call per message — 650 messages in one signed
    notification (68 KB, under the 128 KiB cap) took 32 s locally, past the function's
    10 s: in AWS the webhook would time out, Meta would retry, and the messages after
    the cut would never be enqueued. Counted at the logic's edges (the adapters' calls)."""
    from canal_whatsapp.ingress import HttpRequest, Ingress

    class Directory:
        calls: ClassVar[list[Any]] = []

        def customers_of(self, wa_ids):
            self.calls.append(set(wa_ids))
            return {"5561900000007": 1001}

    class Queue:
        batches: ClassVar[list[Any]] = []

        def send_all(self, items):
            self.batches.append(list(items))

    class Secrets:
        def app_secret(self):
            return "segredo"

        def verify_token(self):
            return "x"

        def queue_key(self):
            return "chave-da-fila"

    body = json.dumps(_many(650)).encode()
    directory, queue = Directory(), Queue()
    ingress = Ingress(directory=directory, queue=queue, secrets=Secrets())
    answer = ingress.handle(HttpRequest("POST", body, {"x-hub-signature-256": sign(body, "segredo")}))
    assert answer.status == 200
    assert len(directory.calls) == 1 and len(directory.calls[0]) == 650
    [items] = queue.batches
    assert [i.message.mensagemId for i in items] == [f"wamid.MUITAS{i:05d}" for i in range(650)]
    assert items[7].message.clienteId == 1001 and items[8].message.motivo == "numero_desconhecido"
    assert all(verified(i.body, "chave-da-fila") == i.message.model_dump(mode="json", exclude_none=True)
               for i in items), "every enqueued body carries the ingress's assertion over the message"


def test_hundreds_of_messages_in_one_webhook_are_all_enqueued_in_order(ingress, queue):
    """Over HTTP with the real adapters. 250, not 650: moto's SQS is quadratic in the
    messages a queue holds (measured: 65 batches of 10 cost 39 s in moto itself, 5 M
    clock calls), which real SQS is not."""
    body = json.dumps(_many(250, unknown=False)).encode()
    assert ingress.webhook.post_raw(body, sign(body, ingress.app_secret)) == 200
    got = queue()
    assert [g["body"]["mensagem"] for g in got] == [f"oi {i}" for i in range(250)]
    assert {g["group"] for g in got} == {got[0]["group"]}
