"""The ledger: one DynamoDB table, and the only module that knows its keys.

Every item type the agent writes lives here, with its key format and the single
conditional write that makes each decision race-free. The orchestrator and the
refund Lambda both go through this module, so no key is spelled in two places.

Table ``cadencia-agente-execucoes`` (partition key ``pk``; sparse GSI
``porConversa`` on ``conversaId`` + ``registradoEm`` for reading one conversation's
history). Item types, by the ``tipo`` attribute:

=====================  =========================================  ===============================
tipo                   pk                                         decided by
=====================  =========================================  ===============================
reivindicacao          ``reivindicacao#{chaveIdempotencia}``      PutItem attribute_not_exists
contador_tentativas    ``contador#{conversa}#{assunto}#{tool}``   UpdateItem ADD (atomic number)
tentativa              ``tentativa#{conversa}#{assunto}#{tool}#n`` PutItem attribute_not_exists
conversa               ``conversa#{conversa}``                    UpdateItem with version fence
                                                                  (+ no pending cancellation;
                                                                  ``pendencia = humano`` while
                                                                  aguardando_humano)
mensagem               ``mensagem#{conversa}#{mensagemId}``       PutItem attribute_not_exists
auditoria              ``auditoria#{uuid}``                       PutItem attribute_not_exists
primeiro_reembolso     ``primeiro-reembolso#{pedido}``            PutItem attribute_not_exists (or
                                                                  the same conversation)
aprovacao              ``aprovacao#{approval_id(...)}``           PutItem attribute_not_exists;
                                                                  decided/consumed by a conditional
                                                                  UpdateItem on its status
=====================  =========================================  ===============================

``envio#{wamid}`` (the WhatsApp reply outbox) is owned by ``canal_whatsapp.outbox``.

``chaveIdempotencia`` keeps Lab 87's format ``{conversaId}#{pedidoId}#reembolso``.
Identifiers may not contain ``#`` (the models at the edges enforce the id patterns of
``cadencia_shared.models``),
so no two different tuples can produce the same key.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

TABLE_KEY = "pk"
GSI_BY_CONVERSATION = "porConversa"
GSI_PARTITION = "conversaId"
GSI_SORT = "registradoEm"
# Sparse GSI of refund claims not yet settled with the gateway: only those items
# carry ``pendencia``, so the reconciler reads its work list without a scan.
GSI_UNSETTLED = "reembolsosPendentes"
GSI_UNSETTLED_PARTITION = "pendencia"
# The unsettled index's sort key: when the claim was last written by a visit (its
# creation, a retake, an unsettled outcome). Oldest visit first, so a claim the
# gateway keeps unknown goes to the back after each visit and can never starve the
# claims behind it. ``registradoEm`` keeps its meaning (creation, ``porConversa``).
GSI_UNSETTLED_SORT = "visitadoEm"
UNSETTLED_MARK = "reembolso"
# Approval requests awaiting a decision share that sparse index under their own
# partition value: operators list them with a Query, never a Scan.
APPROVAL_PENDING_MARK = "aprovacao"
# ... and conversations waiting for a person (aguardando_humano), for scripts/atendente.py.
HUMAN_PENDING_MARK = "humano"
TTL_ATTRIBUTE = "expiraEm"

ATTEMPT_EVENT = "TENTATIVA_DE_FERRAMENTA_REGISTRADA"
INBOUND_TTL_S = 7 * 24 * 3600

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


class ItemType(StrEnum):
    CLAIM = "reivindicacao"
    COUNTER = "contador_tentativas"
    ATTEMPT = "tentativa"
    CONVERSATION = "conversa"
    INBOUND = "mensagem"
    AUDIT = "auditoria"
    APPROVAL = "aprovacao"
    FIRST_REFUND = "primeiro_reembolso"


class ClaimStatus(StrEnum):
    IN_PROGRESS = "em_processamento"  # claimed and reserved; no request has left for the key
    SENDING = "envio_possivel"  # recorded before the POST: one request may be leaving now
    RECONCILING = "em_conciliacao"  # re-sending the claim's own request to learn its outcome
    EXECUTED = "executado"  # the gateway debited (final)
    DECLINED = "recusado_pelo_gateway"  # the gateway refused it (final)
    UNKNOWN = "desconhecido"  # a request may have left, no definitive answer: amount held
    FAILED_BEFORE_GATEWAY = "falhou_antes_do_gateway"  # proven never sent: may be retaken


FINAL_CLAIM_STATUSES = frozenset({ClaimStatus.EXECUTED, ClaimStatus.DECLINED})
# Claims that leave the reconciler's index when settled. An executed claim leaves
# it only once the ERP has it too (``mark_erp_updated``), so a crash between the
# two is finished by the reconciler, not only by a repeat of the conversation.
SETTLED_CLAIM_STATUSES = frozenset({ClaimStatus.DECLINED, ClaimStatus.FAILED_BEFORE_GATEWAY})


class AttemptResult(StrEnum):
    """``resultado`` of an attempt record (Lab 87's names first)."""

    EXECUTED = "executado"
    BLOCKED_BY_IDEMPOTENCY = "bloqueado_por_idempotencia"
    BLOCKED_BY_CEILING = "bloqueado_por_teto"
    PENDING = "pendente"  # allowed, tool not answered yet
    REFUSED_BY_TOOL = "recusado_pela_ferramenta"  # typed business error (unknown order, bad amount...)
    TOOL_ERROR = "erro_da_ferramenta"  # the tool crashed, timed out or was throttled
    IN_PROGRESS_ELSEWHERE = "em_processamento"  # a concurrent call holds the refund claim
    OUTCOME_UNKNOWN = "resultado_desconhecido"  # gateway did not answer; reconciled later
    DECLINED_BY_GATEWAY = "recusado_pelo_gateway"


class InboundStatus(StrEnum):
    NEW = "nova"
    DONE = "respondida"
    IN_PROGRESS = "processando"
    FAILED = "falhou"


class ConversationStatus(StrEnum):
    ACTIVE = "ativa"
    WAITING_HUMAN = "aguardando_humano"
    WAITING_APPROVAL = "aguardando_aprovacao"  # a call awaits a person's decision (issue 10)


DETAIL_MAX = 200  # characters of a claim's ``detalhe``: a note for people, never a whole body


def clip_detail(detalhe: str) -> str:
    """What the ledger keeps of a failure's description. Its sources include text
    from outside (a gateway's error body), which must not grow an item toward
    DynamoDB's 400 KB limit (the write would fail and leave the claim unsettled)."""
    return detalhe if len(detalhe) <= DETAIL_MAX else detalhe[: DETAIL_MAX - 1] + "…"


def refund_idempotency_key(conversa_id: str, pedido_id: str) -> str:
    """Lab 87's key: one refund per (conversation, order)."""
    return f"{_id(conversa_id)}#{_id(pedido_id)}#reembolso"


def approval_id(conversa_id: str, ferramenta: str, versao: str, argumentos_sha256: str) -> str:
    """One approval request per (conversation, tool, tool version, canonical
    arguments): the same call asked again finds the same record, and any other
    conversation, amount or version is a different record. Short enough to type."""
    material = "\x00".join((_id(conversa_id), _id(ferramenta), _id(versao), _id(argumentos_sha256)))
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def approval_pk(approval: str) -> str:
    return f"aprovacao#{_id(approval)}"


def _id(value: str) -> str:
    if not value or "#" in value:
        raise ValueError(f"identifier not allowed in a ledger key: {value!r}")
    return value


# --- errors -------------------------------------------------------------------


class LedgerError(Exception):
    pass


class ClaimTaken(LedgerError):
    """The conditional claim lost: somebody holds (or held) this idempotency key."""

    def __init__(self, existing: RefundClaim) -> None:
        super().__init__(f"claim {existing.chave} already exists ({existing.status})")
        self.existing = existing


class ClaimLost(LedgerError):
    """A fenced write on a claim failed: another invocation took the claim over."""


class ConversationBusy(LedgerError):
    """Another invocation holds this conversation's lease."""


class ConversationOfAnotherCustomer(LedgerError):
    """The conversation id exists and belongs to a different customer."""


class StaleConversation(LedgerError):
    """The commit's version fence failed: someone else advanced the conversation."""


class CancellationPending(LedgerError):
    """The commit found an operator's cancellation on the conversation (our lease
    and version still hold): the turn must end as cancelled instead."""


# An operator's cancellation: an attribute of the conversation item, so the
# commit's own condition sees it atomically (no extra item, no extra IAM action).
CANCELLATION_ATTRIBUTE = "cancelamentoSolicitadoEm"


# --- item models --------------------------------------------------------------


@dataclass(frozen=True)
class RefundClaim:
    chave: str
    conversa_id: str
    pedido_id: str
    cliente_id: int
    valor: Decimal
    status: ClaimStatus
    dono: str
    lease_ate_ms: int
    criado_em: str
    atualizado_em: str
    execucoes: int = 1
    transacao_gateway: str | None = None
    detalhe: str | None = None
    erp_atualizado: bool = False
    primeiro_envio_em: str | None = None  # the first ``envio_possivel`` record (never rewritten)

    def lease_expired(self, now_ms: int) -> bool:
        return now_ms >= self.lease_ate_ms

    def first_possible_send_ms(self) -> int:
        """When a request may first have left for this key: the first send record,
        or (a claim written without one) its creation, which is no later."""
        when = self.primeiro_envio_em or self.criado_em
        return int(datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() * 1000)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> RefundClaim:
        return cls(
            chave=item["chaveIdempotencia"],
            conversa_id=item["conversaId"],
            pedido_id=item["pedidoId"],
            cliente_id=int(item["clienteId"]),
            valor=Decimal(item["valor"]),
            status=ClaimStatus(item["status"]),
            dono=item["dono"],
            lease_ate_ms=int(item["leaseAteMs"]),
            criado_em=item["criadoEm"],
            atualizado_em=item["atualizadoEm"],
            execucoes=int(item.get("execucoes", 1)),
            transacao_gateway=item.get("transacaoGateway"),
            detalhe=item.get("detalhe"),
            erp_atualizado=bool(item.get("erpAtualizado", False)),
            primeiro_envio_em=item.get("primeiroEnvioEm"),
        )


@dataclass(frozen=True)
class Attempt:
    conversa_id: str
    assunto: str
    pedido_id: str | None
    ferramenta: str
    numero: int
    teto: int
    chave_idempotencia: str | None
    registrado_em: str

    @property
    def allowed(self) -> bool:
        return self.numero <= self.teto


@dataclass(frozen=True)
class ConversationState:
    conversa_id: str
    cliente_id: int
    status: ConversationStatus
    versao: int
    dono: str
    mensagens: list[dict[str, Any]] = field(default_factory=list)
    turnos: int = 0

    @classmethod
    def from_item(cls, conversa_id: str, item: dict[str, Any], *, dono: str) -> ConversationState:
        return cls(
            conversa_id=conversa_id,
            cliente_id=int(item["clienteId"]),
            status=ConversationStatus(item["status"]),
            versao=int(item["versao"]),
            dono=dono,
            mensagens=_decode_messages(item.get("mensagensZ")),
            turnos=int(item.get("turnos", 0)),
        )


@dataclass(frozen=True)
class InboundClaim:
    conversa_id: str
    mensagem_id: str
    status: InboundStatus
    resposta: dict[str, Any] | None = None
    dono: str = ""


# --- the ledger ---------------------------------------------------------------


class Ledger:
    """Typed operations on the ledger table. ``client`` is a boto3 DynamoDB client."""

    def __init__(
        self,
        table_name: str,
        client: Any | None = None,
        *,
        clock: Callable[[], float] = time.time,
        audit_chain: Any = None,
    ) -> None:
        """``audit_chain``: a ``cadencia_shared.audit_chain.AuditChain``; given, audit
        records go to its hash-chained table instead of ``auditoria#`` items here."""
        if client is None:
            import boto3

            client = boto3.client("dynamodb")
        self.table_name = table_name
        self.client = client
        self._clock = clock
        self.audit_chain = audit_chain

    # time -----------------------------------------------------------------
    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _iso(self, ms: int | None = None) -> str:
        ms = self.now_ms() if ms is None else ms
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    # low level --------------------------------------------------------------
    @staticmethod
    def _ser(values: dict[str, Any]) -> dict[str, Any]:
        return {k: _serializer.serialize(v) for k, v in values.items() if v is not None}

    @staticmethod
    def _de(item: dict[str, Any]) -> dict[str, Any]:
        return {k: _deserializer.deserialize(v) for k, v in item.items()}

    def _key(self, pk: str) -> dict[str, Any]:
        return {TABLE_KEY: {"S": pk}}

    def _get(self, pk: str) -> dict[str, Any] | None:
        resp = self.client.get_item(TableName=self.table_name, Key=self._key(pk), ConsistentRead=True)
        return self._de(resp["Item"]) if "Item" in resp else None

    @staticmethod
    def _condition_failed(err: ClientError) -> bool:
        return err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"

    def _old_item(self, err: ClientError) -> dict[str, Any] | None:
        item = err.response.get("Item")
        return self._de(item) if item else None

    # refund claims ------------------------------------------------------------
    def get_claim(self, chave: str) -> RefundClaim | None:
        item = self._get(f"reivindicacao#{chave}")
        return RefundClaim.from_item(item) if item else None

    def claim_refund(
        self,
        *,
        chave: str,
        conversa_id: str,
        pedido_id: str,
        cliente_id: int,
        valor: Decimal,
        lease_s: int,
    ) -> RefundClaim:
        """Claim the idempotency key with one conditional PutItem; raises ClaimTaken."""
        now = self.now_ms()
        claim = RefundClaim(
            chave=chave,
            conversa_id=conversa_id,
            pedido_id=pedido_id,
            cliente_id=cliente_id,
            valor=valor,
            status=ClaimStatus.IN_PROGRESS,
            dono=uuid.uuid4().hex,
            lease_ate_ms=now + lease_s * 1000,
            criado_em=self._iso(now),
            atualizado_em=self._iso(now),
        )
        item = {
            TABLE_KEY: f"reivindicacao#{chave}",
            "tipo": ItemType.CLAIM.value,
            "chaveIdempotencia": chave,
            "conversaId": conversa_id,
            "pedidoId": pedido_id,
            "clienteId": cliente_id,
            "valor": valor,
            "status": claim.status.value,
            "dono": claim.dono,
            "leaseAteMs": claim.lease_ate_ms,
            "execucoes": 1,
            "criadoEm": claim.criado_em,
            "atualizadoEm": claim.atualizado_em,
            GSI_SORT: claim.criado_em,
            GSI_UNSETTLED_PARTITION: UNSETTLED_MARK,
            GSI_UNSETTLED_SORT: claim.criado_em,
        }
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=self._ser(item),
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if self._condition_failed(err):
                old = self._old_item(err) or self._get(item[TABLE_KEY])
                raise ClaimTaken(RefundClaim.from_item(old)) from None
            raise
        return claim

    def retake_claim(
        self,
        existing: RefundClaim,
        *,
        valor: Decimal,
        lease_s: int,
        status: ClaimStatus = ClaimStatus.IN_PROGRESS,
    ) -> RefundClaim:
        """Take over a claim that is not final, as ``status`` under a new owner.

        Fenced on the previous owner and status: of two invocations retaking the
        same claim, exactly one wins; the other gets ClaimTaken with the winner.
        The caller (the refund state machine) decides ``status`` and ``valor``:
        a claim a request may have left for keeps its own amount.
        """
        now = self.now_ms()
        new = replace(
            existing,
            status=status,
            dono=uuid.uuid4().hex,
            lease_ate_ms=now + lease_s * 1000,
            valor=valor,
            atualizado_em=self._iso(now),
            execucoes=existing.execucoes + 1,
            detalhe=None,
        )
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(f"reivindicacao#{existing.chave}"),
                UpdateExpression=(
                    "SET #st = :novo, dono = :dono, leaseAteMs = :lease, valor = :valor, "
                    "atualizadoEm = :agora, #visita = :agora, execucoes = execucoes + :um, #pend = :pend "
                    "REMOVE detalhe"
                ),
                ConditionExpression="dono = :dono_antigo AND #st = :st_antigo",
                ExpressionAttributeNames={"#st": "status", "#pend": GSI_UNSETTLED_PARTITION,
                                          "#visita": GSI_UNSETTLED_SORT},
                ExpressionAttributeValues=self._ser(
                    {
                        ":novo": new.status.value,
                        ":dono": new.dono,
                        ":lease": new.lease_ate_ms,
                        ":valor": valor,
                        ":agora": new.atualizado_em,
                        ":um": 1,
                        ":pend": UNSETTLED_MARK,
                        ":dono_antigo": existing.dono,
                        ":st_antigo": existing.status.value,
                    }
                ),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if self._condition_failed(err):
                raise ClaimTaken(RefundClaim.from_item(self._old_item(err) or {})) from None
            raise
        return new

    def settle_claim(
        self,
        claim: RefundClaim,
        status: ClaimStatus,
        *,
        transacao_gateway: str | None = None,
        detalhe: str | None = None,
        valor: Decimal | None = None,
    ) -> RefundClaim:
        """Record a transition, fenced on the claim's owner (raises ClaimLost). A
        settled claim leaves the reconciler's sparse index; an unsettled one stays."""
        now = self.now_ms()
        names = {"#st": "status", "#pend": GSI_UNSETTLED_PARTITION}
        values: dict[str, Any] = {":st": status.value, ":agora": self._iso(now), ":dono": claim.dono}
        sets = ["#st = :st", "atualizadoEm = :agora"]
        if status in SETTLED_CLAIM_STATUSES:
            tail = " REMOVE #pend"
        else:  # still pending: this visit sends it to the back of the reconciler's list
            names["#visita"] = GSI_UNSETTLED_SORT
            sets += ["#pend = :pend", "#visita = :agora"]
            values[":pend"] = UNSETTLED_MARK
            tail = ""
        first_send = claim.primeiro_envio_em
        if status is ClaimStatus.SENDING:
            # The gateway's idempotency window starts at the first request; a later
            # retake keeps the earliest time (if_not_exists), the conservative one.
            sets.append("primeiroEnvioEm = if_not_exists(primeiroEnvioEm, :agora)")
            first_send = first_send or values[":agora"]
        if transacao_gateway is not None:
            sets.append("transacaoGateway = :tx")
            values[":tx"] = transacao_gateway
        if detalhe is not None:
            detalhe = clip_detail(detalhe)
            sets.append("detalhe = :det")
            values[":det"] = detalhe
        if valor is not None:
            sets.append("valor = :valor")
            values[":valor"] = valor
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(f"reivindicacao#{claim.chave}"),
                UpdateExpression="SET " + ", ".join(sets) + tail,
                ConditionExpression="dono = :dono",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=self._ser(values),
            )
        except ClientError as err:
            if self._condition_failed(err):
                raise ClaimLost(claim.chave) from None
            raise
        return replace(
            claim,
            status=status,
            atualizado_em=values[":agora"],
            transacao_gateway=transacao_gateway or claim.transacao_gateway,
            detalhe=detalhe or claim.detalhe,
            valor=claim.valor if valor is None else valor,
            primeiro_envio_em=first_send,
        )

    def unsettled_claims(self, *, limit: int = 100) -> list[RefundClaim]:
        """Refund claims not yet settled with the gateway, least recently visited
        first: a Query on the sparse index (only unsettled claims are in it), never
        a Scan. Every visit that leaves a claim pending rewrites its ``visitadoEm``,
        so successive passes rotate through the whole list."""
        claims: list[RefundClaim] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": GSI_UNSETTLED,
            "KeyConditionExpression": "#pend = :pend",
            "ExpressionAttributeNames": {"#pend": GSI_UNSETTLED_PARTITION},
            "ExpressionAttributeValues": self._ser({":pend": UNSETTLED_MARK}),
            "ScanIndexForward": True,
        }
        while len(claims) < limit:
            resp = self.client.query(**kwargs, Limit=limit - len(claims))
            claims.extend(RefundClaim.from_item(self._de(item)) for item in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        return claims

    def mark_erp_updated(self, claim: RefundClaim) -> RefundClaim:
        self.client.update_item(
            TableName=self.table_name,
            Key=self._key(f"reivindicacao#{claim.chave}"),
            UpdateExpression="SET erpAtualizado = :sim REMOVE #pend",
            ConditionExpression="#st = :executado",
            ExpressionAttributeNames={"#st": "status", "#pend": GSI_UNSETTLED_PARTITION},
            ExpressionAttributeValues=self._ser({":sim": True, ":executado": ClaimStatus.EXECUTED.value}),
        )
        return replace(claim, erp_atualizado=True)

    # retry ceiling ----------------------------------------------------------------
    def register_attempt(
        self,
        *,
        conversa_id: str,
        assunto: str,
        ferramenta: str,
        teto: int,
        pedido_id: str | None = None,
        chave_idempotencia: str | None = None,
    ) -> Attempt:
        """Number this attempt with one atomic counter write and record it.

        The ``ADD`` on the counter is the whole decision: DynamoDB applies it
        atomically, so N racing callers get the numbers 1..N, each exactly once,
        and exactly ``teto`` of them are <= ``teto``. No read precedes it, so
        there is no count-then-act window (the race in Lab 87's Query).
        """
        key_part = f"{_id(conversa_id)}#{_id(assunto)}#{_id(ferramenta)}"
        now = self._iso()
        resp = self.client.update_item(
            TableName=self.table_name,
            Key=self._key(f"contador#{key_part}"),
            UpdateExpression="ADD tentativas :um SET tipo = :tipo, atualizadoEm = :agora",
            ExpressionAttributeValues=self._ser(
                {":um": 1, ":tipo": ItemType.COUNTER.value, ":agora": now}
            ),
            ReturnValues="UPDATED_NEW",
        )
        numero = int(resp["Attributes"]["tentativas"]["N"])
        attempt = Attempt(
            conversa_id=conversa_id,
            assunto=assunto,
            pedido_id=pedido_id,
            ferramenta=ferramenta,
            numero=numero,
            teto=teto,
            chave_idempotencia=chave_idempotencia,
            registrado_em=now,
        )
        initial = AttemptResult.PENDING if attempt.allowed else AttemptResult.BLOCKED_BY_CEILING
        self.client.put_item(
            TableName=self.table_name,
            Item=self._ser(
                {
                    TABLE_KEY: f"tentativa#{key_part}#{numero:04d}",
                    "tipo": ItemType.ATTEMPT.value,
                    "evento": ATTEMPT_EVENT,
                    "conversaId": conversa_id,
                    "pedidoId": pedido_id,
                    "assunto": assunto,
                    "ferramenta": ferramenta,
                    "tentativaNumero": numero,
                    "teto": teto,
                    "decisao": "permitida" if attempt.allowed else "bloqueada_por_teto",
                    "resultado": initial.value,
                    "chaveIdempotencia": chave_idempotencia,
                    "timestamp": now,
                    GSI_SORT: f"{now}#tentativa#{numero:04d}",
                }
            ),
            ConditionExpression="attribute_not_exists(pk)",
        )
        return attempt

    def record_attempt_result(self, attempt: Attempt, resultado: AttemptResult, detalhe: str | None = None) -> None:
        key_part = f"{attempt.conversa_id}#{attempt.assunto}#{attempt.ferramenta}"
        values: dict[str, Any] = {":r": resultado.value, ":agora": self._iso()}
        expr = "SET resultado = :r, concluidoEm = :agora"
        if detalhe:
            expr += ", detalhe = :d"
            values[":d"] = detalhe[:500]
        self.client.update_item(
            TableName=self.table_name,
            Key=self._key(f"tentativa#{key_part}#{attempt.numero:04d}"),
            UpdateExpression=expr,
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=self._ser(values),
        )

    def first_refund_conversation(self, *, pedido_id: str, conversa_id: str) -> str:
        """The conversation that first asked to refund this order: this one, when its
        conditional PutItem wins (or it already owns the mark), else the owner's id.
        Race-free: two conversations asking at once get one owner, so the other's
        refund is a second refund (the confirmation gate asks a person)."""
        pk = f"primeiro-reembolso#{_id(pedido_id)}"
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=self._ser({TABLE_KEY: pk, "tipo": ItemType.FIRST_REFUND.value, "conversaDona": _id(conversa_id),
                                "pedidoId": pedido_id, "criadoEm": self._iso()}),
                ConditionExpression="attribute_not_exists(pk) OR conversaDona = :c",
                ExpressionAttributeValues=self._ser({":c": conversa_id}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if not self._condition_failed(err):
                raise
            old = self._old_item(err) or self._get(pk) or {}
            return str(old.get("conversaDona", ""))
        return conversa_id

    # durable conversations ------------------------------------------------------
    def acquire_conversation(
        self, *, conversa_id: str, cliente_id: int, lease_s: int
    ) -> ConversationState:
        """Take the conversation's lease and a fencing version (creating it if new).

        Raises ConversationBusy while another invocation holds an unexpired lease,
        and ConversationOfAnotherCustomer when the id belongs to someone else.
        """
        now = self.now_ms()
        owner = uuid.uuid4().hex
        try:
            resp = self.client.update_item(
                TableName=self.table_name,
                Key=self._key(f"conversa#{_id(conversa_id)}"),
                UpdateExpression=(
                    "SET dono = :dono, leaseAteMs = :lease, versao = if_not_exists(versao, :zero) + :um, "
                    "clienteId = if_not_exists(clienteId, :cliente), tipo = :tipo, "
                    "#st = if_not_exists(#st, :ativa), criadoEm = if_not_exists(criadoEm, :agora)"
                ),
                ConditionExpression=(
                    "(attribute_not_exists(leaseAteMs) OR leaseAteMs < :agora_ms) "
                    "AND (attribute_not_exists(clienteId) OR clienteId = :cliente)"
                ),
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=self._ser(
                    {
                        ":dono": owner,
                        ":lease": now + lease_s * 1000,
                        ":zero": 0,
                        ":um": 1,
                        ":cliente": cliente_id,
                        ":tipo": ItemType.CONVERSATION.value,
                        ":ativa": ConversationStatus.ACTIVE.value,
                        ":agora": self._iso(now),
                        ":agora_ms": now,
                    }
                ),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if self._condition_failed(err):
                old = self._old_item(err) or {}
                if "clienteId" in old and int(old["clienteId"]) != cliente_id:
                    raise ConversationOfAnotherCustomer(conversa_id) from None
                raise ConversationBusy(conversa_id) from None
            raise
        return ConversationState.from_item(conversa_id, self._de(resp["Attributes"]), dono=owner)

    def read_conversation(self, conversa_id: str) -> ConversationState | None:
        """The stored state, without taking the lease (operators, the harness, tests)."""
        item = self._get(f"conversa#{_id(conversa_id)}")
        if item is None:
            return None
        return ConversationState.from_item(conversa_id, item, dono=item.get("dono", ""))

    def waiting_for_a_person(self, *, limit: int = 100) -> list[tuple[str, str]]:
        """(conversation id, waiting since) of conversations handed to a person, oldest
        first: a Query on the sparse index, never a Scan."""
        resp = self.client.query(
            TableName=self.table_name, IndexName=GSI_UNSETTLED, KeyConditionExpression="#pend = :pend",
            ExpressionAttributeNames={"#pend": GSI_UNSETTLED_PARTITION},
            ExpressionAttributeValues=self._ser({":pend": HUMAN_PENDING_MARK}), ScanIndexForward=True, Limit=limit)
        items = [self._de(i) for i in resp.get("Items", [])]
        return [(i[TABLE_KEY].removeprefix("conversa#"), i[GSI_SORT]) for i in items]

    def commit_conversation(
        self,
        state: ConversationState,
        *,
        mensagens: list[dict[str, Any]],
        status: ConversationStatus,
        inbound: InboundClaim | None = None,
        resposta: dict[str, Any] | None = None,
        cancelled: bool = False,
    ) -> ConversationState:
        """Write the new state and release the lease, fenced on (version, owner) —
        and, given ``inbound``, mark that message answered with ``resposta`` in the
        same transaction: the state and "this message was answered" commit together
        or not at all (so a redelivery can neither be lost nor run twice)."""
        values = {":m": _encode_messages(mensagens), ":st": status.value, ":um": 1, ":zero": 0,
                  ":agora": self._iso(), ":v": state.versao, ":dono": state.dono}
        # A conversation waiting for a person is in the sparse index (people list it with
        # a Query); any other status takes it out. The index's sort key is the claims'
        # ``visitadoEm`` (an item without it is not in the index): set to when the wait
        # began, kept while it lasts (``registradoEm`` too, what operators are shown).
        if status is ConversationStatus.WAITING_HUMAN:
            waiting = (", #pend = :humano, registradoEm = if_not_exists(registradoEm, :agora), "
                       "#visita = if_not_exists(#visita, :agora)")
            values[":humano"] = HUMAN_PENDING_MARK
            removed = ""
        else:
            waiting, removed = "", ", #pend, registradoEm, #visita"
        # An operator's cancellation wins over whatever the turn decided: the commit
        # of a turn that did not end as cancelled is refused while one is pending;
        # the cancelled turn's commit consumes it.
        fence = "versao = :v AND dono = :dono"
        if not cancelled:
            fence += f" AND attribute_not_exists({CANCELLATION_ATTRIBUTE})"
        update = {
            "TableName": self.table_name,
            "Key": self._key(f"conversa#{state.conversa_id}"),
            "UpdateExpression": (
                "SET mensagensZ = :m, #st = :st, versao = versao + :um, atualizadoEm = :agora, "
                f"turnos = if_not_exists(turnos, :zero) + :um{waiting} REMOVE dono, leaseAteMs{removed}"
                + (f", {CANCELLATION_ATTRIBUTE}" if cancelled else "")
            ),
            "ConditionExpression": fence,
            "ExpressionAttributeNames": {"#st": "status", "#pend": GSI_UNSETTLED_PARTITION,
                                         "#visita": GSI_UNSETTLED_SORT},
            "ExpressionAttributeValues": self._ser(values),
        }
        try:
            if inbound is None:
                self.client.update_item(**update)
            else:
                self.client.transact_write_items(
                    TransactItems=[{"Update": update}, {"Update": self._inbound_update(inbound, resposta, True)}]
                )
        except ClientError as err:
            reasons = [r.get("Code") for r in err.response.get("CancellationReasons", [])]
            if self._condition_failed(err) or "ConditionalCheckFailed" in reasons:
                if not cancelled and self._cancelled_under_our_lease(state):
                    raise CancellationPending(state.conversa_id) from None
                raise StaleConversation(state.conversa_id) from None
            raise
        return replace(state, mensagens=mensagens, status=status, versao=state.versao + 1, turnos=state.turnos + 1)

    def _cancelled_under_our_lease(self, state: ConversationState) -> bool:
        item = self._conversation_fields(state.conversa_id, "versao", "dono", CANCELLATION_ATTRIBUTE)
        return (item.get("versao") == state.versao and item.get("dono") == state.dono
                and CANCELLATION_ATTRIBUTE in item)

    def _conversation_fields(self, conversa_id: str, *names: str) -> dict[str, Any]:
        """A few attributes of the conversation, never its (large) message history."""
        resp = self.client.get_item(
            TableName=self.table_name, Key=self._key(f"conversa#{_id(conversa_id)}"), ConsistentRead=True,
            ProjectionExpression=", ".join(f"#a{i}" for i in range(len(names))),
            ExpressionAttributeNames={f"#a{i}": name for i, name in enumerate(names)},
        )
        return self._de(resp["Item"]) if "Item" in resp else {}

    def cancellation_pending(self, conversa_id: str) -> bool:
        """Whether an operator asked to stop this conversation's automatic turn
        (one strongly consistent GetItem of one attribute)."""
        return CANCELLATION_ATTRIBUTE in self._conversation_fields(conversa_id, CANCELLATION_ATTRIBUTE)

    def request_cancellation(self, conversa_id: str) -> bool:
        """The operator's command: flag the conversation. The turn in flight (or
        the next one) ends as cancelled and consumes the flag. False: no such
        conversation. Never touches the version or the lease, so it cannot
        break a fence — it only makes a commit that ignores it fail."""
        try:
            self.client.update_item(
                TableName=self.table_name, Key=self._key(f"conversa#{_id(conversa_id)}"),
                UpdateExpression=f"SET {CANCELLATION_ATTRIBUTE} = if_not_exists({CANCELLATION_ATTRIBUTE}, :agora)",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=self._ser({":agora": self._iso()}),
            )
        except ClientError as err:
            if self._condition_failed(err):
                return False
            raise
        return True

    def release_conversation(self, state: ConversationState) -> None:
        """Give the lease back without changing the state (a turn that failed cleanly)."""
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(f"conversa#{state.conversa_id}"),
                UpdateExpression="REMOVE dono, leaseAteMs",
                ConditionExpression="versao = :v AND dono = :dono",
                ExpressionAttributeValues=self._ser({":v": state.versao, ":dono": state.dono}),
            )
        except ClientError as err:
            if not self._condition_failed(err):
                raise

    # inbound messages --------------------------------------------------------------
    def begin_inbound(self, *, conversa_id: str, mensagem_id: str, lease_s: int) -> InboundClaim:
        """Mark an inbound message as being processed, once.

        The one caller that should process it gets status NEW and an owner token;
        a redelivery gets DONE (with the stored reply) or IN_PROGRESS. A message
        whose earlier processing failed, or whose processor died (expired lease),
        is NEW again — for a new owner, so a late writer cannot finish it.
        """
        now = self.now_ms()
        owner = uuid.uuid4().hex
        pk = f"mensagem#{_id(conversa_id)}#{_id(mensagem_id)}"
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=self._ser(
                    {
                        TABLE_KEY: pk,
                        "tipo": ItemType.INBOUND.value,
                        "status": InboundStatus.IN_PROGRESS.value,
                        "dono": owner,
                        "leaseAteMs": now + lease_s * 1000,
                        "recebidaEm": self._iso(now),
                        TTL_ATTRIBUTE: now // 1000 + INBOUND_TTL_S,
                    }
                ),
                ConditionExpression=(
                    "attribute_not_exists(pk) OR #st = :falhou OR (#st = :proc AND leaseAteMs < :agora)"
                ),
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=self._ser(
                    {
                        ":falhou": InboundStatus.FAILED.value,
                        ":proc": InboundStatus.IN_PROGRESS.value,
                        ":agora": now,
                    }
                ),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if self._condition_failed(err):
                old = self._old_item(err) or self._get(pk) or {}
                if old.get("status") == InboundStatus.DONE.value:
                    return InboundClaim(conversa_id, mensagem_id, InboundStatus.DONE, json.loads(old["resposta"]))
                return InboundClaim(conversa_id, mensagem_id, InboundStatus.IN_PROGRESS)
            raise
        return InboundClaim(conversa_id, mensagem_id, InboundStatus.NEW, dono=owner)

    def _inbound_update(self, inbound: InboundClaim, resposta: dict[str, Any] | None, ok: bool) -> dict[str, Any]:
        values: dict[str, Any] = {
            ":st": (InboundStatus.DONE if ok else InboundStatus.FAILED).value,
            ":agora": self._iso(),
            ":dono": inbound.dono,
            ":proc": InboundStatus.IN_PROGRESS.value,
        }
        sets = "SET #st = :st, concluidaEm = :agora"
        if resposta is not None:
            sets += ", resposta = :r"
            values[":r"] = json.dumps(resposta, ensure_ascii=False)
        return {
            "TableName": self.table_name,
            "Key": self._key(f"mensagem#{inbound.conversa_id}#{inbound.mensagem_id}"),
            "UpdateExpression": sets + " REMOVE leaseAteMs",
            # Only a message still being processed by this owner: an answered message is
            # never turned back into a failed one (a commit whose answer was lost, then
            # the failure path — tests/test_lost_commit_answer.py).
            "ConditionExpression": "dono = :dono AND #st = :proc",
            "ExpressionAttributeNames": {"#st": "status"},
            "ExpressionAttributeValues": self._ser(values),
        }

    def finish_inbound(self, inbound: InboundClaim, *, resposta: dict[str, Any] | None, ok: bool) -> None:
        """Store the reply (DONE) or release the message for redelivery (FAILED),
        only while this caller still owns it."""
        try:
            self.client.update_item(**self._inbound_update(inbound, resposta, ok))
        except ClientError as err:
            if not self._condition_failed(err):
                raise

    # audit -------------------------------------------------------------------------
    def append_audit(self, *, conversa_id: str | None, evento: str, detalhes: dict[str, Any]) -> str:
        """Append one audit event; never overwrites (attribute_not_exists)."""
        if self.audit_chain is not None:
            return str(self.audit_chain.append(conversa_id=conversa_id, evento=evento, detalhes=detalhes))
        event_id = uuid.uuid4().hex
        now = self._iso()
        self.client.put_item(
            TableName=self.table_name,
            Item=self._ser(
                {
                    TABLE_KEY: f"auditoria#{event_id}",
                    "tipo": ItemType.AUDIT.value,
                    "evento": evento,
                    "conversaId": conversa_id,
                    "timestamp": now,
                    "detalhes": json.dumps(detalhes, ensure_ascii=False, default=str),
                    GSI_SORT: f"{now}#auditoria#{event_id}" if conversa_id else None,
                }
            ),
            ConditionExpression="attribute_not_exists(pk)",
        )
        return event_id

    # reading a conversation's history (operators, the harness) ---------------------
    def history(self, conversa_id: str, *, tipo: ItemType | None = None) -> Iterator[dict[str, Any]]:
        """Every indexed item of one conversation in time order (GSI ``porConversa``)."""
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": GSI_BY_CONVERSATION,
            "KeyConditionExpression": "conversaId = :c",
            "ExpressionAttributeValues": self._ser({":c": conversa_id}),
        }
        if tipo is not None:
            kwargs["FilterExpression"] = "tipo = :t"
            kwargs["ExpressionAttributeValues"] = self._ser({":c": conversa_id, ":t": tipo.value})
        while True:
            resp = self.client.query(**kwargs)
            for item in resp.get("Items", []):
                yield self._de(item)
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


def _encode_messages(mensagens: list[dict[str, Any]]) -> bytes:
    # Compressed: a days-long conversation must stay well inside DynamoDB's 400 KB item.
    return zlib.compress(json.dumps(mensagens, ensure_ascii=False, separators=(",", ":")).encode())


def _decode_messages(blob: Any) -> list[dict[str, Any]]:
    if blob is None:
        return []
    raw = blob.value if hasattr(blob, "value") else blob  # boto3 Binary wrapper
    return json.loads(zlib.decompress(raw))


def table_definition(table_name: str) -> dict[str, Any]:
    """CreateTable arguments (local stack, tests); the CDK stack mirrors them."""
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": TABLE_KEY, "AttributeType": "S"},
            {"AttributeName": GSI_PARTITION, "AttributeType": "S"},
            {"AttributeName": GSI_SORT, "AttributeType": "S"},
            {"AttributeName": GSI_UNSETTLED_PARTITION, "AttributeType": "S"},
            {"AttributeName": GSI_UNSETTLED_SORT, "AttributeType": "S"},
        ],
        "KeySchema": [{"AttributeName": TABLE_KEY, "KeyType": "HASH"}],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": GSI_BY_CONVERSATION,
                "KeySchema": [
                    {"AttributeName": GSI_PARTITION, "KeyType": "HASH"},
                    {"AttributeName": GSI_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": GSI_UNSETTLED,
                "KeySchema": [
                    {"AttributeName": GSI_UNSETTLED_PARTITION, "KeyType": "HASH"},
                    {"AttributeName": GSI_UNSETTLED_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
        ],
    }
