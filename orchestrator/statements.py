"""The final answer's typed statements, each checked against what the ledger and this
conversation's tool results prove, and turned into what the code renders
(``money_sentences.Rendered``: every value from the ledger or a tool result).

    reembolso_executado {pedidoId, valor}   this conversation's claim, executado, that amount
    reembolso_aguardando_aprovacao {pedidoId} a pending approval of one of this
                                            conversation's refund calls for that order
    reembolso_recusado_pelo_gateway {pedidoId} the claim, recusado_pelo_gateway
    reembolso_sem_confirmacao {pedidoId}    the claim, still held (in progress, sending,
                                            reconciling, unknown): the amount reserved
    reembolso_nao_feito {pedidoId, motivo}  nothing debited nor held for the order here;
                                            nao_solicitado: no refund call ran for it;
                                            recusado_pela_ferramenta: a call was refused
    cadastro_atualizado {campo}             an executed update in the ledger, and this
                                            conversation's call that changed that field
    status_do_pedido {pedidoId}             the status tool's result for that order here
    como_funciona_o_reembolso {}            a fixed sentence of policy (always true)

``ledger_facts`` is the fallback's source: the same renderings, read from the ledger
and the transcript alone, without the model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from cadencia_shared.catalog import ATUALIZAR_CADASTRO
from cadencia_shared.ledger import ClaimStatus, RefundClaim
from cadencia_shared.outcomes import Outcome

from . import money_sentences as ms

REFUND_TOOL, STATUS_TOOL = "emitir_reembolso", "consultar_status_pedido"
HOW_REFUNDS_WORK = ms.HOW_REFUNDS_WORK
HELD = frozenset({ClaimStatus.IN_PROGRESS, ClaimStatus.SENDING, ClaimStatus.RECONCILING, ClaimStatus.UNKNOWN})
NOTHING_MOVED = frozenset({ClaimStatus.FAILED_BEFORE_GATEWAY})


class Evidence(Protocol):
    """What the ledger shows was done in a conversation."""

    def refund_claim(self, conversation_id: str, order_id: str) -> RefundClaim | None: ...

    def profile_updated(self, conversation_id: str, customer_id: int) -> bool: ...

    def refund_results(self, conversation_id: str, order_id: str) -> list[str]: ...

    def pending_approval_amount(self, conversation_id: str, arguments: dict[str, Any]) -> Decimal | None: ...


@dataclass(frozen=True)
class Problem:
    code: str
    message: str


@dataclass(frozen=True)
class ToolCallSeen:
    """One tool call of this conversation and its result, as the code recorded them."""

    name: str
    arguments: dict[str, Any]
    result: dict[str, Any] | None  # the tool's JSON answer (None: no result, or not JSON)
    is_error: bool


def calls(transcript: list[dict[str, Any]]) -> list[ToolCallSeen]:
    uses: dict[str, tuple[str, dict[str, Any]]] = {}
    out = []
    for message in transcript:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if message.get("role") == "assistant" and block.get("type") == "tool_use":
                uses[str(block.get("id"))] = (str(block.get("name")), dict(block.get("input") or {}))
            elif message.get("role") == "user" and block.get("type") == "tool_result":
                used = uses.get(str(block.get("tool_use_id")))
                if used is not None:
                    out.append(ToolCallSeen(used[0], used[1], _json(block.get("content")), bool(block.get("is_error"))))
    return out


def refund_requests(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every refund call the model made in this conversation, answered or not (a call
    waiting for a person's approval may have no result yet)."""
    return [dict(block.get("input") or {}) for message in transcript if message.get("role") == "assistant"
            and isinstance(message.get("content"), list) for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == REFUND_TOOL]


