"""The ingress's assertion on every queued body (canal_whatsapp.assertion) and the
consumer's refusal of anything it does not vouch for: the pure functions with hostile
inputs, the consumer's decision with an injected clock, and the real consumer path on
the local stack (scripts/selo_fila.py: forged messages put straight on the queue)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal_whatsapp import assertion
from canal_whatsapp.queue_timing import INBOUND_RETENTION_S, max_assertion_age_s, queue_timing

KEY = "chave-da-fila-de-teste"
NOW = 1_800_000_000
FIELDS = {"tipo": "texto", "mensagemId": "wamid.ABC", "waId": "5511987654321", "phoneNumberId": "106540352242922",
          "conversaId": "wa-1001-20270115", "clienteId": 1001, "mensagem": "qual o status do pedido 4821?"}
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                 max_size=3), max_leaves=5)


def _verify(body: str, now: float = NOW, max_age_s: int = 3600):
    return assertion.verify(body, KEY, now_s=now, max_age_s=max_age_s)


def test_a_signed_body_verifies_to_exactly_its_fields():
    body = assertion.sign(FIELDS, KEY, NOW)
    parsed = json.loads(body)
    assert parsed["emitidoEm"] == NOW and len(parsed["assercao"]) == 64
    assert _verify(body) == FIELDS


@given(field=st.sampled_from([*FIELDS, "emitidoEm"]), value=_JSON)
@settings(max_examples=300, deadline=None)
def test_any_field_of_a_signed_body_changed_is_refused(field, value):
    signed = json.loads(assertion.sign(FIELDS, KEY, NOW))
    if signed[field] == value and type(signed[field]) is type(value):
        return  # not a change
    assert isinstance(_verify(json.dumps({**signed, field: value})), assertion.Refusal)


@given(field=st.sampled_from([*FIELDS, "emitidoEm"]))
def test_a_field_removed_or_one_added_is_refused(field):
    signed = json.loads(assertion.sign(FIELDS, KEY, NOW))
    assert isinstance(_verify(json.dumps({k: v for k, v in signed.items() if k != field})), assertion.Refusal)
    assert _verify(json.dumps({**signed, "extra": 1})) is assertion.Refusal.MISMATCH


@pytest.mark.parametrize(("body", "reason"), [
    (json.dumps(FIELDS), assertion.Refusal.MISSING),
    (json.dumps({"reenvio": "x#y"}), assertion.Refusal.MISSING),
    (json.dumps({**FIELDS, "emitidoEm": NOW, "assercao": "z" * 64}), assertion.Refusal.MALFORMED),
    (json.dumps({**FIELDS, "assercao": "0" * 64}), assertion.Refusal.NO_ISSUE_TIME),
    (json.dumps({**FIELDS, "emitidoEm": True, "assercao": "0" * 64}), assertion.Refusal.NO_ISSUE_TIME),
    (assertion.sign(FIELDS, "outra-chave", NOW), assertion.Refusal.MISMATCH),
    ("[" * 100_000, assertion.Refusal.NOT_AN_OBJECT),
    ("[]", assertion.Refusal.NOT_AN_OBJECT),
    ("não é json", assertion.Refusal.NOT_AN_OBJECT),
])
def test_a_forged_body_is_refused_with_its_typed_reason(body, reason):
    assert _verify(body) is reason


def test_the_issue_time_is_bounded_both_ways_by_the_injected_clock():
    body = assertion.sign(FIELDS, KEY, NOW)
    assert _verify(body, now=NOW + 3600) == FIELDS
    assert _verify(body, now=NOW + 3601) is assertion.Refusal.STALE
    assert _verify(body, now=NOW - assertion.CLOCK_SKEW_S) == FIELDS
    assert _verify(body, now=NOW - assertion.CLOCK_SKEW_S - 1) is assertion.Refusal.FUTURE


def test_nothing_is_signed_or_verified_with_an_empty_key():
    with pytest.raises(ValueError):
        assertion.sign(FIELDS, "", NOW)
    with pytest.raises(ValueError):
        assertion.verify(assertion.sign(FIELDS, KEY, NOW), "", now_s=NOW, max_age_s=60)


@pytest.mark.parametrize("turn_timeout_s", [10, 60, 120, 300, 900])
def test_the_age_bound_outlasts_every_legitimate_message_on_the_queue(turn_timeout_s):
    """A legitimate message is read at the latest before SQS deletes it (the retention)
    and before its last receive: the bound exceeds both, whatever the turn's timeout."""
    from orchestrator.whatsapp_consumer import MAX_ASSERTION_AGE_S

    timing = queue_timing(turn_timeout_s=turn_timeout_s, lease_s=900)
    assert max_assertion_age_s(timing) <= MAX_ASSERTION_AGE_S
    assert MAX_ASSERTION_AGE_S > INBOUND_RETENTION_S
    assert timing.max_receives * timing.visibility_s < MAX_ASSERTION_AGE_S


