"""Hostile input against the channel's pure edges: the signature check, the
Cloud API models and the queue contract (hypothesis)."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from canal_whatsapp import signature
from canal_whatsapp.conversation import conversation_id
from canal_whatsapp.models import QueuedMessage, WebhookPayload
from scripts.local_stack.whatsapp_fake import notification, text_message

SECRET = "test-app-secret"


@given(body=st.binary(max_size=512), flip=st.integers(min_value=0, max_value=511), bit=st.integers(0, 7))
@settings(max_examples=300, deadline=None)
def test_any_altered_body_fails_its_signature(body, flip, bit):
    header = signature.sign(body, SECRET)
    assert signature.is_valid(body, header, SECRET)
    if body:
        i = flip % len(body)
        altered = body[:i] + bytes([body[i] ^ (1 << bit)]) + body[i + 1:]
        assert not signature.is_valid(altered, header, SECRET)
    assert not signature.is_valid(body + b" ", header, SECRET)


@given(header=st.text(max_size=100))
@settings(max_examples=300, deadline=None)
def test_no_arbitrary_header_verifies(header):
    assert not signature.is_valid(b'{"object":"whatsapp_business_account"}', header, SECRET)


def test_signature_edge_cases():
    body = b"{}"
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert signature.is_valid(body, f"sha256={digest}", SECRET)
    assert signature.is_valid(body, f"sha256={digest.upper()}", SECRET)  # hex is case-insensitive
    for bad in (None, "", digest, f"sha1={digest}", f"sha256={digest}0", f"sha256= {digest}", f"sha256={digest}\n0"):
        assert not signature.is_valid(body, bad, SECRET), bad
    assert not signature.is_valid(body, signature.sign(body, ""), "")  # an unset secret verifies nothing


def _payload(**message_overrides):
    message = {**text_message("5511987654321", "oi", timestamp=1767225600), **message_overrides}
    return notification([message])


@pytest.mark.parametrize("override", [
    {"timestamp": 1767225600}, {"from": 5511987654321}, {"from": "+5511987654321"}, {"from": "5511\n"},
    {"id": ""}, {"id": "wamid.a#b"}, {"id": "x" * 257}, {"type": "Text"}, {"text": {"body": ""}},
    {"text": {"body": 5}},
])
def test_the_message_model_is_strict(override):
    from canal_whatsapp.models import WebhookMessage

    with pytest.raises(ValidationError):
        WebhookMessage.model_validate(_payload(**override)["entry"][0]["changes"][0]["value"]["messages"][0])


def test_a_customer_text_is_not_capped_at_the_send_limit():
    # 4096 is what the Cloud API lets us *send*; the ingress answers a longer text itself.
    from canal_whatsapp.models import WebhookMessage

    message = _payload(text={"body": "x" * 5000})["entry"][0]["changes"][0]["value"]["messages"][0]
    assert len(WebhookMessage.model_validate(message).text.body) == 5000


def test_the_webhook_model_ignores_fields_it_does_not_read():
    payload = _payload(context={"from": "x", "id": "y"}, referral={"source_url": "z"})
    payload["entry"][0]["changes"][0]["value"]["contacts"][0]["profile"]["extra"] = 1
    [raw] = WebhookPayload.model_validate(payload).entry[0].changes[0].value.messages
    from canal_whatsapp.models import WebhookMessage

    assert WebhookMessage.model_validate(raw).text.body == "oi"


@given(st.dictionaries(st.sampled_from(["tipo", "mensagemId", "waId", "phoneNumberId", "conversaId", "clienteId",
                                        "mensagem", "motivo", "extra"]),
                       st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20)), max_size=9))
@settings(max_examples=300, deadline=None)
def test_the_queue_contract_never_accepts_a_half_message(data):
    try:
        m = QueuedMessage.model_validate_json(json.dumps(data))
    except ValidationError:
        return
    if m.tipo.value == "texto":
        assert m.conversaId and isinstance(m.clienteId, int) and not isinstance(m.clienteId, bool) and m.mensagem
    else:
        assert m.motivo is not None and m.mensagem is None and m.clienteId is None


def test_bools_and_strings_are_not_customer_ids():
    base = {"tipo": "texto", "mensagemId": "wamid.x", "waId": "5511987654321", "phoneNumberId": "1",
            "conversaId": "wa-1-20260101", "mensagem": "oi"}
    assert QueuedMessage.model_validate_json(json.dumps({**base, "clienteId": 7})).clienteId == 7
    for bad in (True, "7", 7.0, 0, -1):
        with pytest.raises(ValidationError):
            QueuedMessage.model_validate_json(json.dumps({**base, "clienteId": bad}))


def test_a_message_timestamp_is_bounded_to_what_a_date_can_hold():
    from canal_whatsapp.models import WebhookMessage

    message = _payload()["entry"][0]["changes"][0]["value"]["messages"][0]
    last = "253402300799"  # 9999-12-31 23:59:59 UTC
    assert conversation_id(1001, WebhookMessage.model_validate({**message, "timestamp": last}).timestamp) \
        == "wa-1001-99991231"
    for beyond in ("253402300800", "999999999999"):
        with pytest.raises(ValidationError):
            WebhookMessage.model_validate({**message, "timestamp": beyond})


def test_the_conversation_id_follows_the_sao_paulo_day_of_the_message():
    # 2026-03-02 02:59:59 UTC is still 2026-03-01 in São Paulo (UTC-3).
    assert conversation_id(1001, "1772420399") == "wa-1001-20260301"
    assert conversation_id(1001, "1772420400") == "wa-1001-20260302"


# -- the queue contract is the orchestrator's edge (cadencia_shared.models) ---------
TURN_CHARS = ["\u202e", "\u2066", "\u200b", "\ufeff", "\x1b", "\x00", "\u2028", "\u3164", "\u034f"]


@pytest.mark.parametrize("char", TURN_CHARS)
def test_a_text_the_turn_would_refuse_gets_a_fixed_reply_and_never_becomes_a_turn(char):
    # Before the merge with the strict edges, such a text was queued as a turn, then
    # refused by TurnRequest in the consumer on every receive until the DLQ.
    from canal_whatsapp.ingress import _turn_or_fixed
    from canal_whatsapp.models import FixedReason, QueuedKind, WebhookMessage
    from canal_whatsapp.texts import FIXED_REPLIES

    message = WebhookMessage.model_validate({"from": "5511987654321", "id": "wamid.x", "timestamp": "1772420400",
                                             "type": "text", "text": {"body": f"Rua das Flores{char}, 12"}})
    common = {"mensagemId": "wamid.x", "waId": "5511987654321", "phoneNumberId": "1"}
    queued = _turn_or_fixed(message, "wa-1001-20260302", 1001, common)
    assert queued.tipo is QueuedKind.FIXED_REPLY and queued.motivo is FixedReason.INVALID_TEXT
    assert queued.mensagem is None and FIXED_REPLIES[queued.motivo]
    with pytest.raises(ValidationError):
        QueuedMessage.model_validate_json(json.dumps({
            "tipo": "texto", "conversaId": "wa-1001-20260302", "clienteId": 1001,
            "mensagem": f"o{char}i", **common}))


def test_line_breaks_and_emoji_joiners_are_still_a_turn():
    from canal_whatsapp.ingress import _turn_or_fixed
    from canal_whatsapp.models import QueuedKind, WebhookMessage
    from orchestrator.events import TurnRequest

    body = "Oi!\nMeu pedido 4821 👨\u200d👩\u200d👧 👍🏽"
    message = WebhookMessage.model_validate({"from": "5511987654321", "id": "wamid.y", "timestamp": "1772420400",
                                             "type": "text", "text": {"body": body}})
    queued = _turn_or_fixed(message, "wa-1001-20260302", 1001,
                            {"mensagemId": "wamid.y", "waId": "5511987654321", "phoneNumberId": "1"})
    assert queued.tipo is QueuedKind.TEXT and queued.mensagem == body
    TurnRequest(conversaId=queued.conversaId, clienteId=queued.clienteId, mensagemId=queued.mensagemId,
                mensagem=queued.mensagem)


# -- the two Lambda events go through cadencia_shared.handler.parse_event -----------
@pytest.mark.parametrize("event", [
    None, [], "x", 5, "{\"requestContext\": {\"http\": {\"method\": \"POST\"}}}", {},
    {"requestContext": {"http": {"method": 5}}}, {"requestContext": {"http": {"method": "POST"}}, "body": b"x"},
    {"requestContext": {"http": {"method": "POST"}}, "isBase64Encoded": "false"},
    {"requestContext": {"http": {"method": "POST"}}, "headers": {"x-hub-signature-256": 1}},
])
def test_the_webhook_refuses_what_is_not_a_function_url_event(event, monkeypatch):
    from canal_whatsapp import handler
    from orchestrator.invokers.local import LocalContext

    def no_ingress():
        raise AssertionError("the ingress was built for an invalid event")

    monkeypatch.setattr(handler, "ingress", no_ingress)
    out = handler.lambda_handler(event, LocalContext("cadencia-canal-whatsapp-entrada", timeout_s=10))
    assert out["statusCode"] == 400 and out["body"] == ""


@pytest.mark.parametrize("event", [
    None, [], "x", {}, {"Records": []}, {"Records": "x"},
    {"Records": [{"messageId": "1", "body": "{}", "eventSource": "aws:s3"}]},
    {"Records": [{"messageId": 1, "body": "{}", "eventSource": "aws:sqs"}]},
    {"Records": [{"messageId": "1", "body": {"tipo": "texto"}, "eventSource": "aws:sqs"}]},
])
def test_the_consumer_refuses_what_is_not_an_sqs_event(event, monkeypatch):
    from orchestrator import whatsapp_consumer
    from orchestrator.invokers.local import LocalContext

    def no_turn(*args, **kwargs):
        raise AssertionError("a record was handled for an invalid event")

    monkeypatch.setattr(whatsapp_consumer, "handle_message", no_turn)
    out = whatsapp_consumer.lambda_handler(event, LocalContext("cadencia-orquestrador-whatsapp", timeout_s=10))
    assert out["ok"] is False and out["erro"]["codigo"] == "entrada_invalida"


def test_every_fixed_reason_has_its_text():
    from canal_whatsapp.models import FixedReason
    from canal_whatsapp.texts import FIXED_REPLIES

    assert set(FIXED_REPLIES) == set(FixedReason) and all(FIXED_REPLIES.values())
