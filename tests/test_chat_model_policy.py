"""The chat's scripted model on hostile text: whatever the customer writes, it answers
one protocol-valid response (one tool call, or the final answer), and each call's
input is one the orchestrator can validate — never a crash of the model server."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.output_contract import REPLY_TOOL, tool_definition
from scripts.local_stack.whatsapp_intents import Intent, amount_in, intent_of, profile_changes
from scripts.local_stack.whatsapp_model import NOT_FOUND, ChatPolicy

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


def test_a_second_chat_the_same_day_never_reuses_a_tool_call_id():
    """Two chats the same day continue one conversation (``wa-<customer>-<day>``) on a stack
    left up; the ledger refuses a repeated ``tool_use`` id, so every model process must
    number its ids apart from any other process's."""
    request = {"messages": [{"role": "user", "content": "pedido 4821"}], "tools": TOOLS}
    first, second = ChatPolicy().respond(request), ChatPolicy().respond(request)
    ids = [b["id"] for r in (first, second) for b in r["content"] if b["type"] == "tool_use"]
    assert len(ids) == 2 and ids[0] != ids[1]
    assert first["id"] != second["id"]


def test_a_controls_refusal_with_a_plain_string_code_is_read_as_the_order_not_found():
    """The controls answer ``{"erro": "<reason>"}`` (a string), the tools ``{"erro": {"codigo": …}}``."""
    request = {"tools": TOOLS, "messages": [
        {"role": "user", "content": "quero reembolso de R$ 10,00 do pedido 999"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "emitir_reembolso",
                                           "input": {"pedidoId": "999", "valor": "10.00"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                                      "content": '{"erro":"pedido_nao_encontrado"}'}]}]}
    response = ChatPolicy().respond(request)
    [call] = [b for b in response["content"] if b["type"] == "tool_use"]
    assert call["name"] == REPLY_TOOL and call["input"]["texto"] == NOT_FOUND