def _record(body: str, arn: str = "arn:aws:sqs:us-east-1:1:cadencia-whatsapp-entrada.fifo") -> dict:
    return {"messageId": "m-1", "receiptHandle": "r-1", "body": body, "attributes": {}, "messageAttributes": {},
            "md5OfBody": "x", "eventSource": "aws:sqs", "eventSourceARN": arn, "awsRegion": "us-east-1"}


@pytest.fixture
def consumer(monkeypatch):
    """The consumer's record path with its key, clock and effects seen: what ran is recorded."""
    from orchestrator import whatsapp_consumer

    ran: list[object] = []
    monkeypatch.setattr(whatsapp_consumer, "queue_key", lambda settings: KEY)
    monkeypatch.setattr(whatsapp_consumer, "clock", lambda: NOW)
    monkeypatch.setattr(whatsapp_consumer, "handle_message", lambda message, deadline: ran.append(message))
    monkeypatch.setattr(whatsapp_consumer, "resend", lambda request, deadline: ran.append(request))
    monkeypatch.setenv("WHATSAPP_RESEND_QUEUE_URL", "http://localhost/1/cadencia-whatsapp-reenvios")

    def call(body: str, arn: str | None = None):
        from orchestrator.invokers.local import LocalContext

        event = {"Records": [_record(body, arn) if arn else _record(body)]}
        return whatsapp_consumer.lambda_handler(event, LocalContext("cadencia-orquestrador-whatsapp", timeout_s=10))

    return call, ran


def test_the_consumer_runs_a_body_the_ingress_signed(consumer):
    call, ran = consumer
    assert call(assertion.sign(FIELDS, KEY, NOW - max_assertion_age_s(queue_timing(turn_timeout_s=900,
                                                                                   lease_s=900)))) \
        == {"batchItemFailures": []}
    assert len(ran) == 1 and ran[0].clienteId == 1001 and ran[0].waId == FIELDS["waId"]


@pytest.mark.parametrize("case", ["none", "other_key", "customer", "reply_to", "stale", "resend_body"])
def test_the_consumer_acknowledges_a_forged_body_and_runs_nothing(consumer, case, capfd, caplog):
    from orchestrator.whatsapp_consumer import FORGED_QUEUE_MESSAGES, MAX_ASSERTION_AGE_S

    call, ran = consumer
    signed = json.loads(assertion.sign(FIELDS, KEY, NOW))
    body = {
        "none": json.dumps(FIELDS),
        "other_key": assertion.sign(FIELDS, "outra-chave", NOW),
        "customer": json.dumps({**signed, "clienteId": 1002}),
        "reply_to": json.dumps({**signed, "waId": "5561955000001"}),
        "stale": assertion.sign(FIELDS, KEY, NOW - MAX_ASSERTION_AGE_S - 1),
        "resend_body": json.dumps({"reenvio": "wamid.ABC"}),
    }[case]
    capfd.readouterr()
    assert call(body) == {"batchItemFailures": []}  # acknowledged: never retried
    assert ran == []
    out = capfd.readouterr().out
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    [metric] = [m for m in lines if FORGED_QUEUE_MESSAGES in m]
    assert metric[FORGED_QUEUE_MESSAGES] == [1] or metric[FORGED_QUEUE_MESSAGES] == 1
    assert metric["Motivo"] in {r.value for r in assertion.Refusal}
    [log] = [r for r in caplog.records if r.getMessage() == "queue message refused: not asserted by the ingress"]
    assert log.motivo == metric["Motivo"]
    # Neither the reply address, the customer nor the text reaches the log or the metric.
    logged = out + caplog.text + json.dumps([vars(r) for r in caplog.records], default=str)
    assert all(v not in logged for v in ("5511987654321", "5561955000001", "pedido 4821", "clienteId"))


