"""An approval record as the ledger holds it: its status, what it binds and when it expires
(``approvals.ApprovalStore`` reads and writes these; SEAL's edge only reads one,
``seal_approvals``). Kept apart from the store so a reader of one record imports no
writer of the ledger's other kinds."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from .approval_arguments import bound_amount, canonical_arguments, parse_arguments, same_amount
from .ledger import TABLE_KEY, approval_id, approval_pk


class ApprovalStatus(StrEnum):
    PENDING = "pendente"
    APPROVED = "aprovada"
    DENIED = "negada"
    CONSUMED = "consumida"  # the approved call was handed to the tool (its idempotency key guards the rest)
    VOIDED = "anulada"  # closed by a cancellation (or replaced) while open: authorises nothing
    EXPIRED = "expirada"  # closed undecided (or approved and unused) after its expiry; customer told


REPLACES_ATTRIBUTE = "substitui"  # on a lower amount's request (the approval policy's): the one it replaces
REPLACED_BY_ATTRIBUTE = "substituidaPor"  # on the request a lower amount's replaced: the one that replaced it
# Statuses a new request for the same call replaces (the old one authorises nothing);
# a denied or consumed record is never replaced.
REPLACEABLE = (ApprovalStatus.VOIDED, ApprovalStatus.EXPIRED)
# Statuses a cancellation closes.
OPEN = (ApprovalStatus.PENDING, ApprovalStatus.APPROVED)


class DecisionRefused(Exception):
    """A decision that was not recorded: unknown, expired, already decided, or an
    approver who is not on the configured list. ``reason`` is a wire name."""

    def __init__(self, reason: str, record: ApprovalRecord | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.record = record


@dataclass(frozen=True)
class ApprovalRecord:
    id: str
    tool: str
    tool_version: str
    arguments: dict[str, Any]
    arguments_sha256: str
    conversation_id: str
    customer_id: int
    amount: Decimal | None  # the tool's amount ARGUMENT (None: not derivable, and the record is not intact)
    reason: str  # why approval is required (acima_do_limite, segundo_reembolso, ...)
    status: ApprovalStatus
    created_at: str
    expires_at_ms: int
    decided_by: str | None = None
    justification: str | None = None
    decided_at: str | None = None
    # The retry ceiling's number of the call that asked: the approved call is that call,
    # so its resume runs under this number (None: a record written before it was kept).
    attempt_number: int | None = None
    # The arguments hash to the digest, the id binds them, the stored amount copy agrees.
    intact: bool = True
    replaces: str | None = None  # a lower amount's request: the awaited request it stands for

    def answers(self, awaited: str | None) -> bool:
        """Whether this is the request a conversation awaiting ``awaited`` acts on."""
        return awaited is not None and awaited in (self.id, self.replaces)

    def expired(self, now_ms: int) -> bool:
        return now_ms >= self.expires_at_ms

    def binds(self, *, conversation_id: str, tool: str, version: str, arguments_sha256: str) -> bool:
        """Defence in depth beyond the key: every bound field equal, and the stored
        arguments still hash to the stored digest (an edited item never runs)."""
        return (self.intact and self.conversation_id == conversation_id and self.tool == tool
                and self.tool_version == version and self.arguments_sha256 == arguments_sha256
                and canonical_arguments(self.arguments)[1] == arguments_sha256)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> ApprovalRecord:
        arguments = parse_arguments(item.get("argumentos"))
        digest = item["argumentosSha256"]
        # The stored text itself canonical: the conditions pin it byte for byte.
        hashed = arguments is not None and canonical_arguments(arguments) == (item.get("argumentos"), digest)
        amount = bound_amount(item["ferramenta"], arguments) if hashed else None
        attempt = _attempt_number(item.get("tentativaNumero"))
        intact = (amount is not None and same_amount(item.get("valor"), amount) and attempt is not False
                  and item["aprovacaoId"] == approval_id(item["conversaId"], item["ferramenta"],
                                                         item["versaoFerramenta"], digest, attempt or None)
                  and item.get(TABLE_KEY) in (None, approval_pk(item["aprovacaoId"])))
        return cls(
            id=item["aprovacaoId"], tool=item["ferramenta"], tool_version=item["versaoFerramenta"],
            arguments=arguments if arguments is not None else {}, arguments_sha256=digest,
            conversation_id=item["conversaId"], customer_id=int(item["clienteId"]), amount=amount,
            reason=item["motivo"], status=ApprovalStatus(item["status"]), created_at=item["criadoEm"],
            expires_at_ms=int(item["expiraEmMs"]), decided_by=item.get("decididoPor"),
            justification=item.get("justificativa"), decided_at=item.get("decididoEm"), intact=intact,
            attempt_number=attempt or None, replaces=item.get(REPLACES_ATTRIBUTE),
        )

    def stored_fields(self) -> dict[str, Any]:
        """The condition values that pin the fields ``intact`` was judged on: a write
        conditioned on them fails when any was edited after this record was read."""
        return {":args": canonical_arguments(self.arguments)[0], ":sha": self.arguments_sha256,
                ":valor": self.amount, **({} if self.attempt_number is None else {":tent": self.attempt_number})}

    def unchanged_condition(self) -> str:
        """Appended to a decision's and a consumption's condition (values from ``stored_fields``)."""
        attempt = "attribute_not_exists(tentativaNumero)" if self.attempt_number is None else "tentativaNumero = :tent"
        return f"argumentos = :args AND argumentosSha256 = :sha AND valor = :valor AND {attempt}"


def _attempt_number(stored: Any) -> int | bool:
    """The stored ceiling number: 0 when absent, False when not a positive whole number."""
    if stored is None:
        return 0
    if isinstance(stored, bool) or not isinstance(stored, int | Decimal) or stored != int(stored) or stored < 1:
        return False
    return int(stored)
