"""The webhook, attacked over HTTP: the real ingress handler served on loopback
(its own process, as a Function URL event), the real ERP lookup as the channel's
own DB user, and the real SQS FIFO queue on moto. Nothing consumes the queue
here, so "nothing enqueued" is read straight from it."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from scripts.local_stack.whatsapp_channel import LocalChannel
from scripts.local_stack.whatsapp_fake import media_message, new_wamid, notification, text_message
from tests.support.whatsapp import ANA, BRUNO, UNKNOWN, day_ts, drain

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def channel(local_stack):
    from scripts.local_stack import postgres

    postgres.apply_sql(local_stack.postgres, ("demo.sql",))
    with LocalChannel(local_stack, model_env={}, consumers=0, log_level="INFO") as ch:
        yield ch


@pytest.fixture
def queue(channel):
    drain(channel.sqs, channel.queue_url, channel.queue_key)
    return lambda: drain(channel.sqs, channel.queue_url, channel.queue_key)


def _signed(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _body(wa_id: str = ANA, text: str = "Olá", **kwargs) -> bytes:
    return json.dumps(notification([text_message(wa_id, text, timestamp=day_ts(0), **kwargs)])).encode()


def _ingress_log(channel: LocalChannel) -> str:
    return "".join(p.read_text() for p in Path(channel.dir).glob("ingress-*.log"))


def test_a_valid_signature_enqueues_the_message_bound_to_its_customer(channel, queue):
    wamid = new_wamid()
    body = _body(wamid=wamid, text="  quero saber do meu pedido  ")
    assert channel.webhook.post_raw(body, _signed(body, channel.app_secret)) == 200
    [got] = queue()
    assert got["body"] == {"tipo": "texto", "mensagemId": wamid, "waId": ANA, "phoneNumberId": "106540352242922",
                           "conversaId": "wa-1001-20260302", "clienteId": 1001,
                           "mensagem": "quero saber do meu pedido"}
    assert got["group"] == "wa-cliente-1001"  # one FIFO group per customer: order across days
    assert got["dedup"] == hashlib.sha256(wamid.encode()).hexdigest()


@pytest.mark.parametrize("case", ["missing", "wrong_secret", "one_byte_altered", "sha1_prefix", "no_prefix",
                                  "uppercase_prefix_other_alg", "truncated", "empty_secret", "two_signatures"])
def test_a_bad_signature_is_401_and_enqueues_nothing(channel, queue, case):
    body = _body()
    good = _signed(body, channel.app_secret)
    sent_body, header = body, {
        "missing": None,
        "wrong_secret": _signed(body, "another-app-secret"),
        "one_byte_altered": good,
        "sha1_prefix": "sha1=" + hmac.new(channel.app_secret.encode(), body, hashlib.sha1).hexdigest(),
        "no_prefix": good.removeprefix("sha256="),
        "uppercase_prefix_other_alg": "SHA512=" + good.removeprefix("sha256="),
        "truncated": good[:-2],
        "empty_secret": _signed(body, ""),
        "two_signatures": f"{good},{good}",
    }[case]
    if case == "one_byte_altered":
        sent_body = body.replace(b"Ol", b"Oi", 1)
        assert len(sent_body) == len(body) and sent_body != body
    assert channel.webhook.post_raw(sent_body, header) == 401
    assert queue() == []


def test_a_replayed_body_is_accepted_but_enqueued_once(channel, queue):
    body = _body()
    header = _signed(body, channel.app_secret)
    assert [channel.webhook.post_raw(body, header) for _ in range(3)] == [200, 200, 200]
    assert len(queue()) == 1  # SQS FIFO dedupe on the wamid; the ledger catches later replays


def test_oversized_and_malformed_requests_are_400_and_enqueue_nothing(channel, queue):
    big = json.dumps(notification([text_message(ANA, "x" * 4000, timestamp=day_ts(0))] * 40)).encode()
    assert len(big) > 128 * 1024
    signed = lambda b: channel.webhook.post_raw(b, _signed(b, channel.app_secret))  # noqa: E731
    assert signed(big) == 400
    assert signed(b"{not json") == 400
    assert signed(b"\xff\xfe") == 400
    assert signed(json.dumps({"object": "page", "entry": []}).encode()) == 400
    good = json.loads(_body())
    value = good["entry"][0]["changes"][0]["value"]
    # The envelope stays strict (a single message does not: see the tests below).
    for key, hostile in (("messages", "x"), ("messages", {"0": value["messages"][0]}), ("metadata", None),
                         ("messaging_product", "sms")):
        mutated = json.loads(json.dumps(good))
        mutated["entry"][0]["changes"][0]["value"][key] = hostile
        assert signed(json.dumps(mutated).encode()) == 400, (key, hostile)
    assert queue() == []
    log = _ingress_log(channel)
    for motivo in ("tamanho", "formato", "assinatura"):
        assert f'"Motivo": "{motivo}"' in log or f'"Motivo":"{motivo}"' in log, motivo


def _signed_post(channel: LocalChannel, messages: list[object]) -> int:
    """A notification as Meta builds it, but with any message list (hostile ones included)."""
    payload = notification([])
    payload["entry"][0]["changes"][0]["value"]["messages"] = messages
    body = json.dumps(payload).encode()
    return channel.webhook.post_raw(body, _signed(body, channel.app_secret))


def _by_id(got: list[dict]) -> dict[str, dict]:
    bodies = [m["body"] for m in got]
    assert len({b["mensagemId"] for b in bodies}) == len(bodies), "a message was enqueued twice"
    return {b["mensagemId"]: b for b in bodies}


def test_a_text_over_the_send_limit_is_answered_too_long_and_its_neighbours_are_enqueued(channel, queue):
    """4096 is the Cloud API's limit for what we *send*; a customer's text may be longer.
    It used to fail the whole notification (400): no reply to anyone in it."""
    before = text_message(BRUNO, "oi", timestamp=day_ts(0))
    long = text_message(ANA, "x" * 5000, timestamp=day_ts(0))
    after = text_message(ANA, "depois", timestamp=day_ts(0, 1))
    assert channel.webhook.post(notification([before, long, after])) == 200
    got = _by_id(queue())
    assert set(got) == {before["id"], long["id"], after["id"]}
    assert got[long["id"]] == {"tipo": "resposta_fixa", "motivo": "mensagem_longa_demais", "waId": ANA,
                               "mensagemId": long["id"], "phoneNumberId": "106540352242922",
                               "conversaId": "wa-1001-20260302"}
    assert got[before["id"]]["mensagem"] == "oi" and got[after["id"]]["mensagem"] == "depois"


_VALID = dict(text_message(ANA, "valida", timestamp=day_ts(0)))


@pytest.mark.parametrize(("hostile", "answered"), [
    ({**_VALID, "timestamp": 1767225600}, True),  # a number, not Meta's string
    ({**_VALID, "type": "Text"}, True),
    ({**_VALID, "text": {"body": 5}}, True),
    ({**_VALID, "text": {"body": ""}}, True),
    ({**_VALID, "text": "oi"}, True),
    ({**_VALID, "from": 5511987654321}, False),  # no address to answer: skipped
    ({**_VALID, "from": "5511987654321\n"}, False),
    ({**_VALID, "from": True}, False),
    ({**_VALID, "id": "wamid.x#y"}, False),
    ({k: v for k, v in _VALID.items() if k != "id"}, False),
    ("uma mensagem que nem é um objeto", False),
    (None, False),
])
def test_a_malformed_message_does_not_drop_the_valid_ones_beside_it(channel, queue, hostile, answered):
    before = text_message(BRUNO, "antes", timestamp=day_ts(0))
    after = text_message(ANA, "depois", timestamp=day_ts(0, 1))
    if isinstance(hostile, dict) and hostile.get("id") == _VALID["id"]:  # a fresh id: FIFO dedupes on it
        hostile = {**hostile, "id": new_wamid()}
    assert _signed_post(channel, [before, hostile, after]) == 200
    got = _by_id(queue())
    assert got.pop(before["id"])["mensagem"] == "antes" and got.pop(after["id"])["mensagem"] == "depois"
    if answered:  # the sender and the id are readable: the customer is told, by code
        assert list(got.values()) == [{"tipo": "resposta_fixa", "motivo": "mensagem_malformada", "waId": ANA,
                                       "mensagemId": hostile["id"], "phoneNumberId": "106540352242922"}]
    else:
        assert got == {}
    log = _ingress_log(channel)
    assert "malformed message" in log and ANA not in log and BRUNO not in log


def test_notifications_mixing_valid_and_hostile_messages_enqueue_every_valid_one_once(channel, queue):
    """Real adapters (SQS on moto, the ERP as the channel's DB user, the secrets):
    whatever hostile messages sit beside them, every valid message is enqueued exactly
    once, as what it is; the answer is 200; a hostile one is at most a fixed reply."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from canal_whatsapp import handler
    from canal_whatsapp.ingress import HttpRequest
    from orchestrator.invokers.local import function_environment

    texts = st.one_of(st.text(min_size=1, max_size=40), st.integers(3990, 9000).map(lambda n: "y" * n))
    valid = st.builds(lambda wa, text, s: text_message(wa, text, timestamp=day_ts(0, s)),
                      st.sampled_from([ANA, BRUNO, UNKNOWN]), texts, st.integers(0, 3600))
    junk_fields = st.dictionaries(st.sampled_from(["from", "id", "timestamp", "type", "text"]), _json_values(),
                                  min_size=1, max_size=3)
    hostile = st.one_of(_json_values(), st.builds(lambda o: {**text_message(ANA, "h", timestamp=day_ts(0)), **o},
                                                  junk_fields))
    kinds = st.lists(st.one_of(valid.map(lambda m: ("valid", m)), hostile.map(lambda m: ("hostile", m))),
                     min_size=1, max_size=8)

    @given(kinds)
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    def attack(messages):
        payload = notification([])
        payload["entry"][0]["changes"][0]["value"]["messages"] = [m for _, m in messages]
        body = json.dumps(payload).encode()
        with function_environment(channel.ingress_environment()):
            handler.reset()
            response = handler.ingress().handle(HttpRequest(
                method="POST", body=body, headers={"x-hub-signature-256": _signed(body, channel.app_secret)}))
        assert response.status == 200
        got = _by_id(queue())
        valid_ids = [m["id"] for kind, m in messages if kind == "valid"]
        assert set(valid_ids) <= set(got)
        for kind, m in messages:
            if kind != "valid":
                continue
            queued = got[m["id"]]
            if m["from"] == UNKNOWN:
                assert queued["motivo"] == "numero_desconhecido"
            elif len(m["text"]["body"].strip()) > 4000:
                assert queued["motivo"] == "mensagem_longa_demais"
        for extra in set(got) - set(valid_ids):
            assert got[extra]["tipo"] == "resposta_fixa" and "mensagem" not in got[extra]

    attack()
    handler.reset()
    queue()


@pytest.mark.parametrize("timestamp", ["253402300800", "999999999999", "10000000000000"])
def test_a_timestamp_past_year_9999_is_a_malformed_message_not_a_5xx(channel, queue, timestamp):
    """Such a timestamp passed the model and crashed the conversation id: 502, which
    Meta retries for days, and every message beside it unanswered."""
    hostile = {**text_message(ANA, "do futuro", timestamp=day_ts(0)), "timestamp": timestamp}
    valid = text_message(BRUNO, "oi", timestamp=day_ts(0))
    assert _signed_post(channel, [hostile, valid]) == 200
    got = _by_id(queue())
    assert got[valid["id"]]["mensagem"] == "oi"
    assert got[hostile["id"]]["motivo"] == "mensagem_malformada" and "conversaId" not in got[hostile["id"]]


def test_a_correctly_signed_body_is_never_answered_5xx(channel, queue):
    """Hypothesis over each field Meta's message carries — the timestamp's whole
    12-digit range and beyond, ids, numbers, types, texts — in the real handler with
    the real adapters: an exception there is the Function URL's 502."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from canal_whatsapp import handler
    from orchestrator.invokers.local import LocalContext, function_environment

    # A message as Meta sends it, with any 12/13-digit timestamp (most are past year
    # 9999), then up to two fields replaced by junk or removed.
    timestamps = st.one_of(st.integers(0, 10**13).map(str), st.integers(253402300700, 10**12 - 1).map(str),
                           st.from_regex(r"\A[0-9]{1,13}\Z"))
    base = st.builds(lambda wa, text, ts, kind: {**text_message(wa, text), "timestamp": ts, "type": kind},
                     st.sampled_from([ANA, BRUNO, UNKNOWN]),
                     st.one_of(st.text(min_size=1, max_size=50), st.integers(3990, 5000).map(lambda n: "z" * n)),
                     timestamps, st.sampled_from(["text", "text", "image", "reaction", "unsupported"]))
    hostile = st.one_of(_json_values(), st.integers(-10**13, 10**13), st.from_regex(r"\A[0-9]{1,22}\Z"),
                        st.text(max_size=300), st.just(None))
    overrides = st.dictionaries(st.sampled_from(["timestamp", "from", "id", "type", "text"]),
                                st.one_of(hostile, st.just(...)), max_size=2)
    message = st.builds(lambda m, o: {k: v for k, v in {**m, **o}.items() if v is not ...}, base, overrides)
    lambda_context = LocalContext("cadencia-canal-whatsapp-entrada", timeout_s=10)

    @given(st.lists(message, min_size=1, max_size=5))
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    def attack(messages):
        payload = notification([])
        payload["entry"][0]["changes"][0]["value"]["messages"] = messages
        body = json.dumps(payload)
        event = {"requestContext": {"http": {"method": "POST"}}, "body": body, "isBase64Encoded": False,
                 "headers": {"X-Hub-Signature-256": _signed(body.encode(), channel.app_secret)}}
        with function_environment(channel.ingress_environment()):
            handler.reset()
            answer = handler.lambda_handler(event, lambda_context)  # raising here is the 502
        assert answer["statusCode"] == 200
        queue()

    attack()
    handler.reset()
    queue()


def test_a_burst_straddling_midnight_in_sao_paulo_stays_in_one_fifo_group_in_order(channel, queue):
    """Two conversations (one per São Paulo day), but one FIFO group per customer: the
    message after midnight is never answered before the one before it."""
    midnight = day_ts(1) + 12 * 3600  # day_ts is noon in São Paulo
    before = text_message(ANA, "quero reembolso do pedido 4821", timestamp=midnight - 2)
    after = text_message(ANA, "é o de R$ 80", timestamp=midnight + 1)
    assert channel.webhook.post(notification([before, after])) == 200
    got = queue()
    assert [g["body"]["mensagemId"] for g in got] == [before["id"], after["id"]]
    assert [g["body"]["conversaId"] for g in got] == ["wa-1001-20260303", "wa-1001-20260304"]
    assert {g["group"] for g in got} == {"wa-cliente-1001"}


def test_handshake(channel):
    assert channel.webhook.handshake("subscribe", channel.verify_token, "1158201444") == (200, "1158201444")
    assert channel.webhook.handshake("subscribe", "wrong-token", "1158201444")[0] == 403
    assert channel.webhook.handshake("unsubscribe", channel.verify_token, "1158201444")[0] == 403
    assert channel.webhook.handshake("subscribe", channel.verify_token, "<script>alert(1)</script>")[0] == 400
    assert channel.webhook.handshake("subscribe", "", "1")[0] == 403


def test_statuses_only_is_200_and_enqueues_nothing(channel, queue):
    payload = notification([], statuses=[{"id": new_wamid(), "status": "delivered", "timestamp": "1767225600",
                                          "recipient_id": ANA}])
    assert channel.webhook.post(payload) == 200
    assert queue() == []


def test_unknown_numbers_and_non_text_get_fixed_replies_and_reactions_nothing(channel, queue):
    unknown = text_message(UNKNOWN, "me devolve o dinheiro do pedido 4821", timestamp=day_ts(0))
    image = {**media_message(ANA, "image"), "timestamp": str(day_ts(0))}
    reaction = {"from": ANA, "id": new_wamid(), "timestamp": str(day_ts(0)), "type": "reaction",
                "reaction": {"message_id": new_wamid(), "emoji": "👍"}}
    assert channel.webhook.post(notification([unknown, image, reaction])) == 200
    got = {m["body"]["mensagemId"]: m["body"] for m in queue()}
    assert set(got) == {unknown["id"], image["id"]}
    assert got[unknown["id"]] == {"tipo": "resposta_fixa", "motivo": "numero_desconhecido", "waId": UNKNOWN,
                                  "mensagemId": unknown["id"], "phoneNumberId": "106540352242922"}
    assert "mensagem" not in got[unknown["id"]] and "clienteId" not in got[unknown["id"]]
    assert got[image["id"]]["motivo"] == "tipo_nao_suportado" and got[image["id"]]["conversaId"] == "wa-1001-20260302"


def test_nothing_personal_reaches_the_ingress_logs(channel, queue):
    text = "meu cpf é 123.456.789-00"
    assert channel.webhook.post(notification([text_message(ANA, text, timestamp=day_ts(0))])) == 200
    queue()
    log = _ingress_log(channel)
    assert ANA not in log and text not in log and channel.app_secret not in log and channel.verify_token not in log


def test_other_methods_are_refused(channel):
    import urllib.request
    from urllib.error import HTTPError

    with pytest.raises(HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(channel.ingress_url, method="PUT", data=b"x"), timeout=10)
    assert err.value.code == 405


def _json_values():
    from hypothesis import strategies as st

    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=30))
    return st.recursive(leaves, lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(max_size=12), c,
                                                                                                max_size=4)),
                        max_leaves=20)


def test_hostile_signed_payloads_never_crash_the_ingress_nor_enqueue(channel, queue):
    """Any JSON at all, correctly signed (only Meta could do that): 200 or 400, never an
    exception; and a 400 enqueues nothing. Real adapters: SQS on moto, the ERP as the
    channel's DB user, the secrets in (moto's) Secrets Manager."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from canal_whatsapp import handler
    from canal_whatsapp.ingress import HttpRequest
    from orchestrator.invokers.local import function_environment

    base = json.loads(_body())
    message = base["entry"][0]["changes"][0]["value"]["messages"][0]

    @given(st.one_of(
        _json_values(),
        st.fixed_dictionaries({"object": st.just("whatsapp_business_account"), "entry": _json_values()}),
        st.dictionaries(st.sampled_from(sorted(message)), _json_values(), max_size=4).map(
            lambda o: {**base, "entry": [{**base["entry"][0], "changes": [{"field": "messages", "value": {
                **base["entry"][0]["changes"][0]["value"], "messages": [{**message, **o}]}}]}]}),
    ))
    @settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
    def attack(payload):
        body = json.dumps(payload).encode()
        with function_environment(channel.ingress_environment()):
            handler.reset()
            response = handler.ingress().handle(HttpRequest(
                method="POST", body=body, headers={"x-hub-signature-256": _signed(body, channel.app_secret)}))
        assert response.status in (200, 400)
        enqueued = queue()  # drained after every example
        if response.status == 400:
            assert enqueued == []

    attack()
    handler.reset()
    queue()
