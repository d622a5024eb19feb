"""Approval requests: durable ledger items a person decides.

An approval binds ONE call: the tool, its version (hash of its input schema and
the release), the SHA-256 of its canonical arguments, the conversation and an
expiry. Its key is ``ledger.approval_id`` of exactly those, so an approval for
R$ 50 is not found when R$ 500 is asked, one from conversation A is not found
in B, and a new tool version looks for a new record.

Every transition is ONE conditional write on the item's status, so two operators
deciding at once get one winner, and the execution consumes an approval once:

    pendente ──decide (before expiry, an allowed approver, the conversation still
        │       waiting for it: not cancelled, not with a person)──► aprovada ──consume──► consumida
        ├──────────────────────────────────────────────────────────► negada
        ├── the conversation's cancellation (pendente or aprovada) ─► anulada
        └── its expiry, undecided or unused (the conversation resumed) ─► expirada

Pending items carry ``pendencia = aprovacao`` (the ledger's sparse index): the
operators' list is a Query, and a decided item leaves the index.

What people are shown about a request (the amount an operator decides on, the one
the customer is told, the one the audit records) is DERIVED from the bound
arguments, never read from a stored copy: ``ApprovalRecord.amount`` is the tool's
amount argument. A record is ``intact`` only when its arguments hash to its digest,
its id is the id of (conversation, tool, version, digest) and the stored ``valor``
copy equals the argument; a record that is not intact binds nothing, is never
decided nor consumed (both writes are conditioned on the fields checked), and is
shown to an operator as ``invalida``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

from .catalog import TOOLS
from .ledger import (
    APPROVAL_PENDING_MARK,
    GSI_SORT,
    GSI_UNSETTLED_PARTITION,
    GSI_UNSETTLED_SORT,
    TABLE_KEY,
    TTL_ATTRIBUTE,
    ConversationStatus,
    ItemType,
    Ledger,
    approval_id,
    approval_pk,
)
from .ledger.table import condition_failed, history_sort, serialize

# Decided records stay readable for audits this long after their expiry.
RETENTION_S = 90 * 24 * 3600


class ApprovalStatus(StrEnum):
    PENDING = "pendente"
    APPROVED = "aprovada"
    DENIED = "negada"
    CONSUMED = "consumida"  # the approved call was handed to the tool (its idempotency key guards the rest)
    # Closed by its conversation's cancellation while pending or approved-but-unused:
    # it authorises nothing; the same call asked again is a fresh request.
    VOIDED = "anulada"
    # Closed undecided (or approved and unused) after its expiry; the customer was told.
    EXPIRED = "expirada"


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


def canonical_arguments(arguments: dict[str, Any]) -> tuple[str, str]:
    """(canonical JSON, its SHA-256): sorted keys, no separators' spaces, amounts as
    JSON numbers (a Decimal 500.00 and a float 500.0 are one amount, written 500.0:
    the tools refuse amounts as strings, and the stored arguments are what runs)."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_decimal)
    return text, hashlib.sha256(text.encode()).hexdigest()


def _decimal(value: Any) -> float:
    # Exact for the tools' amounts (≤ 12 digits, 2 decimals): repr of the float
    # is the shortest string that reads back as the same number.
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"not canonical JSON: {type(value).__name__}")


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
        arguments = _arguments(item.get("argumentos"))
        digest = item["argumentosSha256"]
        # The stored text itself canonical: the conditions pin it byte for byte.
        hashed = arguments is not None and canonical_arguments(arguments) == (item.get("argumentos"), digest)
        amount = bound_amount(item["ferramenta"], arguments) if hashed else None
        intact = (amount is not None and _same_amount(item.get("valor"), amount)
                  and item["aprovacaoId"] == approval_id(item["conversaId"], item["ferramenta"],
                                                         item["versaoFerramenta"], digest)
                  and item.get(TABLE_KEY) in (None, approval_pk(item["aprovacaoId"])))
        return cls(
            id=item["aprovacaoId"], tool=item["ferramenta"], tool_version=item["versaoFerramenta"],
            arguments=arguments if arguments is not None else {}, arguments_sha256=digest,
            conversation_id=item["conversaId"], customer_id=int(item["clienteId"]), amount=amount,
            reason=item["motivo"], status=ApprovalStatus(item["status"]), created_at=item["criadoEm"],
            expires_at_ms=int(item["expiraEmMs"]), decided_by=item.get("decididoPor"),
            justification=item.get("justificativa"), decided_at=item.get("decididoEm"), intact=intact,
            attempt_number=int(item["tentativaNumero"]) if item.get("tentativaNumero") is not None else None,
        )

    def stored_fields(self) -> dict[str, Any]:
        """The condition values that pin the fields ``intact`` was judged on: a write
        conditioned on them fails when any was edited after this record was read."""
        return {":args": canonical_arguments(self.arguments)[0], ":sha": self.arguments_sha256,
                ":valor": self.amount}


# Appended to a decision's and a consumption's condition (values from ``stored_fields``).
UNCHANGED_CONDITION = "argumentos = :args AND argumentosSha256 = :sha AND valor = :valor"


