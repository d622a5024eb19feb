"""Refund claims: the idempotency key of one refund, claimed before the gateway secret is read.

``reivindicacao#{chaveIdempotencia}`` is created by one conditional PutItem
(``attribute_not_exists``): of any number of racing refunds for one key exactly one
wins, and the others read the winner back (``ClaimTaken``). Every later write is
fenced on the claim's owner (and, to take one over, its status), so a late writer
that lost the claim cannot record anything. The state machine that decides the
transitions is ``emitir_reembolso.transitions``; this module only stores them.

Unsettled claims carry ``pendencia = reembolso`` (the sparse index the reconciler
Queries). ``primeiro-reembolso#{pedidoId}`` marks the conversation that first asked
to refund an order (a second conversation's refund is a second refund: a person decides).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any, Protocol

from botocore.exceptions import ClientError

from .table import (
    GSI_UNSETTLED_PARTITION,
    GSI_UNSETTLED_SORT,
    TABLE_KEY,
    UNSETTLED_MARK,
    ItemType,
    LedgerError,
    LedgerTable,
    checked_id,
    claim_pk,
    condition_failed,
    first_refund_pk,
    old_item,
    serialize,
)


class ClaimStatus(StrEnum):
    IN_PROGRESS = "em_processamento"  # claimed and reserved; no request has left for the key
    SENDING = "envio_possivel"  # recorded before the POST: one request may be leaving now
    RECONCILING = "em_conciliacao"  # re-sending the claim's own request to learn its outcome
    EXECUTED = "executado"  # the gateway debited (final)
    DECLINED = "recusado_pelo_gateway"  # the gateway refused it (final)
    UNKNOWN = "desconhecido"  # a request may have left, no definitive answer: amount held
    FAILED_BEFORE_GATEWAY = "falhou_antes_do_gateway"  # proven never sent: may be retaken


FINAL_CLAIM_STATUSES = frozenset({ClaimStatus.EXECUTED, ClaimStatus.DECLINED})
# Claims whose amount is free again (the ledger proves nothing was debited).
# No claim leaves the reconciler's index when its status is written: an executed
# one leaves it once the ERP has the refund, a released one once the ERP has freed
# the reservation (``mark_erp_updated``, after the ERP's COMMIT). A process that
# dies between the two leaves it listed, and the reconciler finishes it.
SETTLED_CLAIM_STATUSES = frozenset({ClaimStatus.DECLINED, ClaimStatus.FAILED_BEFORE_GATEWAY})
# Statuses whose write keeps the claim's place in the reconciler's list (``_settlement``).
_KEEPS_ITS_VISIT = frozenset({ClaimStatus.SENDING, ClaimStatus.EXECUTED}) | SETTLED_CLAIM_STATUSES

DETAIL_MAX = 200  # characters of a claim's ``detalhe``: a note for people, never a whole body


def clip_detail(detail: str) -> str:
    """What the ledger keeps of a failure's description. Its sources include text
    from outside (a gateway's error body), which must not grow an item toward
    DynamoDB's 400 KB limit (the write would fail and leave the claim unsettled)."""
    return detail if len(detail) <= DETAIL_MAX else detail[: DETAIL_MAX - 1] + "…"


@dataclass(frozen=True)
class RefundClaim:
    key: str  # chaveIdempotencia
    conversation_id: str
    order_id: str
    customer_id: int
    amount: Decimal
    status: ClaimStatus
    owner: str  # the fencing token of the invocation that holds the claim
    lease_until_ms: int
    created_at: str
    updated_at: str
    executions: int = 1  # how many invocations have held it (1 + retakes)
    gateway_transaction: str | None = None
    detail: str | None = None
    erp_updated: bool = False  # the ERP agrees with ``status`` (refund applied, or reservation freed)
    first_send_at: str | None = None  # the first ``envio_possivel`` record (never rewritten)

    def lease_expired(self, now_ms: int) -> bool:
        return now_ms >= self.lease_until_ms

    def first_possible_send_ms(self) -> int:
        """When a request may first have left for this key: the first send record,
        or (a claim written without one) its creation, which is no later."""
        when = self.first_send_at or self.created_at
        return int(datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() * 1000)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> RefundClaim:
        return cls(
            key=item["chaveIdempotencia"],
            conversation_id=item["conversaId"],
            order_id=item["pedidoId"],
            customer_id=int(item["clienteId"]),
            amount=Decimal(item["valor"]),
            status=ClaimStatus(item["status"]),
            owner=item["dono"],
            lease_until_ms=int(item["leaseAteMs"]),
            created_at=item["criadoEm"],
            updated_at=item["atualizadoEm"],
            executions=int(item.get("execucoes", 1)),
            gateway_transaction=item.get("transacaoGateway"),
            detail=item.get("detalhe"),
            erp_updated=bool(item.get("erpAtualizado", False)),
            first_send_at=item.get("primeiroEnvioEm"),
        )

    def to_item(self) -> dict[str, Any]:
        """The new claim's item: in the reconciler's index; the conversation's history
        reaches it through its counter (``AuditStore.history``)."""
        return {
            TABLE_KEY: claim_pk(self.key), "tipo": ItemType.CLAIM.value, "chaveIdempotencia": self.key,
            "conversaId": self.conversation_id, "pedidoId": self.order_id, "clienteId": self.customer_id,
            "valor": self.amount, "status": self.status.value, "dono": self.owner, "leaseAteMs": self.lease_until_ms,
            "execucoes": self.executions, "criadoEm": self.created_at, "atualizadoEm": self.updated_at,
            # No history-index entry of its own (no ``registradoEm``): ``history`` finds it
            # by the key its counter names, one index write fewer per refund.
            GSI_UNSETTLED_PARTITION: UNSETTLED_MARK, GSI_UNSETTLED_SORT: self.created_at,
        }


class ClaimTaken(LedgerError):
    """The conditional claim lost: somebody holds (or held) this idempotency key."""

    def __init__(self, existing: RefundClaim) -> None:
        super().__init__(f"claim {existing.key} already exists ({existing.status})")
        self.existing = existing


class ClaimLost(LedgerError):
    """A fenced write on a claim failed: another invocation took the claim over."""


class RefundClaims(Protocol):
    """What the refund Lambda and the reconciler need of the ledger."""

    def now_ms(self) -> int: ...

    def get_claim(self, key: str) -> RefundClaim | None: ...

    def claim_refund(self, *, key: str, conversation_id: str, order_id: str, customer_id: int,
                     amount: Decimal, lease_s: int) -> RefundClaim: ...

    def retake_claim(self, existing: RefundClaim, *, amount: Decimal, lease_s: int,
                     status: ClaimStatus = ClaimStatus.IN_PROGRESS) -> RefundClaim: ...

    def settle_claim(self, claim: RefundClaim, status: ClaimStatus, *, gateway_transaction: str | None = None,
                     detail: str | None = None, amount: Decimal | None = None,
                     erp_updated: bool = False) -> RefundClaim: ...

    def mark_erp_updated(self, claim: RefundClaim) -> RefundClaim: ...

    def unsettled_claims(self, *, limit: int = 100) -> list[RefundClaim]: ...


@dataclass
class _ClaimUpdate:
    """The SET clauses of one fenced claim write, with their names and values."""

    sets: list[str]
    names: dict[str, str]
    values: dict[str, Any]

    def add(self, clause: str, placeholder: str, value: Any) -> None:
        self.sets.append(clause)
        self.values[placeholder] = value


def _settlement(claim: RefundClaim, status: ClaimStatus, now: str, optional: dict[str, Any],
                erp_updated: bool = False) -> _ClaimUpdate:
    """The fenced write of a transition; ``optional`` maps attribute → value (None: unchanged).
    ``erp_updated``: the ERP already committed what this status means, so the same write
    says so and takes the claim out of the reconciler's list (``mark_erp_updated``'s job)."""
    update = _ClaimUpdate(["#st = :st", "atualizadoEm = :agora"], {"#st": "status", "#pend": GSI_UNSETTLED_PARTITION},
                          {":st": status.value, ":agora": now, ":dono": claim.owner})
    if erp_updated:
        update.add("erpAtualizado = :sim", ":sim", True)
    elif status in _KEEPS_ITS_VISIT:
        # Written (fenced on ``dono``) by the owner whose claim or retake wrote
        # ``visitadoEm`` moments ago — a send recorded, the gateway's answer heard:
        # moving it again would barely change the reconciler's order but cost the
        # index a delete and a put. An executed or released claim stays listed only
        # until the ERP agrees (``mark_erp_updated``), which the reconciler does
        # first thing; staying nearer the front only gets that done sooner.
        update.add("#pend = :pend", ":pend", UNSETTLED_MARK)
    else:  # still pending: this visit sends it to the back of the reconciler's list
        update.names["#visita"] = GSI_UNSETTLED_SORT
        update.sets.append("#visita = :agora")
        update.add("#pend = :pend", ":pend", UNSETTLED_MARK)
    if status is ClaimStatus.SENDING:
        # The gateway's idempotency window starts at the first request; a later
        # retake keeps the earliest time (if_not_exists), the conservative one.
        update.sets.append("primeiroEnvioEm = if_not_exists(primeiroEnvioEm, :agora)")
    for index, (attribute, value) in enumerate(optional.items()):
        if value is not None:
            update.add(f"{attribute} = :v{index}", f":v{index}", value)
    return update


def _expression(update: _ClaimUpdate, erp_updated: bool) -> str:
    return "SET " + ", ".join(update.sets) + (" REMOVE #pend" if erp_updated else "")


def _settled(claim: RefundClaim, status: ClaimStatus, now: str, gateway_transaction: str | None,
             detail: str | None, amount: Decimal | None) -> RefundClaim:
    """The claim as ``settle_claim`` just stored it."""
    first_send = claim.first_send_at or (now if status is ClaimStatus.SENDING else None)
    return replace(claim, status=status, updated_at=now,
                   gateway_transaction=gateway_transaction or claim.gateway_transaction,
                   detail=detail or claim.detail, amount=claim.amount if amount is None else amount,
                   first_send_at=first_send)


class ClaimStore:
    """Refund claims and first-refund marks, on ``self.table`` (a ``LedgerTable``)."""

    table: LedgerTable

    def get_claim(self, key: str) -> RefundClaim | None:
        item = self.table.get(claim_pk(key))
        return RefundClaim.from_item(item) if item else None

    def claim_refund(self, *, key: str, conversation_id: str, order_id: str, customer_id: int,
                     amount: Decimal, lease_s: int) -> RefundClaim:
        """Claim the idempotency key with one conditional PutItem; raises ClaimTaken."""
        now = self.table.now_ms()
        claim = RefundClaim(
            key=key, conversation_id=conversation_id, order_id=order_id, customer_id=customer_id, amount=amount,
            status=ClaimStatus.IN_PROGRESS, owner=uuid.uuid4().hex, lease_until_ms=now + lease_s * 1000,
            created_at=self.table.iso(now), updated_at=self.table.iso(now),
        )
        try:
            self.table.client.put_item(
                TableName=self.table.name, Item=serialize(claim.to_item()),
                ConditionExpression="attribute_not_exists(pk)", ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if condition_failed(err):
                old = old_item(err) or self.table.get(claim_pk(key))
                if old is None:  # the claim that failed the condition is gone: the error as it came
                    raise
                raise ClaimTaken(RefundClaim.from_item(old)) from None
            raise
        return claim

    def retake_claim(self, existing: RefundClaim, *, amount: Decimal, lease_s: int,
                     status: ClaimStatus = ClaimStatus.IN_PROGRESS) -> RefundClaim:
        """Take over a claim that is not final, as ``status`` under a new owner.

        Fenced on the previous owner and status: of two invocations retaking the
        same claim, exactly one wins; the other gets ClaimTaken with the winner.
        The caller (the refund state machine) decides ``status`` and ``amount``:
        a claim a request may have left for keeps its own amount.
        """
        now = self.table.now_ms()
        new = replace(existing, status=status, owner=uuid.uuid4().hex, lease_until_ms=now + lease_s * 1000,
                      amount=amount, updated_at=self.table.iso(now), executions=existing.executions + 1, detail=None,
                      erp_updated=False)
        try:
            self.table.client.update_item(
                TableName=self.table.name, Key=self.table.key(claim_pk(existing.key)),
                UpdateExpression=(
                    "SET #st = :novo, dono = :dono, leaseAteMs = :lease, valor = :valor, "
                    "atualizadoEm = :agora, #visita = :agora, execucoes = execucoes + :um, #pend = :pend "
                    "REMOVE detalhe, erpAtualizado"  # a new generation: the ERP has not seen it yet
                ),
                ConditionExpression="dono = :dono_antigo AND #st = :st_antigo",
                ExpressionAttributeNames={"#st": "status", "#pend": GSI_UNSETTLED_PARTITION,
                                          "#visita": GSI_UNSETTLED_SORT},
                ExpressionAttributeValues=serialize({
                    ":novo": new.status.value, ":dono": new.owner, ":lease": new.lease_until_ms, ":valor": amount,
                    ":agora": new.updated_at, ":um": 1, ":pend": UNSETTLED_MARK,
                    ":dono_antigo": existing.owner, ":st_antigo": existing.status.value,
                }),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if condition_failed(err):
                raise ClaimTaken(RefundClaim.from_item(old_item(err) or {})) from None
            raise
        return new

    def settle_claim(self, claim: RefundClaim, status: ClaimStatus, *, gateway_transaction: str | None = None,
                     detail: str | None = None, amount: Decimal | None = None,
                     erp_updated: bool = False) -> RefundClaim:
        """Record a transition, fenced on the claim's owner (raises ClaimLost). The
        claim stays in the reconciler's sparse index until the ERP agrees with a final
        or released status: ``mark_erp_updated`` after the ERP's COMMIT, or this very
        write with ``erp_updated`` when that COMMIT came first (an executed refund)."""
        if erp_updated and status is not ClaimStatus.EXECUTED and status not in SETTLED_CLAIM_STATUSES:
            raise ValueError(f"the ERP has nothing to agree with in {status}")
        now = self.table.iso()
        detail = None if detail is None else clip_detail(detail)
        update = _settlement(claim, status, now, {"transacaoGateway": gateway_transaction, "detalhe": detail,
                                                  "valor": amount}, erp_updated)
        try:
            self.table.client.update_item(
                TableName=self.table.name, Key=self.table.key(claim_pk(claim.key)),
                UpdateExpression=_expression(update, erp_updated), ConditionExpression="dono = :dono",
                ExpressionAttributeNames=update.names, ExpressionAttributeValues=serialize(update.values),
            )
        except ClientError as err:
            if condition_failed(err):
                raise ClaimLost(claim.key) from None
            raise
        settled = _settled(claim, status, now, gateway_transaction, detail, amount)
        return replace(settled, erp_updated=True) if erp_updated else settled

    def unsettled_claims(self, *, limit: int = 100) -> list[RefundClaim]:
        """Refund claims not yet settled with the gateway, least recently visited
        first: a Query on the sparse index (only unsettled claims are in it), never
        a Scan. Every visit that leaves a claim pending rewrites its ``visitadoEm``,
        so successive passes rotate through the whole list."""
        items = self.table.pending(UNSETTLED_MARK, limit=limit)
        return [RefundClaim.from_item(item) for item in items]

    def mark_erp_updated(self, claim: RefundClaim) -> RefundClaim:
        """The ERP agrees with the claim (its refund applied, or its reservation freed),
        committed: the claim leaves the reconciler's list. Call it only after the ERP's
        COMMIT. Fenced on owner and status (raises ClaimLost): a released claim retaken
        since is a new generation, listed for its own sake."""
        if claim.status is not ClaimStatus.EXECUTED and claim.status not in SETTLED_CLAIM_STATUSES:
            raise ValueError(f"the ERP has nothing to agree with in {claim.status}")
        try:
            self.table.client.update_item(
                TableName=self.table.name, Key=self.table.key(claim_pk(claim.key)),
                UpdateExpression="SET erpAtualizado = :sim REMOVE #pend",
                ConditionExpression="#st = :st AND dono = :dono",
                ExpressionAttributeNames={"#st": "status", "#pend": GSI_UNSETTLED_PARTITION},
                ExpressionAttributeValues=serialize({":sim": True, ":st": claim.status.value, ":dono": claim.owner}),
            )
        except ClientError as err:
            if condition_failed(err):
                raise ClaimLost(claim.key) from None
            raise
        return replace(claim, erp_updated=True)

    def first_refund_conversation(self, *, order_id: str, conversation_id: str) -> str:
        """The conversation that first asked to refund this order: this one, when its
        conditional PutItem wins (or it already owns the mark), else the owner's id.
        Race-free: two conversations asking at once get one owner, so the other's
        refund is a second refund (the confirmation gate asks a person)."""
        pk = first_refund_pk(order_id)
        try:
            self.table.client.put_item(
                TableName=self.table.name,
                Item=serialize({TABLE_KEY: pk, "tipo": ItemType.FIRST_REFUND.value,
                                "conversaDona": checked_id(conversation_id), "pedidoId": order_id,
                                "criadoEm": self.table.iso()}),
                ConditionExpression="attribute_not_exists(pk) OR conversaDona = :c",
                ExpressionAttributeValues=serialize({":c": conversation_id}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if not condition_failed(err):
                raise
            old = old_item(err) or self.table.get(pk) or {}
            return str(old.get("conversaDona", ""))
        return conversation_id
