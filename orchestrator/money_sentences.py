"""Every sentence the customer reads about money, the record or an order's status,
rendered by code from a verified statement (``statements``) — never the model's words.

The templates are ``str.format`` strings in Brazilian Portuguese; each placeholder
is filled by code from the ledger or from a tool's result in this conversation:
amounts as "R$ 1.234,56" (``brl``), order ids as the ledger stores them, dates as
"10/12/2026". The model's free text is joined with them (``join``), after the
detector (``money_detector``) made sure that text states nothing of the kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_EVEN, Decimal

# tipo (wire name, the final-answer tool's) → template.
REFUND_EXECUTED = "reembolso_executado"
REFUND_AWAITING_APPROVAL = "reembolso_aguardando_aprovacao"
REFUND_DECLINED = "reembolso_recusado_pelo_gateway"
REFUND_UNCONFIRMED = "reembolso_sem_confirmacao"
REFUND_NOT_MADE = "reembolso_nao_feito"
PROFILE_UPDATED = "cadastro_atualizado"
ORDER_STATUS = "status_do_pedido"
HOW_REFUNDS_WORK = "como_funciona_o_reembolso"

TEMPLATES = {
    REFUND_EXECUTED: "O reembolso de {amount} do pedido {order} foi emitido.",
    REFUND_AWAITING_APPROVAL: ("O reembolso de {amount} do pedido {order} aguarda a aprovação de uma pessoa da "
                               "nossa equipe. Nenhum valor foi movimentado até agora."),
    REFUND_DECLINED: ("O reembolso do pedido {order} foi recusado pelo meio de pagamento. "
                      "Nenhum valor foi movimentado."),
    REFUND_UNCONFIRMED: ("O reembolso de {amount} do pedido {order} ainda não foi confirmado pelo meio de pagamento; "
                         "o valor fica reservado e te aviso assim que houver confirmação."),
    REFUND_NOT_MADE: "Nenhum reembolso do pedido {order} foi feito{why}.",
    PROFILE_UPDATED: "Seu {field} foi atualizado no cadastro.",
    ORDER_STATUS: "Situação do pedido {order}: {status}{extra}.",
    HOW_REFUNDS_WORK: ("Um reembolso só é confirmado depois que o meio de pagamento aceita a operação; quando ele é "
                       "emitido, o valor volta pelo mesmo meio de pagamento usado na compra."),
}
NOT_MADE_WHY = {
    "nao_solicitado": " nesta conversa",
    "recusado_pela_ferramenta": ": o pedido não atende às condições para reembolso por aqui",
}
FIELDS = {"endereco": "endereço", "telefone": "telefone", "email": "e-mail"}
ORDER_STATUSES = {  # sql/schema.sql's pedidos.status values
    "aguardando_pagamento": "aguardando pagamento", "pago": "pagamento confirmado, ainda não enviado",
    "enviado": "enviado", "entregue": "entregue", "cancelado": "cancelado",
}
# The fallback's lead when no verified statement is left to render.
NOTHING_TO_CONFIRM = "Não tenho nenhum reembolso nem alteração de cadastro para confirmar por aqui agora."
FALLBACK_LEAD = "Para não te informar nada errado, aqui está só o que os nossos sistemas confirmam:"
FALLBACK_TAIL = "Se precisar de mais alguma coisa, é só me dizer ou pedir um atendente humano."


@dataclass(frozen=True)
class Rendered:
    """One verified statement, ready to render: every value came from the ledger or
    a tool result, none from the model."""

    kind: str
    order: str | None = None
    amount: Decimal | None = None
    why: str | None = None
    field: str | None = None
    status: str | None = None
    delivery: str | None = None  # ISO date from the status tool
    tracking: str | None = None


def brl(amount: Decimal) -> str:
    """R$ 1.234,56 (the Brazilian grouping and decimal marks)."""
    cents = Decimal(amount).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
    sign = "-" if cents < 0 else ""
    whole, frac = f"{abs(cents):.2f}".split(".")
    groups: list[str] = []
    while whole:
        groups.insert(0, whole[-3:])
        whole = whole[:-3]
    return f"{sign}R$ {'.'.join(groups)},{frac}"


def _date(iso: str) -> str:
    try:
        return date.fromisoformat(iso[:10]).strftime("%d/%m/%Y")
    except ValueError:
        return ""


def sentence(item: Rendered) -> str:
    template = TEMPLATES[item.kind]
    if item.kind == ORDER_STATUS:
        extra = ""
        # A forecast once delivered or cancelled would read as a promise: left out.
        when = _date(item.delivery) if item.delivery and item.status not in ("entregue", "cancelado") else ""
        if when:
            extra += f"; previsão de entrega: {when}"
        if item.tracking:
            extra += f"; código de rastreio: {item.tracking}"
        status = ORDER_STATUSES.get(item.status or "", "situação não informada pelo sistema")
        return template.format(order=item.order, status=status, extra=extra)
    if item.kind == PROFILE_UPDATED:
        return template.format(field=FIELDS[item.field or ""])
    amount = brl(item.amount) if item.amount is not None else ""
    if item.kind in (REFUND_AWAITING_APPROVAL, REFUND_UNCONFIRMED) and item.amount is None:
        template = template.replace("de {amount} ", "")
    return template.format(order=item.order, amount=amount, why=NOT_MADE_WHY.get(item.why or "", ""))


def render(items: list[Rendered]) -> str:
    seen: list[str] = []
    for item in items:
        line = sentence(item)
        if line not in seen:
            seen.append(line)
    return "\n".join(seen)


def join(model_text: str, items: list[Rendered]) -> str:
    """The model's text (already free of money, record and status statements), then
    the code's sentences."""
    rendered = render(items)
    text = model_text.strip()
    return f"{text}\n\n{rendered}" if text and rendered else (text or rendered)


def fallback(items: list[Rendered]) -> str:
    """After K refused answers: only what the ledger proves, rendered by code."""
    body = render(items) or NOTHING_TO_CONFIRM
    return f"{FALLBACK_LEAD}\n{body}\n{FALLBACK_TAIL}"
