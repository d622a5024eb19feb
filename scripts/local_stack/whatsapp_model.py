"""A scripted chat model for the channel (served by the harness's Messages-API server).

It does what the real model does, deterministically from the customer's Portuguese
text, through the real tool-use protocol (``tool_use`` blocks, then the
``responder_cliente`` final answer when the orchestrator offers it):

- "pedido 4821" → ``consultar_status_pedido``, then the status it answered;
- "quero reembolso do pedido 4821" (optionally "de R$ 50,00") → without an amount it
  reads the order's value with ``consultar_status_pedido`` first; then
  ``emitir_reembolso``; then it states what the tool answered as a typed statement
  (``declaracoes``: the code checks it against the ledger and writes the sentence), never
  in its own words. Asked again after a refusal or a failure, it calls again — the
  controls decide;
- "muda meu email para x@y.com" (telefone, endereço) → ``atualizar_cadastro``;
- "quero falar com um atendente" → a final answer with ``precisaDePessoa``;
- "já caiu o reembolso?" → from the conversation's own facts: the last
  ``emitir_reembolso`` result in its history (the orchestrator sends the history the
  ledger keeps), never a lookup of an order it does not need;
- anything else → it answers quoting the customer's text, so tests can see which
  message each reply belongs to.

Stateless: every answer depends only on the request. An answer the output contract
sends back is followed by one that claims nothing.
"""

from __future__ import annotations

import itertools
import secrets
from typing import Any

from .whatsapp_intents import (
    PROFILE_TOOL,
    REFUND_TOOL,
    REPLY_TOOL,
    STATUS_TOOL,
    Call,
    Conversation,
    Intent,
    amount_in,
    intent_of,
    order_in,
    profile_changes,
    read,
)

ECHO_PREFIX = "Recebi: "
PERSON_TEXT = "Certo! Vou chamar um atendente da Cadência para continuar com você por aqui."
NOT_FOUND = "Não encontrei esse pedido no seu cadastro. Pode conferir o número?"
# Free text never speaks of money, the record or a status (the code renders those sentences).
STATUS_LEAD = "Consultei o seu pedido."
CHECKED_LEAD = "Conferi aqui para você."
# Asked with no refund in the history it reads (a cut may have dropped one): it asks, it asserts nothing.
NOTHING_ASKED_HERE = "De qual pedido você fala? Me diga o número e eu confiro."
NOT_CHANGED = "Não consegui fazer essa alteração agora. Se preferir, peça para falar com um atendente."
_DECLINED = "recusado_pelo_gateway"
CANNOT_CONFIRM = "Não consigo confirmar isso por aqui agora. Se preferir, peça para falar com um atendente."
ASK_ORDER = "Claro! Qual é o número do pedido que você quer reembolsar?"
_EXECUTED, _ALREADY = "executado", "bloqueado_por_idempotencia"
_UNSETTLED = frozenset({"resultado_desconhecido", "em_processamento"})


