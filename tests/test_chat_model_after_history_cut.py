"""The stepped history cut (HISTORICO_MAX_MENSAGENS / HISTORICO_APOS_CORTE) may drop the turn
in which a refund was EXECUTED; the chat's scripted model reads its facts only from the
request's messages, so asked "já caiu o reembolso?" with no refund in them it asks which
order — it never tells the customer that no refund was asked (the ledger shows one)."""

from __future__ import annotations

import json

from orchestrator import history
from scripts.local_stack.whatsapp_model import NOTHING_ASKED_HERE, ChatPolicy

EXECUTED = {"ok": True, "ferramenta": "emitir_reembolso", "resultado": "executado",
            "dados": {"pedidoId": "4821", "valor": "189.90",
                      "mensagem": "Reembolso de R$ 189.90 do pedido 4821 emitido."}}


def test_the_chat_never_denies_a_refund_the_stepped_cut_dropped():
    messages = history.append_user_text([], "quero reembolso do pedido 4821")
    messages = history.extend(messages, [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_r1", "name": "emitir_reembolso",
                                           "input": {"pedidoId": "4821", "valor": 189.9}}]},
        {"role": "user", "content": [history.tool_result("toolu_r1", json.dumps(EXECUTED), is_error=False)]},
        {"role": "assistant", "content": [{"type": "text", "text": "O reembolso de R$ 189,90 foi emitido."}]}])
    for n in range(3):  # three more exchanges: past the cap of 6, cut to 3
        messages = history.append_user_text(messages, f"obrigado {n}")
        messages = history.extend(messages, [{"role": "assistant", "content": [{"type": "text", "text": "De nada!"}]}])
    messages = history.append_user_text(messages, "já caiu o reembolso?")
    sent = history.trim_in_steps(messages, 6, 3)  # what the orchestrator sends (loop._turn)
    answer = ChatPolicy().respond({"messages": sent, "tools": [{"name": "responder_cliente"}]})
    said = answer["content"][-1]["input"]["texto"]
    assert said == NOTHING_ASKED_HERE  # a question: the order, to look it up
    assert "não pedimos" not in said and "nenhum" not in said, "told no refund was asked; the ledger shows one"