def test_only_the_resend_queue_s_records_are_read_as_resends(consumer):
    call, ran = consumer
    body = json.dumps({"reenvio": "wamid.ABC"})
    assert call(body, arn="arn:aws:sqs:us-east-1:1:cadencia-whatsapp-reenvios") == {"batchItemFailures": []}
    assert [type(r).__name__ for r in ran] == ["ResendRequest"]


@pytest.mark.stack
def test_forged_messages_on_the_real_queue_run_nothing(local_stack, gateway):
    """The attack as reproduced: forged bodies naming customer 1001 put straight on the
    inbound queue, read by the real consumer process: each refused for its reason, 0
    turns, 0 sends, 0 debits; the message the ingress signed after them is answered."""
    from scripts import selo_fila
    from scripts.harness.scripted_model import ScriptedModelServer

    with ScriptedModelServer() as model:
        rows, debits, answered = selo_fila.run(local_stack, model)
    assert answered, "the signed control message was not answered: the consumer did not run"
    assert [(r.case, r.reason, r.turns, r.sends) for r in rows] == [
        (r.case, r.expected_reason, 0, 0) for r in rows]
    assert len(rows) == 6 and debits == 0


@pytest.mark.stack
def test_selo_fila_prints_every_forged_message_refused_and_exits_zero(local_stack):
    """The script as a person runs it, against the running local stack."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "scripts.selo_fila"], cwd=root, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "COLUMNS": "200",
                                            "PYTHONPATH": f"{root}{os.pathsep}{root / 'functions'}"})
    assert done.returncode == 0, done.stdout + done.stderr
    for case in ("sem asserção", "outra chave", "cliente trocado", "destino trocado", "expirada",
                 "reenvio na fila de entrada"):
        [line] = [row for row in done.stdout.splitlines() if case in row]
        assert " 0 " in line and "ok" in line and "FALHOU" not in line
    assert "débitos no gateway durante a execução: 0" in done.stdout


@pytest.mark.parametrize(("rows", "debits", "answered"), [
    ([("expirada", "expirada", None, 0, 0)], 0, True),  # not refused
    ([("expirada", "expirada", "expirada", 1, 0)], 0, True),  # a turn ran
    ([("expirada", "expirada", "expirada", 0, 1)], 0, True),  # a message was sent
    ([("expirada", "expirada", "expirada", 0, 0)], 1, True),  # a debit
    ([("expirada", "expirada", "expirada", 0, 0)], 0, False),  # the consumer never ran
])
def test_selo_fila_exits_non_zero_when_anything_had_an_effect(monkeypatch, rows, debits, answered):
    from scripts import selo_fila

    class Model:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(selo_fila, "running_stack", lambda console: object())
    monkeypatch.setattr(selo_fila, "ScriptedModelServer", Model)
    monkeypatch.setattr(selo_fila, "run", lambda state, model: ([selo_fila.Row(*r) for r in rows], debits, answered))
    assert selo_fila.main() == 1
    monkeypatch.setattr(selo_fila, "run", lambda state, model: (
        [selo_fila.Row("expirada", "expirada", "expirada", 0, 0)], 0, True))
    assert selo_fila.main() == 0
