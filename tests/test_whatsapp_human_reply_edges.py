"""cadencia-resposta-atendente is its own trust boundary: whatever the event, a typed
answer; an event that is not exactly ``{conversaId, texto}`` under their rules, or a
conversation that does not exist, writes nothing and sends nothing; nothing personal
reaches its logs."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator import human_reply_handler
from orchestrator.invokers.local import LocalContext, function_environment
from scripts.local_stack.aws import session_client

pytestmark = pytest.mark.stack

FUNCTION = "cadencia-resposta-atendente"
VALID_CONV = "wa-1001-20260101"


@pytest.fixture(scope="module")
def invoke(local_stack):
    # No channel: a send would go nowhere (an unroutable Graph URL), and none may be attempted.
    env = {**local_stack.aws_environment(), "LEDGER_TABLE": local_stack.ledger_table,
           "WHATSAPP_GRAPH_URL": "http://127.0.0.1:9/v23.0", "WHATSAPP_ACCESS_TOKEN_NAME": "nenhum"}

    def call(event):
        with function_environment(env):
            human_reply_handler.reset()
            try:
                return human_reply_handler.lambda_handler(event, LocalContext(FUNCTION, timeout_s=30))
            finally:
                human_reply_handler.reset()
    return call


def _items(local_stack) -> int:
    ddb = session_client("dynamodb", local_stack.aws_endpoint)
    return ddb.scan(TableName=local_stack.ledger_table, Select="COUNT")["Count"]


HOSTILE = [
    None, [], "{}", json.dumps({"conversaId": VALID_CONV, "texto": "oi"}), 7, True,
    {}, {"conversaId": VALID_CONV}, {"texto": "oi"},
    {"conversaId": VALID_CONV, "texto": "oi", "para": "5511999999999"},  # no recipient from the event
    {"conversaId": VALID_CONV, "texto": "oi", "acao": "responder"},
    {"conversaId": 1001, "texto": "oi"}, {"conversaId": True, "texto": "oi"}, {"conversaId": None, "texto": "oi"},
    {"conversaId": VALID_CONV + "\n", "texto": "oi"}, {"conversaId": "wa#1001", "texto": "oi"},
    {"conversaId": "x" * 10_000, "texto": "oi"},
    {"conversaId": VALID_CONV, "texto": ""}, {"conversaId": VALID_CONV, "texto": "   "},
    {"conversaId": VALID_CONV, "texto": 42}, {"conversaId": VALID_CONV, "texto": ["oi"]},
    {"conversaId": VALID_CONV, "texto": "a" * 4001}, {"conversaId": VALID_CONV, "texto": "oi\u0000"},
    {"conversaId": VALID_CONV, "texto": "oi\u202eiz"}, {"conversaId": VALID_CONV, "texto": "o\u200bi"},
    {"conversaId": VALID_CONV, "texto": "oi\x1b[2J"}, {"conversaId": VALID_CONV, "texto": "x" * 5_000_000},
]


@pytest.mark.parametrize("event", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_event_gets_a_typed_small_error_and_writes_nothing(local_stack, invoke, event):
    before = _items(local_stack)
    answer = invoke(event)
    assert answer["ok"] is False and answer["erro"]["codigo"] == "entrada_invalida"
    assert len(json.dumps(answer)) < 2000
    assert _items(local_stack) == before


def test_a_conversation_that_does_not_exist_writes_nothing(local_stack, invoke):
    before = _items(local_stack)
    answer = invoke({"conversaId": "wa-1001-19990101", "texto": "Olá!"})
    assert answer == {"ok": False, "erro": {"codigo": "conversa_inexistente", "mensagem": "Conversa não encontrada."}}
    assert _items(local_stack) == before


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner,
                                                                                  max_size=3), max_leaves=8)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=st.dictionaries(st.sampled_from(["conversaId", "texto", "clienteId", "para"]) | st.text(max_size=8),
                             _json | st.text(max_size=50), max_size=4))
def test_any_event_gets_a_typed_answer_and_only_a_real_waiting_conversation_changes(local_stack, invoke, event):
    before = _items(local_stack)
    answer = invoke(event)
    assert answer["ok"] is False  # none of these conversations exists, so nothing can succeed
    assert answer["erro"]["codigo"] in ("entrada_invalida", "conversa_inexistente")
    assert _items(local_stack) == before


def test_nothing_personal_reaches_the_logs(local_stack, invoke, capsys):
    capsys.readouterr()
    invoke({"conversaId": "wa-1001-19990101", "texto": "meu email é fulana@example.com, tel 5511987654321"})
    invoke({"conversaId": "wa-1001-19990101", "texto": "fulana@example.com\u0000"})
    logs = capsys.readouterr()
    assert "fulana@example.com" not in logs.out + logs.err and "5511987654321" not in logs.out + logs.err
