"""The WhatsApp channel end to end on the local stack: signed webhooks from the
fake Cloud API → the ingress (its own process) → SQS FIFO (moto) → consumer
workers (their own processes, the real orchestrator, the real tool Lambdas, the
scripted model over the Messages API) → the fake's send endpoint.

Every test talks on its own São Paulo day, so it has its own conversations."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from cadencia_shared.audit_anchors import LedgerAnchors
from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.ledger import Ledger
from canal_whatsapp.models import QueuedKind, QueuedMessage
from scripts.harness.scripted_model import ScriptedModelServer
from scripts.local_stack.aws import session_client
from scripts.local_stack.whatsapp_channel import LocalChannel
from scripts.local_stack.whatsapp_fake import BUSINESS_PHONE_NUMBER_ID, media_message, notification, text_message
from scripts.local_stack.whatsapp_model import ECHO_PREFIX, ChatPolicy
from tests.support.whatsapp import ANA, BRUNO, UNKNOWN, day_ts

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def model():
    with ScriptedModelServer() as server:
        server.activate(ChatPolicy())
        yield server


@pytest.fixture(scope="module")
def model_env(model):
    return {"MODEL_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": model.base_url, "MODEL_ID": "cadencia-roteirizado",
            "ANTHROPIC_API_KEY": "local-scripted-model"}


@pytest.fixture(scope="module")
def shared_channel(local_stack, model_env):
    from scripts.local_stack import postgres

    postgres.apply_sql(local_stack.postgres, ("demo.sql",))
    with LocalChannel(local_stack, model_env=model_env, consumers=2) as ch:
        yield ch


@pytest.fixture
def channel(shared_channel):
    """The module's channel (its processes start once), with the fake's record and
    injections cleared for this test."""
    assert shared_channel.wait_until_drained()
    shared_channel.api.reset()
    return shared_channel


@pytest.fixture
def ledger(local_stack):
    return Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))


def _bodies(sent):
    return [m.body for m in sent]


def _consumer_logs(channel) -> str:
    return "".join(p.read_text(errors="replace") for p in Path(channel.dir).glob("consumer-*.log"))


def test_a_customer_is_answered_in_context_through_the_whole_channel(channel, ledger):
    first = text_message(ANA, "Olá, bom dia", timestamp=day_ts(10))
    second = text_message(ANA, "qual o status do pedido 4821?", timestamp=day_ts(10, 5))
    assert channel.webhook.post(notification([first])) == 200
    assert channel.webhook.post(notification([second])) == 200
    sent = channel.wait_for_replies(ANA, 2)
    # The status sentence is the code's, from the status tool's result (money_sentences).
    assert _bodies(sent) == [f"{ECHO_PREFIX}Olá, bom dia",
                             "Consultei o seu pedido.\n\nSituação do pedido 4821: entregue; código de rastreio: "
                             "BR123456789."]
    assert [m.context_message_id for m in sent] == [first["id"], second["id"]]
    assert {m.phone_number_id for m in sent} == {BUSINESS_PHONE_NUMBER_ID}
    state = ledger.read_conversation("wa-1001-20260312")
    assert state is not None and state.customer_id == 1001 and state.turns == 2


def test_redeliveries_are_answered_once(channel, ledger):
    message = text_message(BRUNO, "oi, preciso de ajuda", timestamp=day_ts(11))
    for _ in range(3):  # a storm within SQS's 5-minute window: FIFO dedupe
        assert channel.webhook.post(notification([message])) == 200
    assert len(channel.wait_for_replies(BRUNO, 1)) == 1
    # After the first was answered and deleted (as after the 5-minute window):
    # the ledger's inbound dedupe answers from the stored reply, the outbox sends nothing.
    for _ in range(3):
        assert channel.webhook.post(notification([message])) == 200
    assert channel.wait_until_drained()
    time.sleep(1)
    assert _bodies(channel.api.sent_to(BRUNO)) == [f"{ECHO_PREFIX}oi, preciso de ajuda"]
    assert ledger.read_conversation("wa-1002-20260313").turns == 1


def test_reordered_and_batched_messages_are_answered_once_each_in_arrival_order(channel):
    # Letters, not digits: a number in the model's own words is refused by the output contract.
    texts = [f"mensagem {'abcdef'[i]}" for i in range(6)]
    msgs = [text_message(ANA, t, timestamp=day_ts(12, i)) for i, t in enumerate(texts)]
    # Meta delivers 3 before 1 and 2, then a batch of three, then redelivers two of them.
    order = [msgs[3], msgs[1], msgs[2]]
    for m in order:
        assert channel.webhook.post(notification([m])) == 200
    assert channel.webhook.post(notification([msgs[0], msgs[4], msgs[5]])) == 200
    assert channel.webhook.post(notification([msgs[1], msgs[4]])) == 200
    sent = channel.wait_for_replies(ANA, 6)
    time.sleep(1.5)
    expected = [f"{ECHO_PREFIX}{m['text']['body']}" for m in (*order, msgs[0], msgs[4], msgs[5])]
    assert _bodies(channel.api.sent_to(ANA)) == expected
    assert [m.context_message_id for m in sent] == [m["id"] for m in (*order, msgs[0], msgs[4], msgs[5])]


def test_an_unknown_number_gets_the_fixed_reply_and_never_reaches_the_model(channel, model):
    before = model.requests
    said = notification([text_message(UNKNOWN, "reembolsa o pedido 4821", timestamp=day_ts(13))])
    assert channel.webhook.post(said) == 200
    [sent] = channel.wait_for_replies(UNKNOWN, 1)
    assert "Não encontramos um cadastro" in sent.body
    assert channel.wait_until_drained()
    assert model.requests == before


def test_non_text_messages_get_the_fixed_reply_without_the_model(channel, model):
    before = model.requests
    audio = {**media_message(BRUNO, "audio"), "timestamp": str(day_ts(14))}
    assert channel.webhook.post(notification([audio])) == 200
    [sent] = channel.wait_for_replies(BRUNO, 1)
    assert sent.body.startswith("Por enquanto eu só consigo ler mensagens de texto")
    assert sent.context_message_id == audio["id"]
    assert model.requests == before


def test_temporary_send_failures_are_retried_and_delivered_once(channel):
    channel.api.fail_next(2, status=503, code=2)
    assert channel.webhook.post(notification([text_message(ANA, "teste de falha", timestamp=day_ts(15))])) == 200
    sent = channel.wait_for_replies(ANA, 1)
    assert channel.wait_until_drained()
    time.sleep(0.5)
    assert _bodies(channel.api.sent_to(ANA)) == [f"{ECHO_PREFIX}teste de falha"] and len(sent) == 1


def test_a_cloud_api_outage_loses_no_reply_and_sends_each_once(channel, ledger):
    """12 x 500 then 3 x 503, then the Cloud API is back: every reply goes out once,
    through the resend queue (a temporary refusal is never final inside the window)."""
    channel.api.fail_next(12, status=500, code=2)
    channel.api.fail_next(3, status=503, code=None)
    messages = [text_message(who, f"fora do ar {'abc'[i]}", timestamp=day_ts(16, i))
                for who in (ANA, BRUNO) for i in range(3)]
    for message in messages:
        assert channel.webhook.post(notification([message])) == 200
    channel.wait_for_replies(ANA, 3, timeout_s=150)
    channel.wait_for_replies(BRUNO, 3, timeout_s=60)
    assert channel.wait_until_drained() and channel.wait_until_drained(url=channel.resend_url)
    time.sleep(1)
    assert sorted(_bodies(channel.api.sent)) == sorted(f"{ECHO_PREFIX}{m['text']['body']}" for m in messages)
    assert {ledger.table.get(f"envio#{m['id']}")["status"] for m in messages} == {"enviado"}
    assert channel.queue_depth(channel.dlq_url) == 0
    assert "EnviosWhatsappAdiados" in _consumer_logs(channel)


def test_outside_the_24h_window_is_handed_off_not_resent(channel, ledger):
    channel.api.fail_next(1, status=400, code=131047)
    message = text_message(BRUNO, "respondam depois", timestamp=day_ts(17))
    assert channel.webhook.post(notification([message])) == 200
    assert channel.wait_until_drained()
    assert channel.api.sent_to(BRUNO) == []
    assert ledger.table.get(f"envio#{message['id']}")["status"] == "fora_da_janela"
    # Recorded on the conversation's hash chain, like every audit record (none outside it).
    chain = AuditChain(AUDIT_TABLE, ledger.client, anchor_table=ledger.table_name)
    assert "RESPOSTA_FORA_DA_JANELA" in [r["evento"] for r in chain.records("wa-1002-20260319")]
    assert LedgerAnchors(ledger.client, ledger.table_name).unchained_records("wa-1002-20260319") == {}
    # The turn's links (anchored by its commit) and the sender's (anchored by itself): one intact chain.
    report = chain.check("wa-1002-20260319")
    assert (report.broken, report.unanchored) == (None, 0)


def test_a_busy_conversation_makes_the_message_visible_again(channel, ledger):
    # Held until the test gives it back (a 3 s lease could end before a loaded machine checked it).
    held = ledger.acquire_conversation(conversation_id="wa-1001-20260320", customer_id=1001, lease_s=3600)
    assert channel.webhook.post(notification([text_message(ANA, "estou esperando", timestamp=day_ts(18))])) == 200
    time.sleep(1.5)
    assert channel.api.sent_to(ANA) == []  # refused while the lease is held
    ledger.release_conversation(held)
    sent = channel.wait_for_replies(ANA, 1, timeout_s=60)
    assert _bodies(sent) == [f"{ECHO_PREFIX}estou esperando"]
    assert held.version >= 1


def test_one_wamid_racing_in_four_processes_is_answered_once(local_stack, erp, model_env, ledger):
    """Four deliveries of the same message escape SQS's dedupe (as after its window)
    and land in four different groups, so four consumer processes take them at once."""
    with LocalChannel(local_stack, model_env=model_env, consumers=4) as ch:
        message = QueuedMessage(tipo=QueuedKind.TEXT, mensagemId="wamid.RACE" + str(time.time_ns()), waId=ANA,
                                phoneNumberId=BUSINESS_PHONE_NUMBER_ID, conversaId="wa-1001-20260321",
                                clienteId=1001, mensagem="disputa")
        for i in range(4):
            ch.sqs.send_message(QueueUrl=ch.queue_url, MessageBody=ch.seal(message),
                                MessageGroupId=f"corrida-{i}", MessageDeduplicationId=f"corrida-{i}-{time.time_ns()}")
        ch.wait_for_replies(ANA, 1)
        assert ch.wait_until_drained(60)
        time.sleep(1)
        assert _bodies(ch.api.sent_to(ANA)) == [f"{ECHO_PREFIX}disputa"]
    # One turn ran: the message is in the history once and answered once. (This once saw
    # turnos == 2 under load: a commit applied whose answer was lost was followed by the
    # failure path marking the answered message failed, so a redelivery ran it again —
    # fixed in the ledger, reproduced in tests/test_lost_commit_answer.py; the local
    # stack's long polls made DynamoDB calls exceed their 5 s timeout, fixed in
    # scripts/local_stack/aws.py, tests/test_local_stack_fidelity.py.)
    state = ledger.read_conversation("wa-1001-20260321")
    assert state.turns == 1
    # Delivered answers are the output contract's responder_cliente calls.
    users = [block.get("text") for msg in state.messages if msg["role"] == "user"
             for block in msg["content"] if isinstance(block, dict) and block.get("type") == "text"]
    answers = [block["input"]["texto"] for msg in state.messages if msg["role"] == "assistant"
               for block in msg["content"] if isinstance(block, dict) and block.get("name") == "responder_cliente"]
    assert (users, answers) == (["disputa"], [f"{ECHO_PREFIX}disputa"])
    assert state.has_answered(message.mensagemId)  # answered on the conversation item (ledger.inbound)


def test_a_sender_killed_mid_send_never_sends_twice(local_stack, erp, model_env, ledger):
    """SIGKILL the consumer while its send is on the wire (the fake accepted the
    message and is slow to answer): the redelivery finds the record 'enviando',
    waits for its lease, marks it 'desconhecido' (alarmed) and never sends again."""
    # As in AWS, redeliveries are spaced so that the send's lease (12 s) expires
    # before the message runs out of receives.
    sender_env = {"WHATSAPP_SEND_TIMEOUT_S": "10", "WHATSAPP_SEND_LEASE_S": "4", "LOCAL_RETRY_AFTER_S": "4"}
    with LocalChannel(local_stack, model_env=model_env, consumers=1, sender_env=sender_env, visibility_s=6) as ch:
        ch.api.hang_next(1, 30)
        message = text_message(BRUNO, "mata no meio", timestamp=day_ts(20))
        assert ch.webhook.post(notification([message])) == 200
        ch.wait_for_replies(BRUNO, 1)  # recorded by the fake: on the wire now
        ch.stop_process(ch.procs[-1], signal.SIGKILL)
        ch.start_consumers(1)
        deadline = time.monotonic() + 60
        send_key = f"envio#{message['id']}"
        while time.monotonic() < deadline and (ledger.table.get(send_key) or {}).get("status") != "desconhecido":
            time.sleep(0.2)
        assert ledger.table.get(f"envio#{message['id']}")["status"] == "desconhecido"
        assert ch.wait_until_drained(30)
        assert len(ch.api.sent_to(BRUNO)) == 1
        assert "remetente_interrompido" in _consumer_logs(ch)


def test_a_message_that_keeps_failing_lands_in_the_dlq(local_stack, erp, model_env):
    # Short turns and lease: the derived redelivery delay (10 s) keeps the test short.
    with LocalChannel(local_stack, model_env=model_env, consumers=1, turn_timeout_s=5, lease_s=5) as ch:
        sm = session_client("secretsmanager", local_stack.aws_endpoint)
        sm.delete_secret(SecretId=ch.names["access-token"], ForceDeleteWithoutRecovery=True)
        assert ch.webhook.post(notification([text_message(UNKNOWN, "oi", timestamp=day_ts(21))])) == 200
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and ch.queue_depth(ch.dlq_url) == 0:
            time.sleep(0.3)
        assert ch.queue_depth(ch.dlq_url) == 1
        assert ch.api.sent_to(UNKNOWN) == []


def test_nothing_personal_or_secret_reaches_the_consumer_logs(channel):
    text = "meu email é fulana@example.com"
    assert channel.webhook.post(notification([text_message(ANA, text, timestamp=day_ts(22))])) == 200
    channel.wait_for_replies(ANA, 1)
    log = _consumer_logs(channel)
    for secret in (ANA, text, channel.api.access_token, channel.app_secret, json.dumps(text)[1:-1]):
        assert secret not in log


def test_conversa_py_chats_as_a_customer_through_the_channel(local_stack, erp):
    """The terminal chat, driven through stdin like a person (it finds the session's
    local stack through CADENCIA_LOCAL_STACK_DIR and starts its own channel)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, str(root / "scripts" / "conversa.py"), "--numero", "5541991234567"],
        input="qual o status do pedido 6200?\n/repetir\n/imagem\n/sair\n", capture_output=True, text=True,
        timeout=300, cwd=root, env={**__import__("os").environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "Situação do pedido 6200: entregue; código de rastreio: BR555000111." in out
    assert "redelivery absorvida" in out
    assert "só consigo ler mensagens de texto" in out
    assert out.count("Situação do pedido 6200") == 1


def test_a_busy_record_is_a_batch_item_failure_not_a_function_error(local_stack, erp, model_env, ledger):
    """The consumer's handler called as the event source mapping calls it: a record
    that cannot run now is reported in batchItemFailures and the invocation succeeds
    (Powertools would raise on an 'entire batch' failure, i.e. every failure at batch size 1)."""
    from orchestrator import handler as direct_handler
    from orchestrator import whatsapp_consumer
    from orchestrator.invokers.local import LocalContext, function_environment
    from scripts.local_stack.whatsapp_worker import sqs_event

    with LocalChannel(local_stack, model_env=model_env, consumers=0) as ch:
        env = ch.consumer_environment()
        ledger.acquire_conversation(conversation_id="wa-1002-20260324", customer_id=1002, lease_s=60)
        body = ch.seal(QueuedMessage(tipo=QueuedKind.TEXT, mensagemId="wamid.BUSY" + str(time.time_ns()), waId=BRUNO,
                                     phoneNumberId=BUSINESS_PHONE_NUMBER_ID, conversaId="wa-1002-20260324",
                                     clienteId=1002, mensagem="ocupada"))
        message = {"MessageId": "m-1", "ReceiptHandle": "r-1", "Body": body, "MD5OfBody": "x",
                   "Attributes": {"MessageGroupId": "wa-1002-20260324", "ApproximateReceiveCount": "1"}}
        with function_environment(env):
            direct_handler.reset()
            whatsapp_consumer.reset()
            result = whatsapp_consumer.lambda_handler(sqs_event(message, "arn:aws:sqs:us-east-1:1:q.fifo"),
                                                      LocalContext("cadencia-orquestrador-whatsapp", timeout_s=20))
            direct_handler.reset()
            whatsapp_consumer.reset()
        assert result == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
        assert ch.api.sent_to(BRUNO) == []


def _redeliver(channel, wamid: str, conversation: str) -> None:
    """The message again, past SQS's dedupe window (a new deduplication id)."""
    message = QueuedMessage(tipo=QueuedKind.TEXT, mensagemId=wamid, waId=ANA, phoneNumberId=BUSINESS_PHONE_NUMBER_ID,
                            conversaId=conversation, clienteId=1001, mensagem="de novo")
    channel.sqs.send_message(QueueUrl=channel.queue_url, MessageBody=channel.seal(message),
                             MessageGroupId=conversation, MessageDeduplicationId=f"{wamid}-{time.time_ns()}")


def test_a_redelivery_older_than_the_kept_replies_sends_only_what_the_outbox_recorded(channel, ledger):
    """The ledger keeps the replies of the two latest answered messages only. An older
    message redelivered is DONE without text: its outbox record, still pending (the
    consumer died after recording it), is sent then, once; with no record nothing is sent."""
    from cadencia_shared.ledger import REPLIES_KEPT, ConversationStatus
    from canal_whatsapp.outbox import Outbox, OutboxStatus, OutgoingReply

    conversation = "wa-1001-20260327"
    recorded, unrecorded = f"wamid.OLD{time.time_ns()}", f"wamid.NOREC{time.time_ns()}"

    def answered(wamid: str, text: str) -> None:  # a turn committed by a consumer that then died
        state = ledger.acquire_conversation(conversation_id=conversation, customer_id=1001, lease_s=60,
                                            message_id=wamid)
        ledger.commit_conversation(state, messages=state.messages, status=ConversationStatus.ACTIVE,
                                   reply={"resposta": text, "status": "ativa", "motivo": "resposta"})

    answered(recorded, "resposta registrada")
    Outbox(ledger).record(OutgoingReply.answering(recorded, conversation_id=conversation,
                                                  phone_number_id=BUSINESS_PHONE_NUMBER_ID, to=ANA,
                                                  body="resposta registrada"))
    answered(unrecorded, "resposta nunca registrada")
    for i in range(REPLIES_KEPT):
        answered(f"wamid.NEW{i}{time.time_ns()}", f"depois {i}")
    for wamid in (recorded, unrecorded, recorded):
        _redeliver(channel, wamid, conversation)
    channel.wait_for_replies(ANA, 1)
    assert channel.wait_until_drained()
    time.sleep(1)
    assert _bodies(channel.api.sent_to(ANA)) == ["resposta registrada"]
    assert ledger.read_conversation(conversation).turns == 2 + REPLIES_KEPT  # no turn ran again
    # Sent from the record as written; the message with no record gets none (nothing was sent).
    assert Outbox(ledger).status(recorded) is OutboxStatus.SENT and Outbox(ledger).read(unrecorded) is None


def test_a_long_text_and_a_malformed_message_are_answered_by_code_beside_a_valid_one(channel, model):
    """Through the whole channel: a text over the send limit and a message that fails
    the Cloud API model each get their fixed reply, and the valid one its turn."""
    long = text_message(ANA, "x" * 5000, timestamp=day_ts(70))
    malformed = {**text_message(ANA, "?", timestamp=day_ts(70, 1)), "timestamp": day_ts(70, 1)}  # not a string
    valid = text_message(ANA, "e agora?", timestamp=day_ts(70, 2))
    payload = notification([long, valid])
    payload["entry"][0]["changes"][0]["value"]["messages"].insert(1, malformed)
    assert channel.webhook.post(payload) == 200
    sent = {m.context_message_id: m.body for m in channel.wait_for_replies(ANA, 3)}
    assert sent[long["id"]].startswith("Sua mensagem ficou longa demais")
    assert sent[malformed["id"]].startswith("Não consegui ler sua mensagem.")
    assert sent[valid["id"]] == f"{ECHO_PREFIX}e agora?"
    assert channel.wait_until_drained()
    time.sleep(0.5)
    assert len(channel.api.sent_to(ANA)) == 3