class ChatPolicy:
    def __init__(self) -> None:
        # A per-process prefix: a chat started later the same day continues the same
        # conversation, whose ledger refuses a tool_use id it has already seen.
        self._run = secrets.token_hex(4)
        self._ids = itertools.count(1)

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        seen = read(request.get("messages", []))
        structured = any(tool.get("name") == REPLY_TOOL for tool in request.get("tools", []))
        if seen.refused_answers:
            return self._final(CANNOT_CONFIRM, structured)
        intent = intent_of(seen.last_text)
        if intent is Intent.PERSON:
            return self._final(PERSON_TEXT, structured, needs_person=True)
        if intent is Intent.REFUND:
            return self._refund(seen, structured)
        if intent is Intent.REFUND_DONE:
            return self._refund_done(seen, structured)
        if intent is Intent.PROFILE:
            return self._profile(seen, structured)
        if intent is Intent.STATUS:
            return self._status(seen, structured)
        return self._final(f"{ECHO_PREFIX}{seen.last_text}", structured)

    # -- the flows ---------------------------------------------------------------
    def _status(self, seen: Conversation, structured: bool) -> dict[str, Any]:
        order = order_in(seen.last_text)
        if not seen.turn:
            return self._call("Vou consultar o seu pedido.", STATUS_TOOL, {"pedidoId": order})
        last = seen.turn[-1]
        if last.result is not None and last.result.get("ok") and last.data.get("status"):
            return self._final(STATUS_LEAD, structured, statements=[
                {"tipo": "status_do_pedido", "pedidoId": str(last.data.get("pedidoId", order))}])
        return self._final(NOT_FOUND if _unknown_order(last) else CANNOT_CONFIRM, structured)

    def _refund(self, seen: Conversation, structured: bool) -> dict[str, Any]:
        order, asked = order_in(seen.last_text), amount_in(seen.last_text)
        if order is None:
            return self._final(ASK_ORDER, structured)
        if not seen.turn:
            if asked is None:  # the order's value is the default: read it first
                return self._call("Vou conferir o valor do pedido.", STATUS_TOOL, {"pedidoId": order})
            return self._call("Vou solicitar o reembolso.", REFUND_TOOL, {"pedidoId": order, "valor": float(asked)})
        last = seen.turn[-1]
        if last.name == STATUS_TOOL:
            value = last.data.get("valorPedido") if last.result and last.result.get("ok") else None
            if value is None:
                return self._final(NOT_FOUND if _unknown_order(last) else CANNOT_CONFIRM, structured)
            return self._call("Vou solicitar o reembolso.", REFUND_TOOL, {"pedidoId": order, "valor": float(value)})
        return self._refund_answer(last, structured)

    def _refund_done(self, seen: Conversation, structured: bool) -> dict[str, Any]:
        """"Já caiu?": what this conversation's last refund call answered."""
        order = order_in(seen.last_text)
        refunds = [c for c in seen.calls if c.name == REFUND_TOOL and c.result is not None
                   and (order is None or c.input.get("pedidoId") == order)]
        if not refunds:
            if order is None:
                return self._final(NOTHING_ASKED_HERE, structured)
            return self._final(CHECKED_LEAD, structured, statements=[
                {"tipo": "reembolso_nao_feito", "pedidoId": order, "motivo": "nao_solicitado"}])
        if seen.turn:
            return self._refund_answer(seen.turn[-1], structured)
        if refunds[-1].outcome in _UNSETTLED:
            # Not final when it was said: the same request again is answered with the claim
            # as it stands now (reconciled with the gateway first), never re-debited.
            return self._call("Vou conferir o reembolso.", REFUND_TOOL, refunds[-1].input)
        return self._refund_answer(refunds[-1], structured)

    def _refund_answer(self, call: Call, structured: bool) -> dict[str, Any]:
        order = str(call.input.get("pedidoId"))
        done = call.outcome == _EXECUTED or (call.outcome == _ALREADY
                                               and call.data.get("resultadoOriginal") == _EXECUTED)
        if done and not call.is_error:
            value = call.data.get("valor", call.input.get("valor"))
            return self._final(CHECKED_LEAD, structured, statements=[
                {"tipo": "reembolso_executado", "pedidoId": order, "valor": float(value)}])
        if _unknown_order(call):
            return self._final(NOT_FOUND, structured)
        return self._final(CHECKED_LEAD, structured, statements=[_not_executed(call, order)])

    def _profile(self, seen: Conversation, structured: bool) -> dict[str, Any]:
        if not seen.turn:
            return self._call("Vou atualizar o seu cadastro.", PROFILE_TOOL,
                              {"campos": profile_changes(seen.last_text)})
        last = seen.turn[-1]
        if last.result is not None and last.result.get("ok") and not last.is_error:
            return self._final(CHECKED_LEAD, structured, statements=[
                {"tipo": "cadastro_atualizado", "campo": name} for name in sorted(last.input.get("campos", {}))])
        return self._final(NOT_CHANGED, structured)

    # -- Messages-API bodies -------------------------------------------------------
    def _call(self, preface: str, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        return self._envelope([{"type": "text", "text": preface},
                               {"type": "tool_use", "id": f"toolu_chat_{self._run}_{next(self._ids):06d}",
                                "name": tool, "input": tool_input}], "tool_use")

    def _final(self, text: str, structured: bool, *, needs_person: bool = False,
               statements: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The answer as the orchestrator's output contract asks (a responder_cliente
        call: free text, and typed statements the code checks and renders) when it
        offers that tool; plain text otherwise."""
        if not structured:
            return self._envelope([{"type": "text", "text": text}], "end_turn")
        answer = {"texto": text, "precisaDePessoa": needs_person, "declaracoes": statements or []}
        return self._envelope([{"type": "tool_use", "id": f"toolu_chat_{self._run}_{next(self._ids):06d}",
                                "name": REPLY_TOOL, "input": answer}], "tool_use")

    def _envelope(self, content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
        return {"id": f"msg_chat_{self._run}_{next(self._ids):06d}", "type": "message", "role": "assistant",
                "model": "cadencia-roteirizado", "content": content, "stop_reason": stop_reason,
                "stop_sequence": None, "usage": {"input_tokens": 500, "output_tokens": 40}}



def _unknown_order(call: Call) -> bool:
    error = (call.result or {}).get("erro")
    # A control's refusal may carry its code as a plain string instead of an object.
    code = error.get("codigo") if isinstance(error, dict) else error
    return code == "pedido_nao_encontrado"


def _not_executed(call: Call, order: str) -> dict[str, Any]:
    """The typed statement of a refund call that did not execute, from its outcome (a
    repeat answered from its claim: the claim's own outcome)."""
    outcome = call.data.get("resultadoOriginal") if call.outcome == _ALREADY else call.outcome
    if outcome in _UNSETTLED:
        return {"tipo": "reembolso_sem_confirmacao", "pedidoId": order}
    if outcome == _DECLINED:
        return {"tipo": "reembolso_recusado_pelo_gateway", "pedidoId": order}
    return {"tipo": "reembolso_nao_feito", "pedidoId": order, "motivo": "recusado_pela_ferramenta"}