def _json(content: Any) -> dict[str, Any] | None:
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    try:
        value = json.loads(content) if isinstance(content, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _ok(call: ToolCallSeen, outcome: str) -> bool:
    return (not call.is_error and call.result is not None and call.result.get("ok") is True
            and call.result.get("resultado") == outcome)


def _status(seen: list[ToolCallSeen], order: str) -> ms.Rendered | None:
    found = None
    for call in seen:
        data = call.result.get("dados") if call.result else None
        if call.name == STATUS_TOOL and _ok(call, Outcome.CONSULTED.value) and isinstance(data, dict) \
                and str(data.get("pedidoId")) == order:
            found = ms.Rendered(ms.ORDER_STATUS, order=order, status=str(data.get("status")),
                                delivery=data.get("previsaoEntrega"), tracking=data.get("codigoRastreio"))
    return found


def _field_changed(seen: list[ToolCallSeen], field: str) -> bool:
    """This conversation's profile call that set ``field`` (its ``campos``) and was answered ``atualizado``."""
    return any(c.name == ATUALIZAR_CADASTRO.name and isinstance(c.arguments.get("campos"), dict)
               and c.arguments["campos"].get(field) not in (None, "") and _ok(c, Outcome.UPDATED.value)
               for c in seen)


def _cents(value: Any) -> Decimal | None:
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return None
    return amount if amount == amount.quantize(Decimal("0.01")) else None


@dataclass
class Verifier:
    conversation_id: str
    customer_id: int
    evidence: Evidence
    transcript: list[dict[str, Any]]

    def check(self, statement: dict[str, Any]) -> ms.Rendered | Problem:
        kind, order = statement["tipo"], statement.get("pedidoId")
        if kind == HOW_REFUNDS_WORK:
            return ms.Rendered(HOW_REFUNDS_WORK)
        if kind == ms.PROFILE_UPDATED:
            return self._profile(statement["campo"])
        if kind == ms.ORDER_STATUS:
            return _status(calls(self.transcript), str(order)) or Problem(
                "status_nao_consultado", f"o status do pedido {order} não foi consultado nesta conversa; "
                                         "consulte com a ferramenta antes de declarar")
        if kind == ms.REFUND_AWAITING_APPROVAL:
            amount = self._pending_approval(str(order))
            if amount is None:
                return Problem("aprovacao_nao_pendente", f"nenhuma aprovação pendente para o pedido {order}")
            return ms.Rendered(kind, order=order, amount=amount)
        return self._refund(statement)

    def _refund(self, statement: dict[str, Any]) -> ms.Rendered | Problem:
        kind, order = statement["tipo"], statement["pedidoId"]
        claim = self._claim(order)
        if kind == ms.REFUND_EXECUTED:
            return self._executed(order, claim, statement["valor"])
        status = None if claim is None else claim.status
        if kind == ms.REFUND_NOT_MADE:
            return self._not_made(order, status, statement["motivo"])
        held = kind == ms.REFUND_UNCONFIRMED and status in HELD
        if held or (kind == ms.REFUND_DECLINED and status is ClaimStatus.DECLINED):
            return ms.Rendered(kind, order=order, amount=claim.amount if held and claim else None)
        return self._wrong(order, status)

    def _claim(self, order: str) -> RefundClaim | None:
        """This conversation's claim for the order (another conversation's proves nothing)."""
        claim = self.evidence.refund_claim(self.conversation_id, order)
        return claim if claim is not None and claim.conversation_id == self.conversation_id else None

    def _executed(self, order: str, claim: RefundClaim | None, amount: Any) -> ms.Rendered | Problem:
        if claim is None or claim.status is not ClaimStatus.EXECUTED:
            status = "nenhum" if claim is None else claim.status.value
            return Problem("reembolso_nao_executado",
                           f"o reembolso do pedido {order} não foi executado nesta conversa (situação: {status})")
        if _cents(amount) != claim.amount:
            return Problem("valor_divergente", f"o reembolso executado do pedido {order} não foi desse valor")
        return ms.Rendered(ms.REFUND_EXECUTED, order=order, amount=claim.amount)

    def _wrong(self, order: str, status: ClaimStatus | None) -> Problem:
        return Problem("situacao_divergente", f"o reembolso do pedido {order} está em outra situação no registro "
                                              f"({status or 'nenhum'}); declare a situação verdadeira")

    def _not_made(self, order: str, status: ClaimStatus | None, why: str) -> ms.Rendered | Problem:
        if status is not None and status not in NOTHING_MOVED:
            return self._wrong(order, status)
        results = self.evidence.refund_results(self.conversation_id, order)
        refused = Outcome.REFUSED_BY_TOOL.value in results or any(
            c.name == REFUND_TOOL and c.arguments.get("pedidoId") == order and (c.is_error or (
                c.result is not None and c.result.get("ok") is False)) for c in calls(self.transcript))
        if why == "nao_solicitado" and (results or status is not None):
            return Problem("motivo_divergente", f"um reembolso do pedido {order} foi tentado nesta conversa")
        if why == "recusado_pela_ferramenta" and not refused:
            return Problem("motivo_divergente", f"nenhuma tentativa de reembolso do pedido {order} foi recusada")
        return ms.Rendered(ms.REFUND_NOT_MADE, order=order, why=why)

    def _profile(self, field: str) -> ms.Rendered | Problem:
        if not self.evidence.profile_updated(self.conversation_id, self.customer_id) \
                or not _field_changed(calls(self.transcript), field):
            return Problem("cadastro_nao_atualizado", f"nenhuma atualização de {field} foi executada nesta conversa")
        return ms.Rendered(ms.PROFILE_UPDATED, field=field)

    def _pending_approval(self, order: str) -> Decimal | None:
        for arguments in refund_requests(self.transcript):
            if arguments.get("pedidoId") == order:
                amount = self.evidence.pending_approval_amount(self.conversation_id, arguments)
                if amount is not None:
                    return amount
        return None

    def ledger_facts(self, named: frozenset[str] = frozenset()) -> list[ms.Rendered]:
        """What the ledger and this conversation's tool results prove, model aside:
        for each order of this conversation's refund calls, and each order the
        refused answers named (``named``: only looked up by key, never believed)."""
        seen = calls(self.transcript)
        refunds = {str(a.get("pedidoId")) for a in refund_requests(self.transcript)}
        out = [self._refund_fact(order) for order in _ordered(refunds | set(named))]
        if self.evidence.profile_updated(self.conversation_id, self.customer_id):
            out += [ms.Rendered(ms.PROFILE_UPDATED, field=f) for f in ms.FIELDS if _field_changed(seen, f)]
        read = {str((c.result or {}).get("dados", {}).get("pedidoId")) for c in seen
                if c.name == STATUS_TOOL and _ok(c, Outcome.CONSULTED.value)}
        out += [s for s in (_status(seen, order) for order in _ordered(read)) if s is not None]
        return out

    def _refund_fact(self, order: str) -> ms.Rendered:
        claim = self._claim(order)
        if claim is not None:
            kind = {ClaimStatus.EXECUTED: ms.REFUND_EXECUTED, ClaimStatus.DECLINED: ms.REFUND_DECLINED}.get(
                claim.status, ms.REFUND_UNCONFIRMED if claim.status in HELD else ms.REFUND_NOT_MADE)
            return ms.Rendered(kind, order=order, amount=claim.amount)
        pending = self._pending_approval(order)
        if pending is not None:
            return ms.Rendered(ms.REFUND_AWAITING_APPROVAL, order=order, amount=pending)
        return ms.Rendered(ms.REFUND_NOT_MADE, order=order, why="nao_solicitado")


def _ordered(values: set[str]) -> Iterator[str]:
    return iter(sorted(v for v in values if v and v != "None"))
