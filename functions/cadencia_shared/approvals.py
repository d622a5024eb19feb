"""Approval requests: durable ledger items a person decides.

An approval binds ONE call: the tool, its version (hash of its input schema and the release),
the SHA-256 of its canonical arguments, the conversation and an expiry. Its key is
``ledger.approval_id`` of those and of the retry ceiling's number of the call that asked: another
amount, conversation or version, or a fresh request after one was voided or expired, is another
record (docs/decisions/approval-request-identity.md).

Every transition is ONE conditional write on the item's status, so two operators
deciding at once get one winner, and the execution consumes an approval once:

    pendente ──decide (before expiry, an allowed approver, the conversation still
        │       waiting for it: not cancelled, not with a person)──► aprovada ──consume──► consumida
        ├──────────────────────────────────────────────────────────► negada
        ├── the conversation's cancellation (pendente or aprovada) ─► anulada
        └── its expiry, undecided or unused (the conversation resumed) ─► expirada

Pending items carry ``pendencia = aprovacao`` (the ledger's sparse index): the
operators' list is a Query. A denied item leaves the index; an approved one moves
to ``aprovacao_aprovada`` until it is consumed or closed (the expiry sweep's).

The amount people are shown is DERIVED from the bound arguments (``ApprovalRecord.amount``). A record
is ``intact`` only when its arguments hash to its digest, its id is the id of (conversation, tool,
version, digest, attempt) and the stored ``valor`` equals the argument; one that is not binds
nothing, is never decided nor consumed, and is shown to an operator as ``invalida``. The status
``aprovada`` alone authorises nothing: the person's decision record does (``approval_use``).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from . import approval_decisions
from .approval_arguments import bound_amount, canonical_arguments
from .approval_history import awaited_approval

# The record, its status and what it binds live apart (``approval_record``); re-exported here.
from .approval_record import OPEN as OPEN
from .approval_record import REPLACEABLE as REPLACEABLE
from .approval_record import REPLACED_BY_ATTRIBUTE as REPLACED_BY_ATTRIBUTE
from .approval_record import REPLACES_ATTRIBUTE as REPLACES_ATTRIBUTE
from .approval_record import ApprovalRecord as ApprovalRecord
from .approval_record import ApprovalStatus as ApprovalStatus
from .approval_record import DecisionRefused as DecisionRefused
from .ledger import (
    APPROVAL_APPROVED_MARK,
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


class ApprovalStore:
    """Typed operations on approval items, through the ledger's table and client."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def get(self, approval: str) -> ApprovalRecord | None:
        item = self.ledger.table.get(approval_pk(approval))
        return ApprovalRecord.from_item(item) if item else None

    def find(self, *, conversation_id: str, tool: str, version: str, arguments_sha256: str,
             attempt_number: int | None = None) -> ApprovalRecord | None:
        """The latest request for this call asked under ``attempt_number`` or before
        (one GetItem per number, newest first: at most the ceiling's; the conversation's
        lease makes its requests sequential, so the newest is the live one)."""
        numbers = [*range(attempt_number or 0, 0, -1), None]
        for number in numbers:
            record = self.get(approval_id(conversation_id, tool, version, arguments_sha256, number))
            if record is not None:
                return record
        return None

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
        latest = self.find(conversation_id=conversation_id, tool=tool, version=version, arguments_sha256=digest,
                           attempt_number=attempt_number)
        new_id = approval_id(conversation_id, tool, version, digest, attempt_number)
        # The request this very attempt made (its resume, or a rerun) is never replaced:
        # an id names one request for ever (an expiry landing during the resume included).
        if latest is not None and ((latest.id == new_id and attempt_number is not None)
                                   or not self._replaced(latest, now)):
            return latest, False
        record = ApprovalRecord(
            id=new_id, tool=tool, tool_version=version,
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
            # A fresh request is a new record (its number in its id); only a record
            # without a number (written under no ceiling) is overwritten, once closed.
            closed = {f":r{i}": status.value for i, status in enumerate(REPLACEABLE)}
            self.ledger.client.put_item(
                TableName=self.ledger.table_name, Item=serialize(item),
                ConditionExpression=f"attribute_not_exists(pk) OR #st IN ({', '.join(closed)})",
                ExpressionAttributeNames={"#st": "status"}, ExpressionAttributeValues=serialize(closed),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise
            existing = self.get(record.id)
            assert existing is not None  # a condition failed on attribute_not_exists: it exists
            return existing, False
        return record, True

    def _replaced(self, record: ApprovalRecord, now_ms: int) -> bool:
        """Whether a new request replaces ``record``: closed without running, or open and expired
        (closed now, audited, before the new one is written); never a denied or consumed one."""
        if record.status in REPLACEABLE:
            return True
        if record.status not in OPEN or not record.expired(now_ms):
            return False
        before = self.close(record.id, conversation_id=record.conversation_id, status=ApprovalStatus.EXPIRED,
                            only_expired=True)
        if before is None:  # decided, consumed or closed since it was read
            fresh = self.get(record.id)
            return fresh is not None and fresh.status in REPLACEABLE
        self.ledger.append_audit(conversation_id=record.conversation_id, event="APROVACAO_EXPIRADA",
                                 details={"aprovacaoId": record.id, "statusAnterior": before.value,
                                          "motivo": "substituida_por_novo_pedido"})
        return True

    def pending(self, *, limit: int = 100) -> list[ApprovalRecord]:
        """Undecided requests, oldest first (expired ones included: shown as such, never decided)."""
        items = self.ledger.table.pending(APPROVAL_PENDING_MARK, limit=limit)
        return [ApprovalRecord.from_item(item) for item in items]

    def approved(self, *, limit: int = 100) -> list[ApprovalRecord]:
        """Approved requests not yet consumed nor closed, oldest first (the sweep's)."""
        return [ApprovalRecord.from_item(item) for item in self.ledger.table.pending(APPROVAL_APPROVED_MARK,
                                                                                      limit=limit)]

    def decide(self, approval: str, *, approve: bool, approver: str, justification: str,
               allowed_approvers: frozenset[str], co_approvers: tuple[str, ...] = (),
               required: int = 1) -> ApprovalRecord:
        """Record one decision: the person's decision record first (``approval_decisions``: it
        authorises, once; ``co_approvers`` decided before, ``required`` is the policy's count),
        then pendente → aprovada/negada on the request, unexpired. Raises DecisionRefused."""
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
        elsewhere = self._conversation_moved_on(current)
        if elsewhere is not None:
            raise DecisionRefused(elsewhere, current)
        binding = approval_decisions.Binding(current.id, current.conversation_id, current.tool,
                                             current.tool_version, current.arguments_sha256, current.expires_at_ms)
        decision = approval_decisions.write(self.ledger, binding, decision=status.value,
                                            approvers=(*co_approvers, approver), required=required)
        if decision.decision != status.value or decision.approvers[-1:] != (approver,):
            raise DecisionRefused("aprovacao_ja_decidida", current)  # another person's decision stands
        values = {":pendente": ApprovalStatus.PENDING.value, ":st": status.value, ":por": approver,
                  ":just": justification, ":agora": self.ledger.table.iso(now), ":agora_ms": now,
                  **current.stored_fields(), **({":aprovada_marca": APPROVAL_APPROVED_MARK} if approve else {})}
        # An approved record stays findable until consumed or closed (the expiry sweep's).
        try:
            # Conditioned on the fields judged intact: an edit after the read is refused.
            self.ledger.client.update_item(
                TableName=self.ledger.table_name, Key=self.ledger.table.key(approval_pk(approval)),
                UpdateExpression="SET #st = :st, decididoPor = :por, justificativa = :just, decididoEm = :agora"
                                 + (", #pend = :aprovada_marca" if approve else " REMOVE #pend"),
                ConditionExpression=f"attribute_exists(pk) AND #st = :pendente AND expiraEmMs > :agora_ms "
                                    f"AND {current.unchanged_condition()}",
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

    def _conversation_moved_on(self, record: ApprovalRecord) -> str | None:
        """Why a decision may not be recorded for this conversation now (None: it may):
        it must wait for THIS request (the last its history asked for), or the decision
        would approve a call no resume runs."""
        if self.ledger.cancellation_pending(record.conversation_id):
            return "conversa_cancelada"
        state = self.ledger.read_conversation(record.conversation_id)
        if state is not None and state.status is ConversationStatus.WAITING_HUMAN:
            return "conversa_com_atendente"
        if (state is None or state.status is not ConversationStatus.WAITING_APPROVAL
                or not record.answers(awaited_approval(state.messages))):
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
              only_expired: bool = False, only_pending: bool = False, consumed_too: bool = False,
              replaced_by: str | None = None) -> ApprovalStatus | None:
        """An open record (pendente, or aprovada and not consumed) of this conversation
        → ``status``, a terminal one, in one conditional write that also takes it out
        of the operators' list. ``only_expired``: only once its expiry has passed;
        ``only_pending``: only while nobody has decided it (a replacement never overrides
        another person's approval); ``consumed_too``: a consumed one as well (its call is
        proven not to have run: refused at the tool's edge); ``replaced_by``: the request that replaces it, recorded
        on it (``substituidaPor``). Returns the status it had, or None when it was not open
        (nothing changed)."""
        now = self.ledger.now_ms()
        open_statuses = (ApprovalStatus.PENDING,) if only_pending else OPEN
        if consumed_too:
            open_statuses = (*open_statuses, ApprovalStatus.CONSUMED)
        values: dict[str, Any] = {":st": status.value, ":conversa": conversation_id,
                                  ":agora": self.ledger.table.iso(now),
                                  **{f":o{i}": open_status.value for i, open_status in enumerate(open_statuses)}}
        condition = f"conversaId = :conversa AND #st IN ({', '.join(f':o{i}' for i in range(len(open_statuses)))})"
        replacement = f", {REPLACED_BY_ATTRIBUTE} = :por" if replaced_by else ""
        if replaced_by:
            values[":por"] = replaced_by
        if only_expired:
            condition += " AND expiraEmMs <= :agora_ms"
            values[":agora_ms"] = now
        try:
            resp = self.ledger.client.update_item(
                TableName=self.ledger.table_name, Key=self.ledger.table.key(approval_pk(approval)),
                UpdateExpression=f"SET #st = :st, encerradaEm = :agora{replacement} REMOVE #pend",
                ConditionExpression=condition,
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
                UpdateExpression="SET #st = :consumida, consumidaEm = :agora REMOVE #pend",
                ConditionExpression=f"#st = :aprovada AND expiraEmMs > :agora_ms AND {record.unchanged_condition()}",
                ExpressionAttributeNames={"#st": "status", "#pend": GSI_UNSETTLED_PARTITION},
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
