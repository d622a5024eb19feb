"""The retry ceiling's records: one atomic counter per (conversation, subject, tool), one item per attempt.

``contador#{conversa}#{assunto}#{ferramenta}`` is numbered by ``UpdateItem ADD``:
DynamoDB applies it atomically, so N racing callers get the numbers 1..N, each
exactly once, and exactly ``ceiling`` of them are allowed (DESIGN invariant 2). No
read precedes it: there is no count-then-act window (the race in Lab 87's Query).
Each attempt then leaves ``tentativa#…#{n:04d}`` (PutItem attribute_not_exists),
in the conversation's history, with the decision and, later, its ``resultado``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from .table import (
    GSI_SORT,
    TABLE_KEY,
    ItemType,
    LedgerTable,
    attempt_history_sort,
    attempt_pk,
    counter_pk,
    serialize,
)

ATTEMPT_EVENT = "TENTATIVA_DE_FERRAMENTA_REGISTRADA"
RESULT_DETAIL_MAX = 500  # characters of an attempt's ``detalhe``


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


@dataclass(frozen=True)
class Attempt:
    conversation_id: str
    subject: str  # the order id, or a fixed subject for calls about no order
    order_id: str | None
    tool: str
    number: int  # 1, 2, ... for this (conversation, subject, tool)
    ceiling: int
    idempotency_key: str | None
    recorded_at: str

    @property
    def allowed(self) -> bool:
        return self.number <= self.ceiling

    def to_item(self) -> dict[str, Any]:
        result = AttemptResult.PENDING if self.allowed else AttemptResult.BLOCKED_BY_CEILING
        return {
            TABLE_KEY: attempt_pk(self.conversation_id, self.subject, self.tool, self.number),
            "tipo": ItemType.ATTEMPT.value, "evento": ATTEMPT_EVENT, "conversaId": self.conversation_id,
            "pedidoId": self.order_id, "assunto": self.subject, "ferramenta": self.tool,
            "tentativaNumero": self.number, "teto": self.ceiling,
            "decisao": "permitida" if self.allowed else "bloqueada_por_teto", "resultado": result.value,
            "chaveIdempotencia": self.idempotency_key, "timestamp": self.recorded_at,
            GSI_SORT: attempt_history_sort(self.recorded_at, self.number),
        }


class AttemptRecorder(Protocol):
    """What the retry ceiling (``orchestrator.controls.RetryCeiling``) needs of the ledger."""

    def register_attempt(self, *, conversation_id: str, subject: str, tool: str, ceiling: int,
                         order_id: str | None = None, idempotency_key: str | None = None) -> Attempt: ...

    def record_attempt_result(self, attempt: Attempt, result: AttemptResult, detail: str | None = None) -> None: ...


class AttemptStore:
    """Counters and attempt records, on ``self.table`` (a ``LedgerTable``)."""

    table: LedgerTable

    def register_attempt(self, *, conversation_id: str, subject: str, tool: str, ceiling: int,
                         order_id: str | None = None, idempotency_key: str | None = None) -> Attempt:
        """Number this attempt with one atomic counter write and record it.

        The ``ADD`` on the counter is the whole decision (module doc): exactly
        ``ceiling`` of any number of racing callers get a number <= ``ceiling``.
        """
        now = self.table.iso()
        resp = self.table.client.update_item(
            TableName=self.table.name,
            Key=self.table.key(counter_pk(conversation_id, subject, tool)),
            UpdateExpression="ADD tentativas :um SET tipo = :tipo, atualizadoEm = :agora",
            ExpressionAttributeValues=serialize({":um": 1, ":tipo": ItemType.COUNTER.value, ":agora": now}),
            ReturnValues="UPDATED_NEW",
        )
        attempt = Attempt(
            conversation_id=conversation_id, subject=subject, order_id=order_id, tool=tool,
            number=int(resp["Attributes"]["tentativas"]["N"]), ceiling=ceiling,
            idempotency_key=idempotency_key, recorded_at=now,
        )
        self.table.put_new(attempt.to_item())
        return attempt

    def attempt_results(self, *, conversation_id: str, subject: str, tool: str, limit: int) -> list[str]:
        """The ``resultado`` of the first ``limit`` numbered attempts at (conversation,
        subject, tool) — with ``limit`` = the ceiling, every attempt that was allowed to
        run. Strongly consistent GetItems by key (the output contract's evidence; no
        index read: the orchestrator's role has none on this table)."""
        counter = self.table.get(counter_pk(conversation_id, subject, tool))
        total = min(int(counter["tentativas"]), limit) if counter else 0
        items = (self.table.get(attempt_pk(conversation_id, subject, tool, number)) for number in range(1, total + 1))
        return [item["resultado"] for item in items if item is not None and "resultado" in item]

    def record_attempt_result(self, attempt: Attempt, result: AttemptResult, detail: str | None = None) -> None:
        values: dict[str, Any] = {":r": result.value, ":agora": self.table.iso()}
        expression = "SET resultado = :r, concluidoEm = :agora"
        if detail:
            expression += ", detalhe = :d"
            values[":d"] = detail[:RESULT_DETAIL_MAX]
        self.table.client.update_item(
            TableName=self.table.name,
            Key=self.table.key(attempt_pk(attempt.conversation_id, attempt.subject, attempt.tool, attempt.number)),
            UpdateExpression=expression,
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=serialize(values),
        )
