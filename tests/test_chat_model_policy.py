"""The chat's scripted model on hostile text: whatever the customer writes, it answers
one protocol-valid response (one tool call, or the final answer), and each call's
input is one the orchestrator can validate — never a crash of the model server."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.output_contract import REPLY_TOOL, tool_definition
from scripts.local_stack.whatsapp_intents import Intent, amount_in, intent_of, profile_changes
from scripts.local_stack.whatsapp_model import ChatPolicy

TOOLS = [tool_definition(strict=True)]
_PIECES = st.sampled_from(["quero reembolso", "do pedido 4821", "pedido 12", "R$ 50,00", "de 0 reais", "já caiu",
                           "muda meu email para", "a@b.co", "telefone", "+55 11 98765-4321", "endereço", "para",
                           "atendente", "?", "pedido 999999999999999", "R$ 99999999", "reembolso", "ÃÉ", "\u200b"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=20)), max_size=8).map(" ".join))
def test_any_customer_text_gets_one_protocol_valid_response(text):
    response = ChatPolicy().respond({"messages": [{"role": "user", "content": text}], "tools": TOOLS})
    calls = [b for b in response["content"] if b["type"] == "tool_use"]
    assert response["stop_reason"] == "tool_use" and len(calls) == 1
    if calls[0]["name"] == REPLY_TOOL:
        assert calls[0]["input"]["texto"]
    else:
        assert intent_of(text) in (Intent.STATUS, Intent.REFUND, Intent.PROFILE, Intent.REFUND_DONE)


def test_the_intents_read_from_portuguese_text():
    assert intent_of("Quero REEMBOLSO do pedido nº 4821") is Intent.REFUND
    assert intent_of("já caiu o reembolso?") is Intent.REFUND_DONE
    assert intent_of("quero falar com um atendente") is Intent.PERSON
    assert intent_of("muda meu e-mail para ana@x.com.br") is Intent.PROFILE
    assert intent_of("status do pedido 4821") is Intent.STATUS
    assert amount_in("reembolso de R$ 1234,5 do pedido 1") == __import__("decimal").Decimal("1234.50")
    assert amount_in("quero reembolso do pedido 4821") is None
    assert profile_changes("troca meu telefone para (11) 98765-4321") == {"telefone": "+5511987654321"}
    assert profile_changes("muda meu endereço para Rua Nova, 5, São Paulo - SP.") == {
        "endereco": "Rua Nova, 5, São Paulo - SP"}
