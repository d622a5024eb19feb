"""A scripted chat model for the channel (served by the harness's Messages-API server).

Stateless: every answer depends only on the request. The customer's last text
decides: "pedido 4821" (any order number) → it calls ``consultar_status_pedido``
and then reports what the tool answered; "atendente" → it refuses (stop reason
``refusal``), which the orchestrator hands to a person (scripts/atendente.py answers);
anything else → it answers quoting the customer's text, so tests can see which
message each reply belongs to.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

_ORDER = re.compile(r"pedido\D{0,3}(\d{3,12})", re.IGNORECASE)
_PERSON = re.compile(r"atendente", re.IGNORECASE)
ECHO_PREFIX = "Recebi: "
STATUS_LEAD = "Consultei o seu pedido."


class ChatPolicy:
    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        messages = request.get("messages", [])
        last_text, tool_result = _last_turn(messages)
        match = _ORDER.search(last_text)
        if _PERSON.search(last_text) and tool_result is None:
            return self._envelope([], "refusal")
        if match and tool_result is None:
            return self._envelope([{"type": "text", "text": "Vou consultar o seu pedido."},
                                   {"type": "tool_use", "id": f"toolu_chat_{next(self._ids):06d}",
                                    "name": "consultar_status_pedido", "input": {"pedidoId": match.group(1)}}],
                                  "tool_use")
        structured = any(tool.get("name") == "responder_cliente" for tool in request.get("tools", []))
        if tool_result is not None:
            if structured and _order_read(tool_result):  # the status sentence is the code's (a typed statement)
                return self._final(STATUS_LEAD, structured, [{"tipo": "status_do_pedido",
                                                              "pedidoId": _order_read(tool_result)}])
            return self._final(_describe(tool_result), structured)
        return self._final(f"{ECHO_PREFIX}{last_text}", structured)

    def _final(self, text: str, structured: bool, statements: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The answer as the orchestrator's output contract asks (a responder_cliente
        call: free text, and typed statements the code renders) when it offers that
        tool; plain text otherwise."""
        if not structured:
            return self._envelope([{"type": "text", "text": text}], "end_turn")
        answer = {"texto": text, "precisaDePessoa": False, "declaracoes": statements or []}
        return self._envelope([{"type": "tool_use", "id": f"toolu_chat_{next(self._ids):06d}",
                                "name": "responder_cliente", "input": answer}], "tool_use")

    def _envelope(self, content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
        return {"id": f"msg_chat_{next(self._ids):06d}", "type": "message", "role": "assistant",
                "model": "cadencia-roteirizado", "content": content, "stop_reason": stop_reason,
                "stop_sequence": None, "usage": {"input_tokens": 500, "output_tokens": 40}}


def _last_turn(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
    """The customer's last text, and the tool result that followed it (if any)."""
    text, result = "", None
    for message in messages:
        content = message["content"] if isinstance(message["content"], list) else [
            {"type": "text", "text": message["content"]}]
        for block in content:
            if message["role"] == "user" and block.get("type") == "text":
                text, result = block["text"], None
            elif message["role"] == "user" and block.get("type") == "tool_result":
                result = block
    return text, result


def _payload(result: dict[str, Any]) -> dict[str, Any]:
    raw = result.get("content")
    raw = raw[0].get("text", "") if isinstance(raw, list) and raw else raw
    try:
        payload = json.loads(raw or "{}")
    except ValueError:
        payload = {}
    return payload if isinstance(payload, dict) else {}


def _order_read(result: dict[str, Any]) -> str | None:
    payload = _payload(result)
    data = payload.get("dados") or {}
    return str(data["pedidoId"]) if payload.get("ok") and data.get("status") and data.get("pedidoId") else None


def _describe(result: dict[str, Any]) -> str:
    payload = _payload(result)
    data = payload.get("dados") or {}
    if payload.get("ok") and data.get("status"):
        return f"Seu pedido {data.get('pedidoId', '')} está com status: {data['status']}."
    return "Não encontrei esse pedido no seu cadastro. Pode conferir o número?"
