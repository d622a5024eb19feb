"""SEAL envelopes at the tool edge (cadencia_shared.seal): a call signed by the turn's
session is authorized once; every forgery is refused with its numeric code, and a
refused call consumes nothing (its jti stays unused, no jti item is written)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cadencia_shared.ledger import Ledger
from cadencia_shared.ledger.sessions import SessionLimits, SessionStore
from cadencia_shared.seal import ENVELOPE_FIELD, SealCode, Verifier, seal
from cadencia_shared.seal_approvals import ledger_approvals

NOW_S = 1_800_000_000.0
NOW_MS = int(NOW_S * 1000)
REFUND = {"pedidoId": "4821", "valor": 120.0, "conversaId": "conv-selo", "clienteId": 1001}


@pytest.fixture
def world(mocked_aws):
    now = [NOW_S]
    ledger = Ledger(mocked_aws["ledger"].table_name, mocked_aws["dynamodb"], clock=lambda: now[0])
    store = SessionStore(ledger.table)

    def session(conversation="conv-selo", customer=1001, tools=("emitir_reembolso", "consultar_status_pedido")):
        return store.open_session(conversation_id=conversation, customer_id=customer, tools=set(tools),
                                  limits=SessionLimits(), expires_at_ms=NOW_MS + 30_000)

    return {"now": now, "ledger": ledger, "store": store, "session": session,
            "verifier": Verifier(ledger.table, ledger_approvals(ledger))}


def _jti_items(world) -> int:
    client = world["ledger"].client
    items = client.scan(TableName=world["ledger"].table_name)["Items"]
    return sum(1 for i in items if i["pk"]["S"].startswith("jti#"))


def test_a_sealed_call_is_authorized_once(world):
    event = seal(REFUND, tool="emitir_reembolso", session=world["session"](), now_ms=NOW_MS)
    assert world["verifier"].verify("emitir_reembolso", event) is None
    again = world["verifier"].verify("emitir_reembolso", event)
    assert again.code is SealCode.REPLAYED and again.envelope_id == event[ENVELOPE_FIELD]["jti"]
    assert _jti_items(world) == 1


def _forge(world, how):
    s = world["session"]()
    event = seal(REFUND, tool="emitir_reembolso", session=s, now_ms=NOW_MS)
    return how(world, s, event) or event


def _other_key(world, s, event):
    other = world["session"]()  # another turn's key signs an envelope naming this session
    forged = seal(REFUND, tool="emitir_reembolso", session=other, now_ms=NOW_MS)
    forged[ENVELOPE_FIELD]["sessao"] = s.session_id
    return forged


def _closed(world, s, event):
    world["store"].close_session(s.session_id)


def _expired(world, s, event):
    world["now"][0] += 31


def _altered(world, s, event):
    event["valor"] = 900.0


def _set(key, value):
    def how(world, s, event):
        event[ENVELOPE_FIELD][key] = value
    return how


def _sealed(args, tool="emitir_reembolso", **kw):
    def how(world, s, event):
        session = world["session"](**kw)
        return seal(args, tool=tool, session=session, now_ms=NOW_MS)
    return how


FORGERIES = {
    "sem envelope": (lambda w, s, e: {k: v for k, v in e.items() if k != ENVELOPE_FIELD}, SealCode.ENVELOPE_MISSING),
    "envelope malformado": (_set("clienteId", "1001"), SealCode.ENVELOPE_MALFORMED),
    "versão desconhecida": (_set("v", "seal/v0"), SealCode.ENVELOPE_MALFORMED),
    "sessão inexistente": (_set("sessao", "nao-existe"), SealCode.SESSION_NOT_OPEN),
    "sessão fechada": (_closed, SealCode.SESSION_NOT_OPEN),
    "sessão expirada": (_expired, SealCode.EXPIRED),
    "assinatura adulterada": (_set("assinatura", "AAAA"), SealCode.BAD_SIGNATURE),
    "chave de outra sessão": (_other_key, SealCode.BAD_SIGNATURE),
    "campo assinado alterado": (_set("expiraEm", NOW_MS + 10**9), SealCode.BAD_SIGNATURE),
    "argumentos alterados após assinar": (_altered, SealCode.ARGUMENTS_CHANGED),
    "ferramenta não permitida": (_sealed(REFUND, tools=("consultar_status_pedido",)), SealCode.TOOL_NOT_ALLOWED),
    "outra conversa": (_sealed({**REFUND, "conversaId": "conv-outra"}), SealCode.WRONG_CONVERSATION),
    "outro cliente": (_sealed({**REFUND, "clienteId": 2002}), SealCode.WRONG_CUSTOMER),
    "acima do limite sem aprovação": (_sealed({**REFUND, "valor": 900.0}), SealCode.ABOVE_LIMIT),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_each_forgery_is_refused_with_its_code_and_consumes_nothing(world, name):
    how, code = FORGERIES[name]
    event = _forge(world, how)
    refusal = world["verifier"].verify("emitir_reembolso", copy.deepcopy(event))
    assert refusal is not None and refusal.code is code
    assert _jti_items(world) == 0


def test_a_call_for_another_tool_than_signed_is_refused(world):
    event = seal(REFUND, tool="emitir_reembolso", session=world["session"](), now_ms=NOW_MS)
    assert world["verifier"].verify("consultar_status_pedido", event).code is SealCode.TOOL_NOT_ALLOWED


def test_an_approval_that_binds_nothing_authorizes_nothing(world):
    above = {**REFUND, "valor": 900.0}
    event = seal(above, tool="emitir_reembolso", session=world["session"](), now_ms=NOW_MS, approval_id="nao-existe")
    assert world["verifier"].verify("emitir_reembolso", event).code is SealCode.APPROVAL_NOT_BINDING


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(envelope=st.one_of(st.none(), st.integers(), st.text(max_size=20),
                          st.dictionaries(st.sampled_from(["v", "sessao", "jti", "ferramenta", "argsSha256",
                                                           "conversaId", "clienteId", "emitidoEm", "expiraEm",
                                                           "assinatura", "extra"]),
                                          st.one_of(st.text(max_size=30), st.integers(), st.none()))))
def test_no_arbitrary_envelope_is_authorized(world, envelope):
    refusal = world["verifier"].verify("emitir_reembolso", {**REFUND, ENVELOPE_FIELD: envelope})
    assert refusal is not None
