"""What the chat's scripted model reads in a request: the customer's intent in their
last text, and the conversation's own facts (its tool calls and their results).

Deterministic: regular expressions over the customer's Portuguese text, accents and
case ignored; the facts come only from the request's messages (the history the
orchestrator sends, rebuilt from the ledger), never from memory between requests.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import Any

REPLY_TOOL = "responder_cliente"
STATUS_TOOL, REFUND_TOOL, PROFILE_TOOL = "consultar_status_pedido", "emitir_reembolso", "atualizar_cadastro"

_ORDER = re.compile(r"pedido\D{0,3}(\d{3,12})")
_PERSON = re.compile(r"\b(atendente|humano|pessoa de verdade|falar com (uma|um|alguem))\b")
_REFUND_ASK = re.compile(r"\b(reembols\w*|estorn\w*|devolv\w* (o )?(meu )?dinheiro|devolucao do dinheiro)\b")
_REFUND_DONE_QUESTION = re.compile(
    r"\b(ja caiu|caiu (o|meu)|cade (o|meu)|ja (foi|foram) (reembolsad|estornad|devolvid|pag)|"
    r"saiu (o|meu) reembolso|ja saiu)\w*")
# "R$ 50", "R$ 50,00", "50 reais", "valor de 50,00" — the amount the customer asks for.
_AMOUNT = re.compile(r"(?:r\$\s*(\d{1,6}(?:[.,]\d{1,2})?)|(\d{1,6}(?:[.,]\d{1,2})?)\s*reais\b|"
                     r"valor (?:de )?(\d{1,6}(?:[.,]\d{1,2})?))")
_CHANGE = re.compile(r"\b(mud\w*|alter\w*|atualiz\w*|troc\w*|corrig\w*)\b")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_PHONE = re.compile(r"\+?\d[\d ()-]{9,18}\d")
_ADDRESS = re.compile(r"endere[cç]o\b.*?\bpara\s+(.+)\Z", re.DOTALL | re.IGNORECASE)


class Intent(Enum):
    PERSON = "pessoa"
    REFUND = "reembolso"
    REFUND_DONE = "ja_caiu"
    PROFILE = "cadastro"
    STATUS = "status"
    OTHER = "outro"


def normalized(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return " ".join("".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn").lower().split())


def intent_of(text: str) -> Intent:
    plain = normalized(text)
    if _PERSON.search(plain):
        return Intent.PERSON
    if _REFUND_DONE_QUESTION.search(plain):
        return Intent.REFUND_DONE
    if _REFUND_ASK.search(plain) and order_in(text):
        return Intent.REFUND
    if _CHANGE.search(plain) and profile_changes(text):
        return Intent.PROFILE
    if _REFUND_ASK.search(plain):
        return Intent.REFUND_DONE if "?" in plain else Intent.REFUND
    if order_in(text):
        return Intent.STATUS
    return Intent.OTHER


def order_in(text: str) -> str | None:
    match = _ORDER.search(normalized(text))
    return match.group(1) if match else None


def amount_in(text: str) -> Decimal | None:
    """The amount the customer names, if any (with or without cents)."""
    match = _AMOUNT.search(normalized(text))
    if match is None:
        return None
    raw = next(group for group in match.groups() if group).replace(",", ".")
    try:
        return Decimal(raw).quantize(Decimal("0.01"))
    except InvalidOperation:
        return None


def profile_changes(text: str) -> dict[str, str]:
    """The record fields the customer asks to change, as the tool's ``campos``."""
    plain = normalized(text)
    changes: dict[str, str] = {}
    if "email" in plain.replace("-", "") and (email := _EMAIL.search(text)):
        changes["email"] = email.group(0)
    if re.search(r"\b(telefone|celular|numero)\b", plain) and (phone := _PHONE.search(text)):
        digits = re.sub(r"\D", "", phone.group(0))
        changes["telefone"] = "+" + (digits if digits.startswith("55") else "55" + digits)
    if "email" not in changes and (address := _ADDRESS.search(text.strip())):
        changes["endereco"] = address.group(1).strip().rstrip(".")  # as the customer typed it
    return changes


@dataclass
class Call:
    id: str
    name: str
    input: dict[str, Any]
    result: dict[str, Any] | None = None  # the tool's JSON answer (or a control's refusal body)
    is_error: bool = False

    @property
    def outcome(self) -> str | None:
        return None if self.result is None else self.result.get("resultado")

    @property
    def data(self) -> dict[str, Any]:
        return (self.result or {}).get("dados") or {}

    @property
    def message(self) -> str:
        body = self.result or {}
        return str(self.data.get("mensagem") or body.get("mensagem") or (body.get("erro") or {}).get("mensagem") or "")


@dataclass
class Conversation:
    """The request read: the customer's last text, the calls since it (``turn``), every
    call of the conversation (``calls``, the history's facts) and how many final
    answers the output contract sent back since the last text."""

    last_text: str = ""
    turn: list[Call] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    refused_answers: int = 0


def read(messages: list[dict[str, Any]]) -> Conversation:
    seen, by_id, answers = Conversation(), {}, set()
    for message in messages:
        content = message["content"] if isinstance(message["content"], list) else [
            {"type": "text", "text": message["content"]}]
        for block in content:
            kind = block.get("type")
            if message["role"] == "user" and kind == "text":
                seen.last_text, seen.turn, seen.refused_answers = block["text"], [], 0
            elif message["role"] == "assistant" and kind == "tool_use" and block.get("name") == REPLY_TOOL:
                answers.add(block["id"])
            elif message["role"] == "assistant" and kind == "tool_use":
                call = Call(block["id"], block["name"], dict(block.get("input") or {}))
                by_id[call.id] = call
                seen.turn.append(call)
                seen.calls.append(call)
            elif message["role"] == "user" and kind == "tool_result":
                if block.get("tool_use_id") in answers:
                    seen.refused_answers += bool(block.get("is_error"))
                elif (call := by_id.get(block.get("tool_use_id"))) is not None:
                    call.result, call.is_error = _payload(block), bool(block.get("is_error"))
    return seen


def _payload(block: dict[str, Any]) -> dict[str, Any]:
    raw = block.get("content")
    raw = raw[0].get("text", "") if isinstance(raw, list) and raw else raw
    try:
        payload = json.loads(raw or "{}")
    except ValueError:
        return {"mensagem": str(raw)}
    return payload if isinstance(payload, dict) else {}


def reais(value: Any) -> str:
    """R$ in the Brazilian spelling (1.234,50)."""
    amount = Decimal(str(value)).quantize(Decimal("0.01"))
    whole, cents = f"{amount:,.2f}".split(".")
    return f"R$ {whole.replace(',', '.')},{cents}"
