"""The gateway's ``Idempotency-Key`` is at most 255 characters (Stripe's limit),
whatever ids the edges accept: a conversation id may have 256 characters and an
order id 64, so Lab 87's ``{conversaId}#{pedidoId}#reembolso`` reaches 331."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from cadencia_shared.catalog import EMITIR_REEMBOLSO
from cadencia_shared.ledger import refund_idempotency_key
from cadencia_shared.models import CONVERSATION_ID_PATTERN, ORDER_ID_PATTERN

LONGEST_CONVERSATION = 256
LONGEST_ORDER = 64


def test_the_longest_ids_the_edges_accept_make_a_key_over_the_gateway_limit():
    """The premise: both maxima are what the shared patterns allow."""
    assert "{1,256}" in CONVERSATION_ID_PATTERN and "{1,64}" in ORDER_ID_PATTERN
    assert len(refund_idempotency_key("c" * LONGEST_CONVERSATION, "9" * LONGEST_ORDER)) == 331


def test_a_refund_on_a_maximum_length_conversation_id_is_debited_once(tools, gateway, erp):
    conv = ("c" + uuid.uuid4().hex).ljust(LONGEST_CONVERSATION, "x")
    out = tools(EMITIR_REEMBOLSO, {"conversaId": conv, "clienteId": 1001, "pedidoId": "4821", "valor": 10.0})
    assert out["ok"] is True and out["resultado"] == "executado", out
    assert out["dados"]["chaveIdempotencia"] == refund_idempotency_key(conv, "4821")  # Lab 87's field as stored
    debits = gateway.debits()
    assert len(debits) == 1 and len(debits[0]["idempotencyKey"]) <= 255
    again = tools(EMITIR_REEMBOLSO, {"conversaId": conv, "clienteId": 1001, "pedidoId": "4821", "valor": 10.0})
    assert again["resultado"] == "bloqueado_por_idempotencia", again
    assert len(gateway.debits()) == 1


_CONV = st.from_regex(CONVERSATION_ID_PATTERN.replace(r"\A", "^").replace(r"\Z", "$"), fullmatch=True)
_ORDER = st.from_regex(ORDER_ID_PATTERN.replace(r"\A", "^").replace(r"\Z", "$"), fullmatch=True)


@given(_CONV, _ORDER, _CONV, _ORDER)
def test_the_wire_key_fits_is_stable_and_keeps_distinct_keys_distinct(conv, order, other_conv, other_order):
    from emitir_reembolso.gateway import WIRE_KEY_MAX, wire_idempotency_key

    chave = refund_idempotency_key(conv, order)
    wire = wire_idempotency_key(chave)
    assert len(wire) <= WIRE_KEY_MAX and wire == wire_idempotency_key(chave)
    if len(chave) <= WIRE_KEY_MAX:
        assert wire == chave  # Lab 87's key unchanged on the wire
    other = refund_idempotency_key(other_conv, other_order)
    if other != chave:
        assert wire_idempotency_key(other) != wire


def test_the_maximum_length_ids_get_a_digest_key_and_normal_ids_keep_theirs():
    from emitir_reembolso.gateway import wire_idempotency_key

    longest = refund_idempotency_key("c" * LONGEST_CONVERSATION, "9" * LONGEST_ORDER)
    assert len(wire_idempotency_key(longest)) == 81 and "#" not in wire_idempotency_key(longest)
    assert wire_idempotency_key("conv-87#4821#reembolso") == "conv-87#4821#reembolso"