def bound_amount(tool: str, arguments: dict[str, Any] | None) -> Decimal | None:
    """The amount a call moves, from its arguments (the tool's approval policy names
    the field); None when the tool has no such policy or the argument is not a number."""
    spec = TOOLS.get(tool)
    policy = spec.approval if spec is not None else None
    value = arguments.get(policy.amount_field) if policy is not None and arguments is not None else None
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return None
    amount = Decimal(str(value))
    return amount if amount.is_finite() else None


def _arguments(text: Any) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _same_amount(stored: Any, amount: Decimal) -> bool:
    return isinstance(stored, Decimal) and stored.is_finite() and stored == amount


class ApprovalStore:
    """Typed operations on approval items, through the ledger's table and client."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def get(self, approval: str) -> ApprovalRecord | None:
        item = self.ledger.table.get(approval_pk(approval))
        return ApprovalRecord.from_item(item) if item else None

    def find(self, *, conversation_id: str, tool: str, version: str, arguments_sha256: str) -> ApprovalRecord | None:
        return self.get(approval_id(conversation_id, tool, version, arguments_sha256))

    def request(self, *, tool: str, version: str, arguments: dict[str, Any], conversation_id: str,
                customer_id: int, amount: Decimal, reason: str, validity_s: int,
                attempt_number: int | None = None) -> tuple[ApprovalRecord, bool]:
        """Create the request once; the same call asked again gets the existing
        record back (pending, approved, denied or consumed), unless it expired
        without being used, when a fresh request replaces it. Returns (record, created)."""
        text, digest = canonical_arguments(arguments)
        if bound_amount(tool, json.loads(text)) != amount:
            # The stored copy of the amount is what the arguments say, or nothing is stored.
            raise ValueError("the amount of an approval request is its amount argument")
        now = self.ledger.now_ms()
        record = ApprovalRecord(
            id=approval_id(conversation_id, tool, version, digest), tool=tool, tool_version=version,
            arguments=json.loads(text), arguments_sha256=digest, conversation_id=conversation_id,
            customer_id=customer_id, amount=amount, reason=reason, status=ApprovalStatus.PENDING,
            created_at=self.ledger.table.iso(now), expires_at_ms=now + validity_s * 1000,
            attempt_number=attempt_number,
        )
        sort = history_sort(record.created_at, ItemType.APPROVAL, record.id)
        item = {
            TABLE_KEY: approval_pk(record.id), "tipo": ItemType.APPROVAL.value, "aprovacaoId": record.id,
            "ferramenta": tool, "versaoFerramenta": version, "argumentos": text, "argumentosSha256": digest,
            "conversaId": conversation_id, "clienteId": customer_id, "valor": amount, "motivo": reason,
            "status": record.status.value, "criadoEm": record.created_at, "expiraEmMs": record.expires_at_ms,
            GSI_SORT: sort, GSI_UNSETTLED_PARTITION: APPROVAL_PENDING_MARK,
            # the sparse index's sort key (main's visit rotation): creation order, oldest first
            GSI_UNSETTLED_SORT: sort,
            TTL_ATTRIBUTE: record.expires_at_ms // 1000 + RETENTION_S,
            **({"tentativaNumero": attempt_number} if attempt_number is not None else {}),
        }
        try:
            # A request that expired undecided (or approved but never used), or was
            # closed without running, is replaced by a fresh one; a denied or consumed
            # one never is.
            closed = {f":r{i}": status.value for i, status in enumerate(REPLACEABLE)}
            self.ledger.client.put_item(
                TableName=self.ledger.table_name, Item=serialize(item),
                ConditionExpression="attribute_not_exists(pk) OR (expiraEmMs <= :agora AND #st IN (:p, :a)) "
                                    f"OR #st IN ({', '.join(closed)})",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=serialize({
                    ":agora": now, ":p": ApprovalStatus.PENDING.value, ":a": ApprovalStatus.APPROVED.value,
                    **closed}),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise
            existing = self.get(record.id)
            assert existing is not None  # a condition failed on attribute_not_exists: it exists
            return existing, False
        return record, True

    def pending(self, *, limit: int = 100) -> list[ApprovalRecord]:
        """Undecided requests, oldest first (expired ones included: the operator sees them
        as expired, and deciding them is refused)."""
        items = self.ledger.table.pending(APPROVAL_PENDING_MARK, limit=limit)
        return [ApprovalRecord.from_item(item) for item in items]

    def decide(self, approval: str, *, approve: bool, approver: str, justification: str,
               allowed_approvers: frozenset[str]) -> ApprovalRecord:
        """Record one decision: pendente → aprovada/negada, in one conditional write
        that also requires the request unexpired. Raises DecisionRefused."""
        if approver not in allowed_approvers:
            raise DecisionRefused("aprovador_nao_autorizado")
        status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
        now = self.ledger.now_ms()
        current = self.get(approval)
        if current is None:
            raise DecisionRefused("aprovacao_inexistente")
        if not current.intact:
            raise DecisionRefused("aprovacao_invalida", current)
        if current.status is not ApprovalStatus.PENDING or current.expired(now):
            raise self._why_refused(approval, now)
        # The conversation must still be waiting for this decision: not cancelled (a
        # cancellation voids its approvals), not with a person. A cancellation landing
        # after this read is caught where it is consumed (the approval is voided then).
        elsewhere = self._conversation_moved_on(current.conversation_id)
        if elsewhere is not None:
            raise DecisionRefused(elsewhere, current)
        values = {":pendente": ApprovalStatus.PENDING.value, ":st": status.value, ":por": approver,
                  ":just": justification, ":agora": self.ledger.table.iso(now), ":agora_ms": now,
                  **current.stored_fields()}
        try:
            # Conditioned on the fields judged intact: an edit after the read is refused.
            self.ledger.client.update_item(
                TableName=self.ledger.table_name, Key=self.ledger.table.key(approval_pk(approval)),
                UpdateExpression="SET #st = :st, decididoPor = :por, justificativa = :just, decididoEm = :agora "
                                 "REMOVE #pend",
                ConditionExpression=f"attribute_exists(pk) AND #st = :pendente AND expiraEmMs > :agora_ms "
                                    f"AND {UNCHANGED_CONDITION}",
                ExpressionAttributeNames={"#st": "status", "#pend": GSI_UNSETTLED_PARTITION},
                ExpressionAttributeValues=serialize(values),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise
            raise self._why_refused(approval, now) from None
        record = self.get(approval)
        assert record is not None
        return record

    def _conversation_moved_on(self, conversation_id: str) -> str | None:
        """Why a decision may not be recorded for this conversation now (None: it may)."""
        if self.ledger.cancellation_pending(conversation_id):
            return "conversa_cancelada"
        state = self.ledger.read_conversation(conversation_id)
        if state is not None and state.status is ConversationStatus.WAITING_HUMAN:
            return "conversa_com_atendente"
        if state is None or state.status is not ConversationStatus.WAITING_APPROVAL:
            return "conversa_nao_aguarda_aprovacao"
        return None

    def _why_refused(self, approval: str, now_ms: int) -> DecisionRefused:
        record = self.get(approval)
        if record is None:
            return DecisionRefused("aprovacao_inexistente")
        if not record.intact:
            return DecisionRefused("aprovacao_invalida", record)
        if record.status is ApprovalStatus.VOIDED:
            return DecisionRefused("aprovacao_anulada", record)
        if record.status is not ApprovalStatus.PENDING:
            return DecisionRefused("aprovacao_ja_decidida", record)
        return DecisionRefused("aprovacao_expirada", record)

    def close(self, approval: str, *, conversation_id: str, status: ApprovalStatus,
              only_expired: bool = False) -> ApprovalStatus | None:
        """An open record (pendente, or aprovada and not consumed) of this conversation
        → ``status``, a terminal one, in one conditional write that also takes it out
        of the operators' list. ``only_expired``: only once its expiry has passed.
        Returns the status it had, or None when it was not open (nothing changed)."""
        now = self.ledger.now_ms()
        values: dict[str, Any] = {":st": status.value, ":conversa": conversation_id, ":agora": self.ledger.table.iso(now),
                                  **{f":o{i}": open_status.value for i, open_status in enumerate(OPEN)}}
        condition = f"conversaId = :conversa AND #st IN ({', '.join(f':o{i}' for i in range(len(OPEN)))})"
        if only_expired:
            condition += " AND expiraEmMs <= :agora_ms"
            values[":agora_ms"] = now
        try:
            resp = self.ledger.client.update_item(
                TableName=self.ledger.table_name, Key=self.ledger.table.key(approval_pk(approval)),
                UpdateExpression="SET #st = :st, encerradaEm = :agora REMOVE #pend", ConditionExpression=condition,
                ExpressionAttributeNames={"#st": "status", "#pend": GSI_UNSETTLED_PARTITION},
                ExpressionAttributeValues=serialize(values), ReturnValues="ALL_OLD",
            )
        except ClientError as err:
            if condition_failed(err):
                return None
            raise
        return ApprovalStatus(resp["Attributes"]["status"]["S"])

    def consume(self, record: ApprovalRecord) -> bool:
        """aprovada → consumida, once, and only before the expiry. True: this caller
        consumed it; False: someone already did (or it expired, was never approved, or
        is not intact — also when edited after ``record`` was read)."""
        if not record.intact:
            return False
        now = self.ledger.now_ms()
        try:
            self.ledger.client.update_item(
                TableName=self.ledger.table_name, Key=self.ledger.table.key(approval_pk(record.id)),
                UpdateExpression="SET #st = :consumida, consumidaEm = :agora",
                ConditionExpression=f"#st = :aprovada AND expiraEmMs > :agora_ms AND {UNCHANGED_CONDITION}",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=serialize({
                    ":consumida": ApprovalStatus.CONSUMED.value, ":aprovada": ApprovalStatus.APPROVED.value,
                    ":agora": self.ledger.table.iso(now), ":agora_ms": now, **record.stored_fields(),
                }),
            )
        except ClientError as err:
            if condition_failed(err):
                return False
            raise
        return True
